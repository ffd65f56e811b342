"""Which single ops and small combinations the built-in strategist covers, from a fixed list of
expressions (not a test; any machine, a few seconds an expression). Each expression becomes the
``forward`` of a KernelBench-format file with the inputs beside it, and the strategist's plan or its
reason for not covering is printed; the count at the end is the figure docs/BENCHMARKS.md quotes.
Whether a covered plan is correct is for ``kernelbench.py --mode cpu-judge`` and the template tests.

Usage: python bench/op_coverage.py [--only lerp,cat] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

EXPRESSIONS = {
    "lerp": ("torch.lerp(x, y, 0.3)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "lerp_t": ("torch.lerp(x, y, torch.sigmoid(y))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "where": ("torch.where(x > 0, x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "where_scalar": ("torch.where(x > 0, x, 0.0)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "addcmul": ("torch.addcmul(x, x, y, value=0.5)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "addcdiv": ("torch.addcdiv(x, x, y.abs() + 1, value=0.5)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "hypot": ("torch.hypot(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "atan2": ("torch.atan2(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "logaddexp": ("torch.logaddexp(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "xlogy": ("torch.xlogy(x.abs(), y.abs())", "torch.randn(64, 256), torch.randn(64, 256)"),
    "fmod": ("torch.fmod(x, 0.7)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "remainder": ("torch.remainder(x, 0.7)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "floor_divide": ("torch.floor_divide(x, 0.7)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "tan": ("torch.tan(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "atan": ("torch.atan(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "asin": ("torch.asin(x.clamp(-1, 1))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "sinh": ("torch.sinh(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "cosh": ("torch.cosh(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "asinh": ("torch.asinh(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "atanh": ("torch.atanh(x.clamp(-0.9, 0.9))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "trunc": ("torch.trunc(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "frac": ("torch.frac(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "round": ("torch.round(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "clamp_min": ("torch.clamp_min(x, 0.1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "clamp_min_m": ("x.clamp_min(0.1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "hardshrink": ("F.hardshrink(x, 0.5)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "softshrink": ("F.softshrink(x, 0.5)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "threshold": ("F.threshold(x, 0.1, 20.0)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "celu": ("F.celu(x, 1.5)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "gelu": ("F.gelu(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "elu_a": ("F.elu(x, alpha=0.7)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "softplus_b": ("F.softplus(x, beta=2.0, threshold=10.0)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "silu_m": ("nn.functional.silu(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "rrelu_eval": ("F.rrelu(x, training=False)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "log10": ("torch.log10(x.abs() + 1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "sigmoid_m": ("x.sigmoid()", "torch.randn(64, 256), torch.randn(64, 256)"),
    "tanh_m": ("x.tanh()", "torch.randn(64, 256), torch.randn(64, 256)"),
    "clip": ("torch.clip(x, -1, 1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "pow_t": ("torch.pow(x.abs() + 1, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "square_sub": ("(x - y) ** 2", "torch.randn(64, 256), torch.randn(64, 256)"),
    "rsub": ("1 - x", "torch.randn(64, 256), torch.randn(64, 256)"),
    "rdiv": ("2.0 / (x.abs() + 1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "nan_to_num": ("torch.nan_to_num(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "logit": ("torch.logit(torch.sigmoid(x), eps=1e-6)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "heaviside": ("torch.heaviside(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "copysign": ("torch.copysign(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "sgn": ("torch.sgn(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "signbit_where": ("torch.where(torch.signbit(x), -x, x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "isnan_where": ("torch.where(torch.isnan(x), 0.0, x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "erfc": ("torch.erfc(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "erfinv": ("torch.erfinv(x.clamp(-0.9, 0.9))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "sinc": ("torch.sinc(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "deg2rad": ("torch.deg2rad(x)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "exp_m": ("x.exp().log1p()", "torch.randn(64, 256), torch.randn(64, 256)"),
    "max_scalar": ("torch.clamp(x, max=0.5)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "fmax": ("torch.fmax(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "fmin": ("torch.fmin(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "relu_": ("F.relu(x, inplace=True) * 2", "torch.randn(64, 256), torch.randn(64, 256)"),
    "mul_": ("x.mul(2).add_(1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "sigmoid_tanh_gate": ("torch.sigmoid(x) * torch.tanh(y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "softmin": ("F.softmin(x, dim=1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "softmax_neg": ("torch.softmax(-x, dim=-1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "log_softmax_m": ("x.log_softmax(dim=-1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "cumsum_flip": ("x.flip(-1).cumsum(-1).flip(-1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "max_minus": ("x - x.max(dim=1, keepdim=True)[0]", "torch.randn(64, 256), torch.randn(64, 256)"),
    "mean_var": ("(x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()",
                 "torch.randn(64, 256), torch.randn(64, 256)"),
    "rms": ("x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "norm_dim": ("torch.norm(x, p=2, dim=1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "linalg_norm": ("torch.linalg.norm(x, dim=1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "var_mean": ("torch.var_mean(x, dim=1)[0]", "torch.randn(64, 256), torch.randn(64, 256)"),
    "std_unbiased": ("x.std(dim=1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "all_reduce": ("x.sum()", "torch.randn(64, 256), torch.randn(64, 256)"),
    "count_nonzero": ("torch.count_nonzero(x > 0, dim=1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "any": ("(x > 0).any(dim=1).float()", "torch.randn(64, 256), torch.randn(64, 256)"),
    "logcumsumexp": ("torch.logcumsumexp(x, dim=1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "cummax": ("torch.cummax(x, dim=1)[0]", "torch.randn(64, 256), torch.randn(64, 256)"),
    "cat_last": ("torch.cat([torch.relu(x), torch.sigmoid(y)], dim=-1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "cat_dim1": ("torch.cat([x, y * 2], dim=1)", "torch.randn(8, 16, 32), torch.randn(8, 16, 32)"),
    "stack": ("torch.stack([x, y], dim=0).sum(0)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "flip": ("torch.flip(x, dims=[1]) + y", "torch.randn(64, 256), torch.randn(64, 256)"),
    "roll": ("torch.roll(x, 3, dims=1) * y", "torch.randn(64, 256), torch.randn(64, 256)"),
    "slice_step": ("x[:, ::2] + y[:, 1::2]", "torch.randn(64, 256), torch.randn(64, 256)"),
    "slice_narrow": ("x[:, 10:100].relu()", "torch.randn(64, 256)"),
    "pad": ("F.pad(x, (1, 2)) * 2", "torch.randn(64, 256)"),
    "repeat": ("x.repeat(1, 2) + y", "torch.randn(64, 128), torch.randn(64, 256)"),
    "expand_add": ("x.expand(64, 256) * y", "torch.randn(1, 256), torch.randn(64, 256)"),
    "gather": ("torch.gather(x, 1, y.argmax(1, keepdim=True))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "index_select": ("torch.index_select(x, 0, torch.arange(0, 64, 2, device=x.device))", "torch.randn(64, 256)"),
    "outer": ("torch.outer(x, y)", "torch.randn(256), torch.randn(128)"),
    "diag_embed_mul": ("torch.diag(x) @ y", "torch.randn(128), torch.randn(128, 64)"),
    "trace": ("torch.trace(x)", "torch.randn(256, 256)"),
    "triu_in": ("torch.triu(x) @ y", "torch.randn(128, 128), torch.randn(128, 64)"),
    "matmul_tT": ("x @ y.t()", "torch.randn(128, 64), torch.randn(96, 64)"),
    "bmm_softmax": ("torch.softmax(torch.bmm(x, y.transpose(1, 2)) / 8.0, dim=-1)",
                    "torch.randn(4, 64, 32), torch.randn(4, 64, 32)"),
    "sdpa": ("F.scaled_dot_product_attention(x, y, y)", "torch.randn(2, 4, 64, 32), torch.randn(2, 4, 64, 32)"),
    "sdpa_causal": ("F.scaled_dot_product_attention(x, y, y, is_causal=True)",
                    "torch.randn(2, 4, 64, 32), torch.randn(2, 4, 64, 32)"),
    "einsum_bhqd": ("torch.einsum('bhqd,bhkd->bhqk', x, y)", "torch.randn(2, 4, 64, 32), torch.randn(2, 4, 64, 32)"),
    "mv": ("torch.mv(x, y)", "torch.randn(256, 128), torch.randn(128)"),
    "dot": ("torch.dot(x, y)", "torch.randn(4096), torch.randn(4096)"),
    "baddbmm": ("torch.baddbmm(x, y, y.transpose(1, 2))", "torch.randn(4, 64, 64), torch.randn(4, 64, 32)"),
    "addmm": ("torch.addmm(x, y, y.t())", "torch.randn(64, 64), torch.randn(64, 32)"),
    "unfold": ("F.unfold(x, 3)", "torch.randn(2, 4, 16, 16)"),
    "interp_bilinear": ("F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)",
                        "torch.randn(2, 4, 16, 16)"),
    "one_hot_mul": ("F.one_hot(y.argmax(1), 256).float() * x", "torch.randn(64, 256), torch.randn(64, 256)"),
    "chunk_cat": ("torch.cat(x.chunk(2, dim=1)[::-1], dim=1)", "torch.randn(64, 256)"),
    "mean_all": ("x.mean()", "torch.randn(64, 256)"),
    "sum_dims_keep": ("x.sum(dim=(1, 2), keepdim=True) * x", "torch.randn(8, 16, 32)"),
    "max_all": ("x.max()", "torch.randn(64, 256)"),
    "std_last": ("x.std(dim=-1)", "torch.randn(64, 256)"),
    "median": ("x.median(dim=1).values", "torch.randn(64, 255)"),
    "kthvalue": ("x.kthvalue(5, dim=1).values", "torch.randn(64, 256)"),
    "clamp_tensor": ("torch.clamp(x, min=y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "masked_fill_input": ("x.masked_fill(y > 0, -1e9).softmax(-1)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "where_scalar_tensor": ("torch.where(y > 0.5, x, torch.zeros_like(x))",
                            "torch.randn(64, 256), torch.randn(64, 256)"),
    "cumsum_rev": ("torch.cumsum(x.flip(1), 1).flip(1)", "torch.randn(64, 256)"),
    "layer_norm_fn": ("F.layer_norm(x, (256,))", "torch.randn(64, 256)"),
    "group_norm_fn": ("F.group_norm(x, 4)", "torch.randn(8, 16, 32)"),
    "batch_norm_fn_eval": ("F.batch_norm(x, torch.zeros(16, device=x.device), torch.ones(16, device=x.device), training=False)",  # noqa: E501
                           "torch.randn(8, 16, 32)"),
    "instance_norm_fn": ("F.instance_norm(x)", "torch.randn(8, 16, 32)"),
    "local_response_norm": ("F.local_response_norm(x, 3)", "torch.randn(8, 16, 32)"),
    "cross_entropy_fn": ("F.cross_entropy(x, y.argmax(1))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "bce": ("F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y))", "torch.randn(64, 256), torch.randn(64, 256)"),
    "margin_ranking": ("F.margin_ranking_loss(x, y, torch.sign(x - y))", "torch.randn(256), torch.randn(256)"),
    "hinge": ("torch.clamp(1 - x * y, min=0).mean()", "torch.randn(64, 256), torch.randn(64, 256)"),
    "pairwise_distance": ("F.pairwise_distance(x, y)", "torch.randn(64, 256), torch.randn(64, 256)"),
    "cdist": ("torch.cdist(x, y)", "torch.randn(64, 32), torch.randn(48, 32)"),
    "softmax_dim0_3d": ("torch.softmax(x, dim=1)", "torch.randn(8, 16, 32)"),
    "logsoftmax_temp": ("F.log_softmax(x / 0.7, dim=-1)", "torch.randn(64, 256)"),
    "gelu_tanh_mul": ("F.gelu(x, approximate='tanh') * y", "torch.randn(64, 256), torch.randn(64, 256)"),
    "swiglu": ("F.silu(x[:, :128]) * x[:, 128:]", "torch.randn(64, 256)"),
    "dropout_eval": ("F.dropout(x, 0.5, training=False) + 1", "torch.randn(64, 256)"),
    "cumprod": ("torch.cumprod(x, 1)", "torch.rand(64, 256) + 0.5"),
    "argsort": ("torch.argsort(x, dim=1)", "torch.randn(64, 256)"),
    "maxpool_idx": ("F.max_pool1d(x, 2, return_indices=True)[0]", "torch.randn(8, 16, 32)"),
}
"""name: (forward's return expression over ``x`` (and ``y``), the inputs' expression)."""

FILE = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {expression}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def covered(expression: str, inputs: str, folder: Path) -> tuple[bool, str]:
    from kernelevo.agent.builtin.program import CannotCover
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.tasks import load_task

    args = "x, y" if inputs.count("torch.r") == 2 else "x"
    path = folder / "task.py"
    path.write_text(FILE.format(args=args, expression=expression, inputs=inputs))
    try:
        return True, recognise(load_task(str(path), "full")).describe()
    except CannotCover as exc:
        return False, str(exc)
    except Exception as exc:  # a planner fault is a finding of its own
        return False, f"planner error: {type(exc).__name__}: {exc}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated names")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (expression, inputs) in EXPRESSIONS.items():
            if wanted and name not in wanted:
                continue
            ok, what = covered(expression, inputs, Path(scratch))
            rows[name] = {"covered": ok, "plan" if ok else "reason": what[:200]}
            if not args.json:
                print(f"{name:22s} {'yes' if ok else 'no '} {what[:150]}", flush=True)
    done = sum(r["covered"] for r in rows.values())
    if args.json:
        print(json.dumps({"covered": done, "of": len(rows), "rows": rows}, indent=1))
    else:
        print(f"covered {done} of {len(rows)}")


if __name__ == "__main__":
    main()
