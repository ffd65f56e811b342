"""Pointwise functions rewritten as the primitives the lowering knows (``rewrite_pointwise``): the
rewritten graph computes what torch computes, signed zeros, ties and values far out included, and
keeps none of the functions it rewrote. Pure graph logic: no kernel runs."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.lower import trace

EXPRESSIONS = {
    "lerp": "torch.lerp(x, y, 0.3)", "lerp-high-weight": "torch.lerp(x, y, 0.8)",
    "lerp-tensor-weight": "x.lerp(y, torch.sigmoid(y) * 1.5 - 0.2)",
    "addcmul": "torch.addcmul(x, x, y, value=0.5)", "addcdiv": "x.addcdiv(x, y.abs() + 1, value=-0.5)",
    "hypot": "torch.hypot(x, y)", "atan2": "torch.atan2(x, y)", "logaddexp": "torch.logaddexp(x, y)",
    "xlogy": "torch.xlogy(F.relu(x), y.abs())", "fmod": "torch.fmod(x, 0.7)", "fmod-tensor": "torch.fmod(x, y)",
    "remainder": "torch.remainder(x, 0.7)", "remainder-negative": "torch.remainder(x, -0.7)",
    "remainder-tensor": "x.remainder(y)", "floor-divide": "torch.floor_divide(x, 0.7)",
    "floor-divide-tensor": "torch.floor_divide(x, y)", "div-floor": "torch.div(x, y, rounding_mode='floor')",
    "div-trunc": "x.div(y, rounding_mode='trunc')", "add-alpha": "torch.add(x, y, alpha=2.5)",
    "sub-alpha": "x.sub(y, alpha=0.5)", "tan": "torch.tan(x)", "atan": "torch.atan(x)",
    "asin": "torch.asin(torch.tanh(x))", "acos": "x.tanh().acos()", "sinh": "torch.sinh(x)", "cosh": "torch.cosh(x)",
    "sinh-far-out": "torch.sinh(x.clamp(-3, 3) * 29.5)", "cosh-far-out": "torch.cosh(x.clamp(-3, 3) * 29.5)",
    "asinh": "torch.asinh(x)", "acosh": "torch.acosh(x.abs() + 1)", "atanh": "torch.atanh(torch.tanh(x))",
    "frac": "torch.frac(x)", "round": "torch.round(x * 2)", "clamp-min": "torch.clamp_min(x, 0.1)",
    "clamp-max-method": "x.clamp_max(0.1)", "hardshrink": "F.hardshrink(x, 0.5)",
    "softshrink": "F.softshrink(x, 0.5)", "threshold": "F.threshold(x, 0.1, 20.0)", "celu": "F.celu(x, 1.5)",
    "rrelu-not-training": "F.rrelu(x, training=False)", "log10": "torch.log10(x.abs() + 1)",
    "pow-tensor": "torch.pow(x, y)", "pow-fraction": "x ** 1.5", "pow-4": "x ** 4", "pow-minus-3": "torch.pow(x, -3)",
    "pow-fraction-positive": "torch.pow(x.abs(), 0.7)", "number-to-a-power": "2.0 ** x",
    "nan-to-num": "torch.nan_to_num(torch.log(x))",
    "nan-to-num-values": "torch.nan_to_num(torch.log(x), nan=1.0, posinf=2.0, neginf=-3.0)",
    "logit": "torch.logit(torch.sigmoid(x), eps=1e-6)", "heaviside": "torch.heaviside(torch.round(x), y)",
    "copysign": "torch.copysign(x, y)", "copysign-number": "torch.copysign(x, -2.0)", "sgn": "torch.sgn(x)",
    "signbit": "torch.where(torch.signbit(x), -x, x)", "isnan": "torch.where(torch.isnan(torch.log(x)), 0.0, x)",
    "isinf": "torch.where(torch.isinf(1.0 / torch.round(x)), 1.0, x)",
    "isfinite": "torch.where(torch.isfinite(torch.log(x)), x, 0.0)", "erfc": "torch.erfc(x)",
    "sinc": "torch.sinc(torch.round(x * 2) / 2)", "deg2rad": "torch.deg2rad(x)", "rad2deg": "x.rad2deg()",
    "fmax": "torch.fmax(torch.log(x), y)", "fmin": "torch.fmin(x, torch.log(y))", "softmin": "F.softmin(x, dim=1)",
    "in-place-method": "x.mul(2).add_(y)",
    # reductions written as the ones the planners know
    "linalg-norm-over-a-dim": "torch.linalg.norm(x, dim=1)", "linalg-norm-frobenius": "torch.linalg.norm(x, dim=(0, 1))",
    "linalg-norm-1-keepdim": "torch.linalg.norm(x, ord=1, dim=1, keepdim=True)",
    "var-mean": "torch.var_mean(x, dim=1)[0] + torch.var_mean(x, dim=1)[1]",
    "std-mean-keepdim": "x - torch.std_mean(x, dim=1, keepdim=True, correction=0)[1]",
}
REWRITTEN = {"lerp", "addcmul", "addcdiv", "hypot", "atan2", "logaddexp", "xlogy", "remainder", "floor_divide",
             "tan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "frac", "round", "clamp_min",
             "clamp_max", "hardshrink", "softshrink", "threshold", "celu", "rrelu", "log10", "nan_to_num", "logit",
             "heaviside", "copysign", "sgn", "signbit", "isnan", "isinf", "isfinite", "erfc", "sinc", "deg2rad",
             "rad2deg", "fmax", "fmin", "softmin", "add_", "linalg_norm", "var_mean", "std_mean"}


def _traced(expression: str, x: torch.Tensor, y: torch.Tensor) -> tuple[nn.Module, torch.fx.GraphModule]:
    namespace = {"torch": torch, "nn": nn, "F": F}
    exec(f"class M(nn.Module):\n    def forward(self, x, y):\n        return {expression}\n", namespace)
    model = namespace["M"]()
    return model, trace(model, [x, y])


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 256, generator=generator) * 3, torch.randn(64, 256, generator=generator) * 2
    # zeros of both signs, halves (ties of round), ones and their negatives, side by side
    x[0, :8] = torch.tensor([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0])
    y[0, :8] = torch.tensor([0.0, 1.0, -1.0, 0.0, 2.0, -0.5, 0.5, 3.0])
    return x, y


@pytest.mark.parametrize("expression", list(EXPRESSIONS.values()), ids=list(EXPRESSIONS))
def test_a_rewritten_function_computes_what_torch_computes(expression: str) -> None:
    x, y = _inputs()
    model, traced = _traced(expression, x, y)
    names = {n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
             for n in traced.graph.nodes if n.op in ("call_function", "call_method")}
    assert not names & REWRITTEN, names & REWRITTEN
    torch.testing.assert_close(traced(x, y), model(x, y), rtol=2e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("expression", ["torch.atan2(x, y)", "torch.copysign(y, x)",
                                        "torch.where(torch.signbit(x), 1.0, 2.0)"])
def test_signed_zeros_keep_their_sign(expression: str) -> None:
    """atan2(+-0, -0) is +-pi and copysign(1, -0.0) is -1: the ties variant of the judge's inputs makes
    -0.0 from small negative values, so these decide correctness there."""
    x = torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, -0.0, float("nan"), 2.0])
    y = torch.tensor([0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -1.0, -1.0, 1.0, float("nan")])
    model, traced = _traced(expression, x, y)
    want, got = model(x, y), traced(x, y)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.equal(torch.signbit(got) & ~torch.isnan(got), torch.signbit(want) & ~torch.isnan(want))


def test_options_a_rewrite_does_not_follow_leave_the_call_as_it_was() -> None:
    x, y = _inputs()
    for expression, kept in (("torch.round(x, decimals=2)", "round"), ("F.rrelu(x, training=True)", "rrelu")):
        _, traced = _traced(expression, x, y)
        assert kept in {getattr(n.target, "__name__", str(n.target)) for n in traced.graph.nodes}


SHAPED = {
    "clamp-tensor-bounds": ("torch.clamp(x, min=y, max=y + 1.0)", (64, 256), (64, 256)),
    "clip-tensor-low": ("x.clip(y)", (64, 256), (64, 256)),
    "dropout-not-training": ("F.dropout(x, 0.3, training=False) + y", (64, 256), (64, 256)),
    "mv": ("torch.mv(x, y)", (64, 32), (32,)), "dot": ("torch.dot(x, y)", (512,), (512,)),
    "outer": ("torch.outer(x, y)", (64,), (32,)),
    "addmm": ("torch.addmm(x[:, :16], x, y, beta=0.5, alpha=2.0)", (64, 32), (32, 16)),
    "baddbmm": ("torch.baddbmm(x, x, y)", (4, 16, 16), (4, 16, 16)),
    "binary-cross-entropy": ("F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y))", (64, 256), (64, 256)),
    "bce-sum": ("F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y), reduction='sum')", (64, 256), (64, 256)),
    "margin-ranking": ("F.margin_ranking_loss(x, y, torch.sign(x - y), margin=0.2)", (256,), (256,)),
    "pairwise-distance": ("F.pairwise_distance(x, y, p=1.0, keepdim=True)", (64, 256), (64, 256)),
}
FUNCTIONS = {"dropout", "mv", "dot", "outer", "addmm", "baddbmm", "binary_cross_entropy",
             "margin_ranking_loss", "pairwise_distance"}


@pytest.mark.parametrize(("expression", "x_shape", "y_shape"), list(SHAPED.values()), ids=list(SHAPED))
def test_products_losses_and_bounds_are_rewritten_as_torch_computes_them(expression: str, x_shape: tuple,
                                                                         y_shape: tuple) -> None:
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(x_shape, generator=generator), torch.randn(y_shape, generator=generator)
    model, traced = _traced(expression, x, y)
    names = {n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
             for n in traced.graph.nodes if n.op in ("call_function", "call_method", "call_module")}
    assert not names & FUNCTIONS and not [n for n in traced.graph.nodes if n.op == "call_module"], names
    torch.testing.assert_close(traced(x, y), model(x, y), rtol=2e-5, atol=1e-5)


def test_a_loss_module_is_its_function_with_its_options_named_as_the_function_names_them() -> None:
    """``PairwiseDistance(p=1)`` keeps its p as ``norm``; the function takes it as ``p``."""

    class Distances(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.distance = nn.PairwiseDistance(p=1.0, keepdim=True)
            self.loss = nn.MarginRankingLoss(margin=0.3, reduction="sum")

        def forward(self, x, y):
            return self.distance(x, y).sum() + self.loss(x[:, 0], y[:, 0], torch.sign(x[:, 1]))

    generator = torch.Generator().manual_seed(2)
    x, y = torch.randn(64, 32, generator=generator), torch.randn(64, 32, generator=generator)
    model = Distances()
    traced = trace(model, [x, y])
    assert not [n for n in traced.graph.nodes if n.op == "call_module"]
    torch.testing.assert_close(traced(x, y), model(x, y), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("expression", ["torch.where(y > 0.5, x, torch.zeros_like(x))",
                                        "x * torch.ones_like(y) + torch.full_like(x, 2.5)",
                                        "torch.maximum(x, torch.full_like(x, 0.25))"])
def test_a_tensor_of_one_value_shaped_like_another_is_that_value(expression: str) -> None:
    x, y = _inputs()
    model, traced = _traced(expression, x, y)
    assert not [n for n in traced.graph.nodes if getattr(n.target, "__name__", "").endswith("_like")]
    torch.testing.assert_close(traced(x, y), model(x, y))


def test_instance_norm_from_the_inputs_statistics_is_its_formula() -> None:
    class Normed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.rand(6) + 0.5)
            self.bias = nn.Parameter(torch.randn(6))

        def forward(self, x, y):
            return F.instance_norm(x, eps=1e-3) * self.weight[:, None, None] + F.instance_norm(y)

    generator = torch.Generator().manual_seed(3)
    x, y = torch.randn(4, 6, 9, 7, generator=generator) * 3 + 1, torch.randn(4, 6, 9, 7, generator=generator)
    model = Normed()
    traced = trace(model, [x, y])
    assert not [n for n in traced.graph.nodes if n.target is F.instance_norm]
    torch.testing.assert_close(traced(x, y), model(x, y), rtol=1e-5, atol=1e-5)


IN_PLACE_STATEMENTS = {
    "masked-fill-statement": "        y = x * 2\n        y.masked_fill_(y > 0, 0.0)\n        return torch.tan(y)",
    "sin-statement": "        y = x * 2\n        y.sin_()\n        return torch.tan(y)",
    "relu-inplace-keyword": "        y = x * 2\n        F.relu(y, inplace=True)\n        return torch.tan(y)",
    "relu-inplace-alias": "        y = x * 2\n        r = F.relu(y, inplace=True)\n        y.add_(1)\n        return r",
    "threshold-inplace": "        y = x * 2\n        t = F.threshold(y, 0.1, 0.0, inplace=True)\n        return t + y",
    "celu-inplace-positional": "        y = x * 2\n        t = F.celu(y, 1.0, True)\n        return t + y",
    "chain-of-writes": "        z = x * 2\n        z += y0\n        z.mul_(0.5)\n        return z.clamp_(min=-1.0) - z",
    "view-before-a-write": "        y = x * 2\n        v = y.view(-1)\n        y.add_(1)\n        return v.sum() + y",
}


@pytest.mark.parametrize("body", list(IN_PLACE_STATEMENTS.values()), ids=list(IN_PLACE_STATEMENTS))
def test_writes_in_place_the_rewrites_do_not_make_stay_as_written(body: str) -> None:
    """A rewrite elsewhere in the graph never drops a write whose result nothing reads, and a value
    written by an in-place function is read as written through every name it has."""
    namespace = {"torch": torch, "nn": nn, "F": F}
    exec(f"class M(nn.Module):\n    def forward(self, x, y0):\n{body}\n", namespace)
    model = namespace["M"]()
    x, y = _inputs()
    traced = trace(model, [x.clone(), y])
    torch.testing.assert_close(traced(x.clone(), y), model(x.clone(), y), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("expression", ["x.abs() ** 1.5", "(x.abs() * 10) ** 2.5", "torch.hypot(x * 60, y * 80)",
                                        "torch.sinh(x.clamp(-3, 3) * 3.8)", "torch.erfc(x)", "torch.round(x * 300)"])
def test_in_half_precision_a_rewrite_computes_in_fp32_and_rounds_once(expression: str, dtype: torch.dtype) -> None:
    x, y = (v.to(dtype) for v in _inputs())
    model, traced = _traced(expression, x, y)
    want, got = model(x, y), traced(x, y)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2 if dtype == torch.bfloat16 else 1e-3,
                               atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("expression", ["torch.xlogy(x, 2.0)", "torch.xlogy(x.abs(), 0.0)",
                                        "torch.logaddexp(torch.log(x * 0), torch.log(y * 0))",
                                        "torch.logaddexp(x / 0, y / 0)", "torch.floor_divide(x, 0.0)",
                                        "torch.div(x, 0.0, rounding_mode='floor')",
                                        "F.softshrink(torch.sqrt(x), 0.5)"])
def test_numbers_zeros_and_infinities_as_torch_gives_them(expression: str) -> None:
    x, y = _inputs()
    model, traced = _traced(expression, x, y)
    torch.testing.assert_close(traced(x, y), model(x, y), equal_nan=True)


APART = ["torch.amax(x, dim=(0, 2))", "x.amin((2, 0), keepdim=True)", "torch.sum(x, dim=(-1, 1))",
         "x.sum((0, 2, 3), keepdim=True)", "torch.mean(x, (0, 3))", "x.mean(dim=[1, 3], keepdim=True)",
         "torch.logsumexp(x, dim=(0, 2))", "torch.linalg.vector_norm(x, 2, dim=(0, 2))",
         "torch.norm(x, p=1, dim=(1, 3), keepdim=True)", "x.norm(float('inf'), (0, 3))",
         "torch.linalg.vector_norm(x, ord=2, dim=(3, 1, 0))", "torch.linalg.vector_norm(x, ord=3, dim=(0, 2))",
         "torch.linalg.vector_norm(x, 0, dim=(1, 3))", "torch.norm(x, p=float('-inf'), dim=(0, 3), keepdim=True)",
         "x.norm(-1.5, (1, 2))", "torch.linalg.vector_norm(x, 0.5)"]


@pytest.mark.parametrize("expression", APART)
def test_a_reduction_over_dims_apart_is_reductions_over_runs_of_neighbours(expression: str) -> None:
    """Each reduction of the rewritten graph is over one run of adjacent dims, and the result is what
    torch computes over the set (to the rounding of another order of additions)."""
    from kernelevo.agent.builtin.rewrite_reductions import runs

    generator = torch.Generator().manual_seed(2)
    x = torch.randn(5, 6, 7, 8, generator=generator)
    model, traced = _traced(expression, x, x)
    for node in traced.graph.nodes:
        dim = node.kwargs.get("dim", node.args[1] if node.op == "call_function" and len(node.args) > 1 and
                              not isinstance(node.args[1], float) else None)
        if isinstance(dim, (tuple, list)):
            assert len(runs(sorted(d % 4 for d in dim))) == 1, (node.format_node(), traced.code)
    assert sum(n.op == "call_function" for n in traced.graph.nodes) >= 2, traced.code
    want = model(x, x)
    got = traced(x, x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_reductions_that_do_not_nest_stay_as_written() -> None:
    """A variance over dims apart is not a variance of variances; a max over adjacent dims is one call."""
    x = torch.randn(5, 6, 7)
    for expression in ("torch.var(x, dim=(0, 2))", "torch.amax(x, dim=(0, 1))"):
        _, traced = _traced(expression, x, x)
        assert sum(n.op in ("call_function", "call_method") for n in traced.graph.nodes) == 1, traced.code


def test_a_dtype_option_is_the_cast_it_makes_first() -> None:
    """``sum(x, dtype=float64)`` casts ``x`` before it sums (torch's definition): the cast, then sums
    the templates know, computing the same values in float64."""
    x = torch.randn(5, 6, 7)
    model, traced = _traced("torch.sum(x, dim=(0, 2), dtype=torch.float64)", x, x)
    assert "to(torch.float64)" in traced.code and "dtype" not in traced.code.replace("torch.float64", ""), traced.code
    got, want = traced(x, x), model(x, x)
    assert got.dtype == want.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("body", "looked_up"), [
    ("return F.one_hot(i, 40).float() @ self.w", True),
    ("return torch.matmul(F.one_hot(i, num_classes=40).to(torch.float32), self.w)", True),
    ("h = F.one_hot(i, 40).float()\n        return h @ self.w + h[..., :24]", False),  # the one-hot read again
    ("return F.one_hot(i, 40).double() @ self.w.double()", True),  # rows of a computed table
])
def test_a_one_hot_matmul_is_a_lookup_of_the_rows_it_selects(body: str, looked_up: bool) -> None:
    """Each row of ``one_hot(i) @ w`` has one term, ``1 * w[i]``: the lookup is the same value, exactly,
    without the GEMM over rows of zeros; a one-hot read for anything else stays as it is."""
    source = ("class OneHot(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.w = nn.Parameter(torch.randn(40, 24))\n\n"
              f"    def forward(self, i):\n        {body}\n")
    space = {"nn": nn, "torch": torch, "F": F}
    exec(source, space)
    model = space["OneHot"]()
    i = torch.randint(0, 40, (3, 50), generator=torch.Generator().manual_seed(3))
    traced = trace(model, [i])
    names = {getattr(n.target, "__name__", str(n.target)) for n in traced.graph.nodes}
    assert ("embedding" in names and "one_hot" not in names) == looked_up, names
    assert torch.equal(traced(i), model(i))


def test_a_call_that_writes_in_place_is_kept_where_a_rewrite_drops_its_result() -> None:
    """``addmm`` with ``beta=0`` no longer reads ``c``; ``c = torch.relu_(h)`` still changed ``h``."""

    class InPlace(nn.Module):
        def forward(self, x, a, b):
            h = x * 2
            c = torch.relu_(h)
            return torch.addmm(c, a, b, beta=0) + h

    generator = torch.Generator().manual_seed(4)
    x, a, b = (torch.randn(s, generator=generator) for s in ((8, 16), (8, 32), (32, 16)))
    model = InPlace()
    traced = trace(model, [x, a, b])
    assert "relu_" in {getattr(n.target, "__name__", str(n.target)) for n in traced.graph.nodes}
    torch.testing.assert_close(traced(x, a, b), model(x, a, b))


class _FilledTimes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.full(x.shape, 1.003, dtype=x.dtype)


def test_a_filled_tensor_becomes_the_number_its_dtype_holds() -> None:
    """``torch.full(shape, 1.003, dtype=bfloat16)`` holds 1.0: the product takes 1.0, not 1.003."""
    from torch.fx.passes.shape_prop import ShapeProp

    from kernelevo.agent.builtin.rewrite_in_place import fold_filled_like

    x = torch.randn(4, 8).to(torch.bfloat16)
    gm = torch.fx.symbolic_trace(_FilledTimes())
    ShapeProp(gm).propagate(x)
    assert fold_filled_like(gm)
    numbers = [a for n in gm.graph.nodes if n.op == "call_function" for a in n.args if isinstance(a, float)]
    assert numbers == [1.0]


HELPER_WITH_DEFAULT = '''import torch
import torch.nn as nn

EPS = 1e-3


class Norm(nn.Module):
    def extra_repr(self):
        return "norm"

    def __init__(self, dim, eps=EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))


class Model(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.norm = Norm(dim)

    def forward(self, x):
        return x * self.norm.weight + self.norm.eps
'''


def test_constants_read_by_any_methods_defaults_are_carried(tmp_path) -> None:  # noqa: ANN001
    """A helper class whose ``__init__`` is not its first method still brings ``EPS`` along."""
    from kernelevo.agent.builtin.init_source import init_source
    from kernelevo.tasks.loader import import_task_module

    path = tmp_path / "helper.py"
    path.write_text(HELPER_WITH_DEFAULT + "\n\ndef get_inputs():\n    return [torch.randn(2, 8)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    _, needs = init_source(import_task_module(path, "full").Model)
    assert any(n.strip() == "EPS = 0.001" or n.strip().startswith("EPS =") for n in needs), needs


WHOLE = {"broadcast-row": ("(x * y[0]).sum()", True), "per-row-target": ("torch.clamp(1 - x * y[:, :1], min=0).mean()", True),
         "slices": ("(x[:, 1:] - x[:, :-1]).pow(2).sum()", True), "same-shapes": ("((x - y) ** 2).mean()", False),
         "all-dims-listed": ("(x * y[0]).sum(dim=(0, 1), keepdim=True)", True), "an-input": ("x.sum()", False)}


@pytest.mark.parametrize(("expression", "nested"), list(WHOLE.values()), ids=list(WHOLE))
def test_a_whole_reduction_reading_a_broadcast_tensor_or_a_view_is_per_row_then_over_rows(expression: str,
                                                                                           nested: bool) -> None:
    """Over the whole tensor, only values laid out alike share one run: a tensor broadcast against them,
    or a view, is read per row first. What the rewrite computes is what torch computes."""
    x, y = _inputs()
    model, traced = _traced(expression, x, y)
    sums = [n for n in traced.graph.nodes if n.op in ("call_function", "call_method")
            and str(getattr(n.target, "__name__", n.target)) in ("sum", "mean")]
    assert len(sums) == (2 if nested else 1), traced.code
    if nested:
        assert sums[0].args[1] == 1, traced.code  # the last dimension first
    want, got = model(x, y), traced(x, y)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-3)


SLICES = {"size-less-one-stop": ("x[:, :x.size(1) - 1] * 2", (slice(None), slice(None, -1))),
          "shape-less-one-start": ("x[x.shape[0] - 1:, :] + 1", (slice(-1, None), slice(None))),
          "size-less-two-stays": ("x[:, :x.size(1) - 2] * 2", None),
          "another-tensors-size-stays": ("x[:, :y[:, :9].size(1) - 1] * 2", None),
          "another-dims-size-stays": ("x[:, :x.size(0) - 1] * 2", None)}


@pytest.mark.parametrize(("expression", "index"), list(SLICES.values()), ids=list(SLICES))
def test_a_slice_to_the_size_less_one_is_a_slice_to_minus_one(expression: str, index: tuple | None) -> None:
    """``:n - 1`` of the sliced dimension's own size is ``:-1`` at every size; any other bound stays."""
    import operator

    x, y = _inputs()
    model, traced = _traced(expression, x, y)
    taken = [n for n in traced.graph.nodes if n.op == "call_function" and n.target is operator.getitem
             and n.args[0].name == "x"]
    assert len(taken) == 1, traced.code
    if index is not None:
        assert taken[0].args[1] == index, traced.code
    else:
        assert any(isinstance(b, torch.fx.Node) for p in taken[0].args[1] if isinstance(p, slice)
                   for b in (p.start, p.stop)), traced.code
    for shape in ((64, 256), (1, 1), (3, 0)):
        a, b = torch.randn(shape), torch.randn(shape[0], max(shape[1], 9))
        assert torch.equal(traced(a, b), model(a, b)), (shape, traced.code)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("expression", ["(x * y[0]).sum()", "(x * 1.0).sum(dim=(0, 2))", "x.abs().mean(dim=(0, 2))",
                                        "torch.linalg.vector_norm(x, 2, dim=(0, 2))"])
def test_nested_reductions_in_half_precision_accumulate_in_fp32_and_round_once(expression: str,
                                                                               dtype: torch.dtype) -> None:
    """Rows that cancel, each past fp16's range: rounding the first reduction's values would give
    NaN (inf - inf) or lose what the rows leave over; torch accumulates in fp32 and rounds once."""
    generator = torch.Generator().manual_seed(3)
    base = (torch.randn(4, 512, generator=generator) + 3) * 50  # rows of about 76800: past fp16's 65504
    x = torch.stack([base, -base + 0.01 * torch.randn(4, 512, generator=generator)])
    x, y = x.to(dtype), torch.ones(4, 512, dtype=dtype)
    model, traced = _traced(expression, x, y)
    want, got = model(x, y), traced(x, y)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)
