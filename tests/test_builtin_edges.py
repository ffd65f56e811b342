"""The built-in strategist on references written in ways its templates could trip over: input names
that the generated code also uses, submodules named like generated methods, a window that differs
between the small and the full size, rows that are all -inf. Each was a wrong or crashing
candidate once."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from conftest import ROOT
from kernelevo.agent.builtin.policy import seeds
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.recognize import recognise
from kernelevo.agent.builtin.templates import render
from kernelevo.tasks import load_task

MATMUL_CLASH = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tail = nn.Linear(48, 40)

    def forward(self, x, h):
        return torch.softmax(self.tail(x) + h, dim=-1)


def get_inputs():
    return [torch.randn(5, 48), torch.randn(5, 40)]


def get_init_inputs():
    return []
'''

CONV_CLASH = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x, w):
        return self.conv(x) + w


def get_inputs():
    return [torch.randn(2, 3, 8, 8), torch.randn(2, 4, 6, 6)]


def get_init_inputs():
    return []
'''

WINDOW_FOLLOWS_SIZE = '''import torch
import torch.nn as nn

kernel_size = 4
SMALL = {"kernel_size": 2}


class Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.pool = nn.AvgPool1d(k)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(2, 3, 64)]


def get_init_inputs():
    return [kernel_size]
'''


def _first_seed(path: Path, size: str = "full") -> str:
    plan = recognise(load_task(str(path), size))
    strategy, params, why = seeds(plan)[0]
    return render(plan, strategy, params, why)


def _judge_first_seed(evaluator, task_file: Path, judged_at: Any, rendered_at: str = "full"):  # noqa: ANN001, ANN202
    """The first seed rendered for ``task_file`` at ``rendered_at`` and judged on ``judged_at`` (a task,
    or the size to load the file at): ``(verdict, exit code)``."""
    candidate = task_file.parent / "candidate.py"
    candidate.write_text(_first_seed(task_file, rendered_at))
    task = load_task(str(task_file), judged_at) if isinstance(judged_at, str) else judged_at
    return evaluator.evaluate(task, candidate)


def test_inputs_named_like_generated_locals_are_renamed_and_no_method_hides_a_submodule(tmp_path: Path) -> None:
    """A residual input ``h`` used to be overwritten by the GEMM's own ``h`` (and ``w`` by the
    convolution's width), and a submodule ``tail`` was hidden by the GEMM's row-kernel method."""
    for name, text, inputs in (("mm.py", MATMUL_CLASH, ["x", "input_h"]), ("conv.py", CONV_CLASH, ["x", "input_w"])):
        path = tmp_path / name
        path.write_text(text)
        assert recognise(load_task(str(path), "full")).inputs == inputs
    source = _first_seed(tmp_path / "mm.py")
    assert "def _kernelevo_tail(self" in source and "def tail(" not in source


@pytest.mark.slow
@pytest.mark.parametrize("text", [MATMUL_CLASH, CONV_CLASH], ids=["matmul", "conv"])
def test_clashing_names_are_judged_correct(evaluator, tmp_path: Path, text: str) -> None:
    task_file = tmp_path / "clash.py"
    task_file.write_text(text)
    verdict, code = _judge_first_seed(evaluator, task_file, "small")
    assert code == 0, verdict.reason


@pytest.mark.slow
def test_a_pooling_window_is_read_at_run_time(evaluator, tmp_path: Path) -> None:
    """The window follows a size: the plan is made at the small size (window 2), the candidate must
    still pool with the full size's window (4)."""
    task_file = tmp_path / "pool.py"
    task_file.write_text(WINDOW_FOLLOWS_SIZE)
    verdict, code = _judge_first_seed(evaluator, task_file, "full", rendered_at="small")
    assert code == 0, verdict.reason


FILM_CONV = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A feature-wise linear modulation: a condition's projection split in two, scaling and shifting
    each channel of a convolution's output."""
    def __init__(self, channels, cond_dim):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=1)
        self.film = nn.Linear(cond_dim, 2 * channels)

    def forward(self, x, z):
        gamma, beta = self.film(z).unsqueeze(-1).chunk(2, dim=1)
        return torch.relu(gamma * self.conv(x) + beta)


def get_inputs():
    return [torch.randn(8, 64, 256), torch.randn(8, 32)]


def get_init_inputs():
    return [64, 32]
'''


def test_the_parts_of_a_chunk_of_a_kernels_output_are_read_as_views(tmp_path: Path) -> None:
    """``gamma, beta = self.film(z)...chunk(2, dim=1)``: each part is a view of the projection's output,
    taken in ``forward`` and read by a later kernel through its strides; the output itself is kept for
    them (every name ``forward`` reads is bound)."""
    from kernelevo.sandbox.judge.static_checks import check_candidate

    path = tmp_path / "film.py"
    path.write_text(FILM_CONV)
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "sequence", plan.describe()
    source = _first_seed(path)
    assert "_kernelevo_kept0_part0 = _kernelevo_kept0.chunk(2, dim=1)[0]" in source, source[-1500:]
    report = check_candidate(source, strict=True)
    assert report.passed, [c for c in report.checks if not c.passed]


def test_a_kept_value_overwritten_before_any_read_is_not_stored() -> None:
    """``forward`` keeps a kernel's output, views it and keeps the view: the first store is dead and
    dropped; a store something reads before the next one, or one stored again some other way, stays."""
    from kernelevo.agent.builtin.sequence_render import _without_dead_stores

    flow, kept = "_kernelevo_flow", "_kernelevo_kept0"
    calls = [f"{flow} = self._kernelevo_segment0(w)", f"{kept} = {flow}", f"{flow} = {flow}.unsqueeze(2)",
             f"{kept} = {flow}", f"part = {kept}.chunk(2, 1)[0]", f"{kept} = {flow}",
             f"{flow} = self._kernelevo_segment1(part, {kept})"]
    assert _without_dead_stores(calls) == [calls[0], calls[2], calls[3], calls[4], calls[5], calls[6]]
    read_in_a_tuple = [f"{kept} = {flow}", f"a, {kept} = {kept}, 1", f"{flow} = a"]
    assert _without_dead_stores(read_in_a_tuple) == read_in_a_tuple


@pytest.mark.slow
def test_a_film_modulated_convolution_is_judged_correct(evaluator, tmp_path: Path) -> None:
    task_file = tmp_path / "film.py"
    task_file.write_text(FILM_CONV)
    verdict, code = _judge_first_seed(evaluator, task_file, "small")
    assert code == 0, verdict.reason


RUN_LOGSUMEXP = """
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
x = torch.randn(4, 33)
x[1] = float("-inf")
x[2, 5] = float("inf")
print(json.dumps({"got": [str(v) for v in module.ModelNew()(x).tolist()],
                  "want": [str(v) for v in torch.logsumexp(x, dim=-1).tolist()]}))
"""


def test_logsumexp_of_a_row_of_minus_inf_is_minus_inf(tmp_path: Path) -> None:
    """torch takes an infinite row maximum as 0; max + log(sum(exp(x - max))) alone gives NaN. The
    harness refuses non-finite references, so the generated module is run directly, in a process of
    its own under the interpreter."""
    task_file = tmp_path / "lse.py"
    task_file.write_text('''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, dim=-1)


def get_inputs():
    return [torch.randn(4, 33)]


def get_init_inputs():
    return []
''')
    candidate = tmp_path / "candidate.py"
    candidate.write_text(_first_seed(task_file))
    done = subprocess.run([sys.executable, "-c", RUN_LOGSUMEXP, str(candidate)], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    values = json.loads(done.stdout.strip().splitlines()[-1])
    got, want = values["got"], values["want"]
    assert got[1] == want[1] == "-inf" and got[2] == want[2] == "inf"
    for g, w in zip(got, want, strict=True):
        assert abs(float(g) - float(w)) < 1e-4 or g == w


SCAN_FORMS = [
    # (forward body, inputs, op, dim, reverse, exclusive, masked)
    ("return x.cumsum(-1)", "torch.randn(3, 40)", "sum", 1, False, False, False),
    ("return torch.flip(torch.cumprod(torch.flip(x, [0]), 0), [0])", "torch.rand(9, 4) + 0.5", "prod", 0, True,
     False, False),
    ("return torch.cat([torch.zeros_like(x[:, :1]), torch.cumsum(x[:, :-1], dim=1)], dim=1)",
     "torch.randn(3, 40)", "sum", 1, False, True, False),
    ("c = torch.cumsum(x.flip(1)[:, :-1], 1).flip(1)\n        return torch.cat([c, torch.zeros_like(x[:, :1])], 1)",
     "torch.randn(3, 40)", "sum", 1, True, True, False),
    ("return torch.cumsum(m * x, dim=2)", "torch.randn(2, 3, 8), torch.randn(2, 3, 8) > 0", "sum", 2, False, False,
     True),
]


@pytest.mark.parametrize("form", SCAN_FORMS, ids=[f[0][7:30] for f in SCAN_FORMS])
def test_a_scan_is_recognised_by_what_it_computes_not_how_it_is_written(tmp_path: Path, form: tuple) -> None:
    body, inputs, op, dim, reverse, exclusive, masked = form
    args = "x, m" if masked else "x"
    path = tmp_path / "scan.py"
    path.write_text(f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, {args}):\n"
                    f"        {body}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n"
                    "    return []\n")
    if masked:  # the value first, the mask second
        path.write_text(path.read_text().replace(f"return [{inputs}]", "return [torch.randn(2, 3, 8), "
                                                  "torch.randn(2, 3, 8) > 0]").replace("(self, x, m)", "(self, x, m)"))
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "scan", plan.describe()
    found = plan.extra["scan"]
    assert (found.op, found.dim, found.reverse, found.exclusive, found.masked) == (op, dim, reverse, exclusive,
                                                                                   masked)


def test_a_scan_with_other_work_is_a_kernel_of_its_own_and_an_unknown_form_says_why(tmp_path: Path) -> None:

    def plan(body: str):  # noqa: ANN202
        path = tmp_path / "scan.py"
        path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                        f"        {body}\n\n\ndef get_inputs():\n    return [torch.randn(3, 40)]\n\n\n"
                        "def get_init_inputs():\n    return []\n")
        return recognise(load_task(str(path), "full"))

    split = plan("return torch.relu(torch.cumsum(x, 1))")  # the scan, then the pointwise op
    assert split.kind == "sequence" and "cumsum over dim 1" in split.describe() and "relu" in split.describe()
    # every prefix less the first value: not a form the scan template computes, so two kernels (the
    # scan, then the difference reading the first column through its strides); the template case of
    # the same name judges it
    two = plan("return torch.cumsum(x, 1) - x[:, :1]")
    assert two.kind == "sequence" and "cumsum" in two.describe() and "views copied" not in two.describe()
    assert len(two.extra["segments"]) == 2


BROADCAST_INPUTS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, t, s):
        return torch.clamp(1 - x * t, min=0) * s + t


def get_inputs():
    return [torch.randn(6, 300), torch.randn(300, 2)[:, 0], torch.randn(())]  # t is strided


def get_init_inputs():
    return []
'''


def test_inputs_that_broadcast_like_parameters_are_read_like_them(evaluator, tmp_path: Path) -> None:
    """A later input with one value per column, or one value in all, is read as a parameter would be."""
    task_file = tmp_path / "hinge.py"
    task_file.write_text(BROADCAST_INPUTS)
    task = load_task(str(task_file), "full")
    plan = recognise(task)
    assert plan.kind == "pointwise", plan.describe()
    verdict, code = _judge_first_seed(evaluator, task_file, task)
    assert code == 0, verdict.reason


@pytest.mark.parametrize("body", ["c = torch.cumsum(x, 1)\n        return c, c.flip(1)",
                                  "return torch.cumsum(x, 1), x"])
def test_a_scan_with_several_outputs_is_not_covered_rather_than_a_crash(tmp_path: Path, body: str) -> None:
    """A scan whose graph returns more than one tensor is another template's, or none: never a crash,
    which the runner would report as an unusable task file."""
    from kernelevo.agent.builtin.program import CannotCover

    path = tmp_path / "scan.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                    f"        {body}\n\n\ndef get_inputs():\n    return [torch.randn(3, 40)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    try:
        plan = recognise(load_task(str(path), "full"))
    except CannotCover:
        return
    assert plan.kind != "scan", plan.describe()


@pytest.mark.slow
def test_a_reduction_without_keepdim_broadcasts_per_column_as_torch_does(evaluator, tmp_path: Path) -> None:
    """``x - x.sum(-1)`` on a square input subtracts row j's sum from column j: two kernels, the
    second reading the sums as one value per column."""
    task_file = tmp_path / "square.py"
    task_file.write_text(BROADCAST_INPUTS.replace("def forward(self, x, t, s):", "def forward(self, x):")
                         .replace("return torch.clamp(1 - x * t, min=0) * s + t", "return x - x.sum(-1)")
                         .replace("[torch.randn(6, 300), torch.randn(300, 2)[:, 0], torch.randn(())]  # t is strided",
                                  "[torch.randn(37, 37)]"))
    task = load_task(str(task_file), "full")
    assert recognise(task).kind == "sequence"
    verdict, code = _judge_first_seed(evaluator, task_file, task)
    assert code == 0, verdict.reason


def test_a_number_passed_to_forward_is_a_kernel_argument(evaluator, tmp_path: Path) -> None:
    task_file = tmp_path / "scaled.py"
    task_file.write_text(BROADCAST_INPUTS.replace("def forward(self, x, t, s):", "def forward(self, x, s: float):")
                         .replace("return torch.clamp(1 - x * t, min=0) * s + t", "return torch.relu(x * s) - s")
                         .replace("[torch.randn(6, 300), torch.randn(300, 2)[:, 0], torch.randn(())]  # t is strided",
                                  "[torch.randn(6, 300), 3.14]"))
    task = load_task(str(task_file), "full")
    assert recognise(task).kind == "pointwise"
    source = _first_seed(task_file)
    assert "float(input_s)" in source
    candidate = tmp_path / "candidate.py"
    candidate.write_text(source)
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, verdict.reason


LOSS_CALLS = [
    ("smooth_l1", lambda x, y: torch.nn.functional.smooth_l1_loss(x, y)),
    ("smooth_l1 beta sum", lambda x, y: torch.nn.functional.smooth_l1_loss(x, y, reduction="sum", beta=0.3)),
    ("huber delta none", lambda x, y: torch.nn.functional.huber_loss(x, y, reduction="none", delta=2.5)),
    ("mse", lambda x, y: torch.nn.functional.mse_loss(x, y)),
    ("l1 sum", lambda x, y: torch.nn.functional.l1_loss(x, y, reduction="sum")),
    ("kl batchmean", lambda x, y: torch.nn.functional.kl_div(x.log_softmax(-1), y.softmax(-1), reduction="batchmean")),
    ("kl log_target", lambda x, y: torch.nn.functional.kl_div(x, y.log_softmax(-1), reduction="sum", log_target=True)),
    ("triplet", lambda x, y: torch.nn.functional.triplet_margin_loss(x, y, x * 0.5 + 1, margin=0.3)),
    ("triplet p1 none", lambda x, y: torch.nn.functional.triplet_margin_loss(x, y, -y, p=1, reduction="none")),
    ("kl zeros in target", lambda x, y: torch.nn.functional.kl_div(x, torch.relu(y), reduction="sum")),
    ("gaussian nll full", lambda x, y: torch.nn.functional.gaussian_nll_loss(
        x, y, torch.nn.functional.softplus(y[..., :1]), full=True)),
    ("gaussian nll var of one dim fewer sum", lambda x, y: torch.nn.functional.gaussian_nll_loss(
        x, y, y[..., 0].abs(), reduction="sum", eps=1e-3)),  # values below eps: clamped
    ("gaussian nll none", lambda x, y: torch.nn.functional.gaussian_nll_loss(x, y, y * y, reduction="none")),
]

TALLY_CALLS = [
    ("count_nonzero", lambda x: torch.count_nonzero(torch.relu(x), dim=1)),
    ("count_nonzero of all", lambda x: torch.count_nonzero(torch.relu(x))),
    ("all keepdim", lambda x: (x > -1.5).all(dim=-1, keepdim=True)),
    ("any of all", lambda x: torch.any(x > 2.0)),
    ("nansum", lambda x: torch.nansum(x.masked_fill(x > 0.5, float("nan")), dim=(0, 2))),
    ("nanmean a row all NaN", lambda x: torch.nanmean(torch.where(x[:1] > -9.0, float("nan"), x), dim=-1)),
    ("nanmean keepdim", lambda x: torch.nanmean(x.masked_fill(x < 0, float("nan")), 1, keepdim=True)),
    ("aminmax parts", lambda x: torch.aminmax(x, dim=0).max - torch.aminmax(x, dim=0)[0]),
    ("aminmax of all", lambda x: torch.aminmax(x)[1]),
    ("var_mean", lambda x: torch.var_mean(x, dim=-1, correction=0)[0] * torch.var_mean(x, dim=-1)[1]),
    ("std_mean keepdim and of all", lambda x: torch.std_mean(x, 1, keepdim=True)[0] + torch.std_mean(x)[1]),
    ("var_mean of all kept", lambda x: torch.var_mean(x, dim=None, keepdim=True)[1] + x.sum(0)),
    ("nansum of all kept", lambda x: torch.nansum(x.masked_fill(x > 1.0, float("nan")), dim=None, keepdim=True)),
    ("nanmean of all kept", lambda x: torch.nanmean(x.masked_fill(x > 1.0, float("nan")), keepdim=True, dim=None)),
    ("aminmax of all kept", lambda x: torch.aminmax(x, keepdim=True)[0]),
    ("nansum of integers", lambda x: torch.nansum((x * 1e6).long() * 1000, 1)),
    ("all of uint8", lambda x: torch.all((x > 0).to(torch.uint8), dim=1)),
    ("all and any over no values", lambda x: torch.all(x[:, :0], dim=1).float() + torch.any(x[:0]).float()),
]


@pytest.mark.parametrize("name", [c[0] for c in TALLY_CALLS])
def test_a_tally_is_rewritten_as_reductions_the_templates_have(name: str) -> None:
    """Counts, truth values, NaN-skipping means and two-part reductions: the rewritten graph computes
    what the call computes (dtype included) and calls none of them any more."""
    from kernelevo.agent.builtin.lower import trace

    fn = dict(TALLY_CALLS)[name]

    class Tally(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    x = torch.randn(3, 5, 7)
    gm = trace(Tally(), [x])
    left = {"count_nonzero", "all", "any", "nansum", "nanmean", "aminmax", "var_mean", "std_mean"}
    assert not [n for n in gm.graph.nodes if getattr(n.target, "__name__", n.target) in left]
    want = fn(x)
    got = gm(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_a_two_part_reduction_read_whole_is_left_as_written() -> None:
    from kernelevo.agent.builtin.lower import trace

    class Whole(torch.nn.Module):
        def forward(self, x):
            return torch.aminmax(x, dim=1)

    gm = trace(Whole(), [torch.randn(4, 6)])
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [torch.aminmax]


@pytest.mark.parametrize("name", [c[0] for c in LOSS_CALLS])
def test_a_loss_is_rewritten_as_the_ops_it_is_made_of(name: str) -> None:
    """The rewritten graph computes what the loss function computes (rank 3, so ``batchmean`` sums
    two dims), and holds no loss call any more."""
    from kernelevo.agent.builtin.decompose import LOSSES
    from kernelevo.agent.builtin.lower import trace

    fn = dict(LOSS_CALLS)[name]

    class Loss(torch.nn.Module):
        def forward(self, x, y):
            return fn(x, y)

    x, y = torch.randn(3, 5, 7) * 2, torch.randn(3, 5, 7)
    gm = trace(Loss(), [x, y])
    # the lambda's call is inlined by the trace: what is left must be plain ops
    assert not [n for n in gm.graph.nodes if n.op == "call_function" and n.target in LOSSES]
    torch.testing.assert_close(gm(x, y), fn(x, y), rtol=1e-5, atol=1e-6)


def test_a_loss_with_options_outside_the_rewrite_is_left_as_written() -> None:
    from kernelevo.agent.builtin.lower import trace

    class Loss(torch.nn.Module):
        def forward(self, x, y):
            return torch.nn.functional.smooth_l1_loss(x, y, beta=0.0)  # the L1 loss: torch's own formula

    gm = trace(Loss(), [torch.randn(4, 4), torch.randn(4, 4)])
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [torch.nn.functional.smooth_l1_loss]


def test_a_loss_module_is_rewritten_with_its_own_options() -> None:
    from kernelevo.agent.builtin.lower import trace

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.loss = torch.nn.HuberLoss(reduction="sum", delta=0.7)

        def forward(self, x, y):
            return self.loss(x, y) * 2

    x, y = torch.randn(4, 9), torch.randn(4, 9)
    gm = trace(Loss(), [x, y])
    assert not [n for n in gm.graph.nodes if n.op == "call_module"]
    torch.testing.assert_close(gm(x, y), Loss()(x, y))


def test_a_copy_is_dropped_only_where_nothing_writes_in_place() -> None:
    from kernelevo.agent.builtin.lower import trace

    class Kept(torch.nn.Module):
        def forward(self, x):
            y = x.clone()
            y.masked_fill_(x > 0, 1.0)  # the copy is written: it must stay a copy, or the input would change
            return y * 2

    class Rewritten(torch.nn.Module):
        def forward(self, x):
            y = x.clone()
            y.add_(1.0)  # arithmetic in place on a value read by nothing else: the same out of place
            y *= 3.0
            return y * 2

    class Dropped(torch.nn.Module):
        def forward(self, x):
            kept = x.detach().clone()
            return torch.relu(x) + kept

    x = torch.randn(3, 4)
    kept = trace(Kept(), [x.clone()])
    assert [n.target for n in kept.graph.nodes if n.op == "call_method"][:1] == ["clone"]
    before = x.clone()
    torch.testing.assert_close(kept(x), before.masked_fill(before > 0, 1.0) * 2)
    assert torch.equal(x, before)
    rewritten = trace(Rewritten(), [x.clone()])
    assert not [n for n in rewritten.graph.nodes if str(n.target).endswith("_") or "imul" in str(n.target)]
    torch.testing.assert_close(rewritten(x), (before + 1) * 6)
    assert torch.equal(x, before)
    dropped = trace(Dropped(), [x])
    assert not [n for n in dropped.graph.nodes if n.op == "call_method"]
    torch.testing.assert_close(dropped(x), torch.relu(x) + x)


def test_losses_called_by_keyword_declined_or_broadcast_stay_correct() -> None:
    from kernelevo.agent.builtin.decompose import LOSSES
    from kernelevo.agent.builtin.lower import trace

    class ByKeyword(torch.nn.Module):
        def forward(self, x, y):
            return torch.nn.functional.mse_loss(input=x, target=y)

    class Declined(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.loss = torch.nn.SmoothL1Loss(beta=0.0)

        def forward(self, x, y):
            return self.loss(x, y)

    class Broadcast(torch.nn.Module):
        def forward(self, x, y):
            return torch.nn.functional.kl_div(x, y, reduction="batchmean")

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    gm = trace(ByKeyword(), [x, y])
    assert not [n for n in gm.graph.nodes if n.target in LOSSES]
    torch.testing.assert_close(gm(x, y), ByKeyword()(x, y))
    gm = trace(Declined(), [x, y])  # the module became its function; the code must say so too
    assert "smooth_l1_loss" in gm.code and "self.loss" not in gm.code
    torch.testing.assert_close(gm(x, y), Declined()(x, y))
    small, wide = torch.randn(1, 5), torch.rand(3, 5)
    gm = trace(Broadcast(), [small, wide])
    assert [n for n in gm.graph.nodes if n.target is torch.nn.functional.kl_div]
    torch.testing.assert_close(gm(small, wide), Broadcast()(small, wide))


def test_a_tensor_made_from_one_number_is_that_number() -> None:
    """``torch.min(x, torch.tensor(0.0, device=x.device))`` is a clamp and ``x + torch.tensor(2)`` an
    addition of a number: the graph keeps no tensor built in forward, and computes what it did."""
    from kernelevo.agent.builtin.lower import lower, trace

    class Bounded(torch.nn.Module):
        def forward(self, x):
            y = torch.min(x * 3.0, torch.tensor(0.5, device=x.device))
            y = torch.max(y, torch.tensor(-1.0, device=x.device)) + torch.tensor(2, device=x.device)
            return torch.nn.functional.gelu(y)

    x = torch.randn(4, 33) * 2
    gm = trace(Bounded(), [x])
    assert not [n for n in gm.graph.nodes if n.target is torch.tensor]
    torch.testing.assert_close(gm(x), Bounded()(x))
    assert lower(Bounded(), [x]).ops.count("clamp") == 2

    class ZeroD(torch.nn.Module):  # a 0-d tensor meets the constant as an equal: left as written
        def forward(self, x):
            return x.sum() + torch.tensor(0.1, device=x.device)

    gm = trace(ZeroD(), [x.half()])
    assert [n for n in gm.graph.nodes if n.target is torch.tensor]
    assert gm(x.half()).dtype == ZeroD()(x.half()).dtype


def test_a_view_between_segments_is_kept_only_where_its_sizes_hold_at_full_size() -> None:
    """``view(-1, 1, n)`` is traced with the small model's ``n``: written into ``forward`` it must give
    the node's shape at the size being optimised, or the split does not take it as glue."""
    from kernelevo.agent.builtin.sequence_views import view_of as _view_of

    class Viewed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 8)

        def forward(self, x):
            return self.fc(x).view(-1, 1, 8).unsqueeze(1)

    gm = torch.fx.symbolic_trace(Viewed())
    fc, view, unsqueeze = [n for n in gm.graph.nodes if n.op in ("call_module", "call_method")]
    small = {"fc": (3, 8), "view": (3, 1, 8), "unsqueeze": (3, 1, 1, 8)}
    full = {"fc": (64, 48), "view": (64, 1, 48), "unsqueeze": (64, 1, 1, 48)}
    assert _view_of(view, fc, small) == "_kernelevo_flow = _kernelevo_flow.view(-1, 1, 8)"
    assert _view_of(view, fc, full) is None  # 8 is the small model's width
    assert _view_of(unsqueeze, view, full) == "_kernelevo_flow = _kernelevo_flow.unsqueeze(1)"  # right at any size


BROADCAST_HIDDEN_AT_SMALL = '''import torch
import torch.nn as nn
SMALL = {"batch": 1}
batch = 3
class Model(nn.Module):
    def forward(self, x, y):
        return (x - y) * 2.0
def get_inputs():
    return [torch.randn(batch, 3, 5, 40), torch.randn(batch, %s)]
def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("shape", ["3, 1, 1", "1, 1, 1"])
def test_an_input_whose_broadcasting_the_small_size_hides_is_refused(tmp_path: Path, shape: str) -> None:
    """At a batch of 1 a [B, C, 1, 1] input reads like one value per channel, a [B, 1, 1, 1] one like a
    single value: a kernel planned from them would read sample 0's values for every sample."""
    path = tmp_path / "hidden.py"
    path.write_text(BROADCAST_HIDDEN_AT_SMALL % shape)
    with pytest.raises(CannotCover, match="broadcasts against `x` differently at the small size"):
        recognise(load_task(str(path), "full"))


IN_PLACE_THEN_READ = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
    def forward(self, x):
        y = x * 2.0
        m = y.mean(dim=(2, 3), keepdim=True)
        z = %s
        return z - y + m
def get_inputs():
    return [torch.randn(2, 3, 5, 40)]
def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("write", ["self.relu(y)", "torch.relu_(y)"])
def test_an_input_written_in_place_and_read_again_is_refused(tmp_path: Path, write: str) -> None:
    """The templates compute every op into a new value: after ``relu_(y)`` they would still read the
    old ``y``, where the reference reads the written one."""
    path = tmp_path / "in_place.py"
    path.write_text(IN_PLACE_THEN_READ % write)
    with pytest.raises(CannotCover, match="writes its input in place and the input is read again"):
        recognise(load_task(str(path), "full"))


def test_a_method_writing_a_value_in_place_is_read_as_written_after_it(tmp_path: Path) -> None:
    """``y.relu_()`` on a value computed in ``forward``: what reads ``y`` after it reads the result (here
    ``z - y`` is 0), what read it before kept the old values (the mean)."""
    from kernelevo.agent.builtin.lower import trace

    path = tmp_path / "in_place.py"
    path.write_text(IN_PLACE_THEN_READ % "y.relu_()")
    task = load_task(str(path), "full")
    assert recognise(task).kind
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    model, x = namespace["Model"](), torch.randn(2, 3, 5, 40)
    traced = trace(model, [x])
    assert not [n for n in traced.graph.nodes if str(n.target).endswith("_")]
    torch.testing.assert_close(traced(x), model(x))


PARTIAL_CONV = '''"""A captured region: a convolution that changes the channel count, then ReLU; partial replacement."""
import torch
import torch.nn as nn

ALLOW_PARTIAL = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.squeeze = nn.Conv2d(3, 6, (1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, bias=True)
        self.squeeze_activation = nn.ReLU()

    def forward(self, x):
        return self.squeeze_activation(self.squeeze(x))


def get_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return []
'''


def test_a_partial_task_whose_convolution_changes_the_shape_gets_the_convolution_template(evaluator,
                                                                                          tmp_path: Path) -> None:
    """Partial replacement keeps a convolution in torch only where its output is shaped as the rest's
    input; a region captured from a network (SqueezeNet's fire module: 3 -> 6 channels, then ReLU)
    is not, and used to be left alone. The convolution template, which replaces all of it, covers it
    and is judged correct; a partial task whose convolution keeps the shape still keeps it in torch."""
    task_file = tmp_path / "region.py"
    task_file.write_text(PARTIAL_CONV)
    plan = recognise(load_task(str(task_file), "small"))
    assert plan.kind == "conv" and plan.ops == ["conv2d", "relu"]
    assert "conv (torch)" in recognise(load_task("conv_relu_scale", "small")).ops
    verdict, code = _judge_first_seed(evaluator, task_file, "small", rendered_at="small")
    assert code == 0, verdict.reason


MADE_IN_FORWARD = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * torch.tensor(%s)


def get_inputs():
    return [torch.randn(4, 256, dtype=torch.float16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("made", ["0.5, dtype=torch.float64", "[0.5]"])
def test_a_tensor_made_in_forward_that_is_no_plain_number_is_refused(tmp_path: Path, made: str) -> None:
    """A float64 0-d tensor widens an integer tensor to float64 (a number gives float32), a one-value
    tensor with a dim widens fp16 to fp32 (a number keeps fp16): neither is read as a number, and
    neither may be read through ``self``, which a generated ModelNew does not have."""
    path = tmp_path / "made.py"
    path.write_text(MADE_IN_FORWARD % made)
    with pytest.raises(CannotCover, match="a tensor made in forward"):
        recognise(load_task(str(path), "full"))


def test_a_matmul_with_a_tensor_made_in_forward_is_refused_with_its_reason(tmp_path: Path) -> None:
    """Its weight would be read as ``self._tensor_constant0``, which ModelNew does not have."""
    path = tmp_path / "made_weight.py"
    path.write_text((MADE_IN_FORWARD % "0.5").replace("x * torch.tensor(0.5)", "x.float() @ torch.ones(256, 24)"))
    with pytest.raises(CannotCover, match="a matmul with a tensor made in forward"):
        recognise(load_task(str(path), "full"))


def test_a_column_or_row_operand_is_planned_as_a_reduction_where_it_can_be_read(tmp_path: Path) -> None:
    """A matrix of one column (a parameter or an input) or one row times a matrix is a sum of products,
    not a GEMM of padded tiles; a transposed input's row stays a GEMM (a view of a view)."""
    def plan_of(init: str, body: str, inputs: str) -> str:
        path = tmp_path / "product.py"
        path.write_text(f"import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                        f"        super().__init__()\n        {init}\n\n    def forward(self, x, y):\n        return {body}\n\n"
                        f"def get_inputs():\n    return [{inputs}]\n\ndef get_init_inputs():\n    return []\n")
        return recognise(load_task(str(path), "full")).describe()

    assert "sum" in plan_of("self.w = nn.Parameter(torch.randn(512, 1))", "x @ self.w + y",
                            "torch.randn(64, 512), torch.randn(64, 1)")
    assert "sum" in plan_of("pass", "torch.matmul(x, y)", "torch.randn(64, 512), torch.randn(512, 1)")
    assert "sum" in plan_of("pass", "torch.matmul(x, y)", "torch.randn(1, 512), torch.randn(512, 48)")
    assert "sum" not in plan_of("pass", "torch.mm(x, y.t())", "torch.randn(64, 512), torch.randn(1, 512)")


def test_sizes_read_as_numbers_are_put_in_as_their_value_at_the_size_being_optimised() -> None:
    """``x / math.sqrt(x.size(-1))`` traced at a small size and optimised at another: the division
    takes the size there (16, not the traced 4), while a view keeps reading its sizes in ``forward``
    (folding a small size into it would break the view at the other size)."""
    import math

    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    from kernelevo.agent.builtin.shape_reads import FullSizes, fold_numbers

    class Scaled(torch.nn.Module):
        def forward(self, x):
            flat = x.view(-1, x.size(-1))
            return flat / math.sqrt(x.size(-1)) + x.shape[1] * 0.5

    small = torch.randn(2, 3, 4)
    gm = torch.fx.symbolic_trace(Scaled())
    ShapeProp(gm).propagate(small)
    assert fold_numbers(gm, FullSizes(inputs={"x": (2, 3, 16)}))
    numbers = [a for n in gm.graph.nodes for a in n.args if isinstance(a, (int, float)) and not isinstance(a, bool)]
    assert math.sqrt(16) in numbers and 1.5 in numbers, gm.code  # the size there, and one the same at both
    views = [n for n in gm.graph.nodes if n.target == "view"]
    assert views and any(isinstance(a, torch.fx.Node) for a in views[0].args[1:]), gm.code
    big = torch.randn(2, 3, 16)
    assert torch.allclose(gm(big), Scaled()(big))


def test_code_with_a_size_put_in_as_a_number_says_which_sizes_it_holds_at(tmp_path: Path) -> None:
    """``x @ x.mT / x.shape[-1]`` with a last dimension that shrinks at the small size: the code for the
    file's own size holds there alone, and its forward refuses other shapes in words; the small size's
    plan (the size it was traced at) is for any size."""
    path = tmp_path / "gram.py"
    path.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x @ x.transpose(-1, -2) / x.shape[-1]

def get_inputs():
    return [torch.randn(16, 512, 1024)]

def get_init_inputs():
    return []
''')
    plan = recognise(load_task(str(path), "full"))
    assert plan.sized_for == [(16, 512, 1024)]
    source = render(plan, *seeds(plan)[0])
    assert "generated for inputs of shapes [(16, 512, 1024)]" in source
    assert "/ 1024" in source or "1024.0" in source or "0.0009765625" in source
    small = recognise(load_task(str(path), "small"))
    assert small.sized_for is None and "generated for inputs" not in render(small, *seeds(small)[0])


def test_a_mask_passed_in_is_checked_at_the_size_being_optimised(tmp_path: Path) -> None:
    """A mask of [8, 1, 1024, 1024] beside q, k, v of [8, 16, 1024, 64]: the small size shrinks them
    all, and the mask's shape is checked against the sizes being optimised, not the small ones."""
    path = tmp_path / "masked.py"
    path.write_text('''import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def forward(self, q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

def get_inputs():
    return [torch.randn(8, 16, 1024, 64), torch.randn(8, 16, 1024, 64), torch.randn(8, 16, 1024, 64),
            torch.rand(8, 1, 1024, 1024) > 0.3]

def get_init_inputs():
    return []
''')
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "attention" and plan.extra["mask"] == {"source": "input_m", "kind": "bool"}


def test_a_task_whose_inputs_need_gradients_is_judged(evaluator, tmp_path: Path) -> None:
    """``get_inputs`` returning a tensor that requires grad: the judge refills its buffers as data,
    and the built-in candidate is accepted."""
    path = tmp_path / "leaf.py"
    path.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.randn(8, 100).requires_grad_()]

def get_init_inputs():
    return []
''')
    task = load_task(str(path), "small")
    plan = recognise(task)
    candidate = tmp_path / "candidate.py"
    candidate.write_text(render(plan, *seeds(plan)[0]))
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, verdict.reason


def test_factories_of_sizes_read_in_forward_are_traced_and_put_back() -> None:
    """``torch.ones(x.size(1), ...)`` fails under plain torch.fx; the planner's fallback tracer records
    it as a node, computes the same function, and leaves ``torch.ones`` as it found it, also when
    tracing fails."""
    import torch.nn as nn

    from kernelevo.agent.builtin.lower import trace

    class Made(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            m = torch.ones(x.size(1), x.size(1), device=x.device).tril()
            return x @ m + torch.arange(x.shape[-1], dtype=x.dtype)

    class Broken(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.zeros(x.size(0), int(x.sum()))  # data-dependent: cannot be traced

    originals = (torch.ones, torch.zeros, torch.arange)
    x = torch.randn(3, 5)
    gm = trace(Made(), [x])
    assert {n.target for n in gm.graph.nodes if n.op == "call_function"} >= {torch.ones, torch.arange}
    torch.testing.assert_close(gm(torch.randn(4, 6)) * 0, torch.zeros(4, 6))
    y = torch.randn(4, 6)
    torch.testing.assert_close(gm(y), Made()(y))
    with pytest.raises(CannotCover, match="could not be traced"):
        trace(Broken(), [x])
    assert (torch.ones, torch.zeros, torch.arange) == originals


def _assigned(method: ast.FunctionDef) -> set[str]:
    """Names a generated method binds (assignments, loop targets, ``with ... as``), less its arguments."""
    bound = {n.id for n in ast.walk(method) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bound - {a.arg for a in method.args.args}


def test_every_name_a_generated_forward_binds_is_kept_from_the_inputs(tmp_path: Path) -> None:
    """An input of the reference named like a variable the generated code binds (``idx``, ``padded``,
    ``n``) would be overwritten by it: inputs with those names are renamed (``GENERATED_NAMES``), so
    every name each template case's methods bind must be one that is renamed away (``clashes``)."""
    from test_builtin_templates import CASES, _write

    from kernelevo.agent.builtin.recognize import clashes

    unlisted: dict[str, set[str]] = {}
    for case in CASES:
        cols = 200 if "linear" in case[0] or "mlp" in case[0] or "matmul" in case[0] else 1000
        cols = 64 if "residual" in case[0] else cols  # the sizes test_every_seed_is_judged_correct uses
        plan = recognise(load_task(str(_write(tmp_path, case, cols)), "full"))
        for strategy, params, why in seeds(plan)[:4]:
            tree = ast.parse(render(plan, strategy, params, why))
            model = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "ModelNew")
            for method in (f for f in model.body if isinstance(f, ast.FunctionDef) and f.name != "__init__"):
                names = {n for n in _assigned(method) if not clashes(n)}
                if names:
                    unlisted.setdefault(case[0], set()).update(names)
    assert not unlisted, " ".join(sorted(set().union(*unlisted.values())))


def test_an_input_renamed_away_from_generated_names_keeps_its_full_size_shape() -> None:
    """``k`` is renamed (``input_k``) because generated code binds ``k``; the sequence planner must
    still find that input's shape at the size being optimised, or every segment reading it looks
    broadcast differently there and the split fails."""
    path = ROOT / "bench/probes/level1/manual_attention_hd1024.py"  # inputs q, k, v
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "sequence" and "input_k" in plan.inputs, plan.describe()


MHA_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True{options})
        self.register_buffer("mask", torch.rand(5, 5) > 0.5)

    def forward(self, x, y):
        out, w = self.attn({call})
        return {result}


def get_inputs():
    return [torch.randn(2, 5, 16), torch.randn(2, 5, 16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize(("options", "call", "result"), [
    ("", "x, y, y", "out"),  # cross-attention: another key and value
    ("", "x, x, x, attn_mask=self.mask", "out"),
    ("", "x, x, x", "out + w.sum()"),  # the weights are read
    (", add_bias_kv=True", "x, x, x", "out"),
], ids=["cross", "masked", "weights-read", "bias-kv"])
def test_attention_modules_outside_the_rewrite_stay_whole_with_the_reason(tmp_path: Path, options: str, call: str,
                                                                          result: str) -> None:
    """Only unmasked self-attention whose weights are unused is written as its ops; the rest is refused
    as the module it is, never planned as something it does not compute."""
    path = tmp_path / "mha.py"
    path.write_text(MHA_TASK.format(options=options, call=call, result=result))
    with pytest.raises(CannotCover, match="MultiheadAttention|mask"):
        recognise(load_task(str(path), "full"))


GROUPS_BY_SIZE = '''import torch
import torch.nn as nn

GROUPS = 4
SMALL = {"GROUPS": 2}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.groups = GROUPS

    def forward(self, x):
        return x.view(x.size(0), self.groups, -1).transpose(1, 2).contiguous()


def get_inputs():
    return [torch.randn(3, 24)]


def get_init_inputs():
    return []
'''


def test_a_view_replayed_with_a_number_that_changes_with_the_size_takes_it_there(evaluator, tmp_path: Path) -> None:  # noqa: ANN001
    """The generated forward replays the reference's views with their arguments: a module constant
    traced at the small size (2 groups) is another at the size being optimised (4), so the replay takes
    the number it has there, and the file says it holds at that size alone (a check of the input shapes
    in forward, never another rearrangement computed at another size)."""
    path = tmp_path / "groups.py"
    path.write_text(GROUPS_BY_SIZE)
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "view_copy" and plan.sized_for == [(3, 24)]
    source = render(plan, *seeds(plan)[0])
    # the view replayed, or the input planned as that view (``leading_views``): 4 groups either way
    assert (".view(3, 4, -1)" in source or "x = x.reshape(3, 4, 6)" in source) and \
        "generated for inputs of shapes [(3, 24)]" in source, source
    candidate = tmp_path / "candidate.py"
    candidate.write_text(source)
    verdict, code = evaluator.evaluate(load_task(str(path), "full"), candidate)
    assert code == 0, verdict.reason
    same = tmp_path / "same.py"
    same.write_text(GROUPS_BY_SIZE.replace('SMALL = {"GROUPS": 2}', ""))
    plan = recognise(load_task(str(same), "full"))
    assert plan.kind == "view_copy" and plan.sized_for is None


MQA_BY_HAND = '''import math
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        return torch.softmax(s, dim=-1) @ v


def get_inputs():
    return [torch.randn(2, 4, 16, 8), torch.randn(2, 1, 16, 8), torch.randn(2, 1, 16, 8)]


def get_init_inputs():
    return []
'''


def test_attention_by_hand_with_one_head_of_keys_is_grouped_and_keys_shared_by_the_batch_stay(tmp_path: Path) -> None:
    """Keys and values of one head broadcast to every query head by the matmuls (multi-query
    attention) are grouped-query attention with one group: one attention kernel. Keys shared by the
    whole batch are not what the flash kernel reads: the graph is left as its matmuls, batched GEMMs
    whose batch broadcasts, not turned into an attention call."""
    path = tmp_path / "mqa.py"
    path.write_text(MQA_BY_HAND)
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "attention", plan.describe()
    path.write_text(MQA_BY_HAND.replace("torch.randn(2, 1, 16, 8), torch.randn(2, 1, 16, 8)",
                                        "torch.randn(1, 1, 16, 8), torch.randn(1, 1, 16, 8)"))
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "sequence" and "attention" not in plan.describe(), plan.describe()
    assert "batched GEMM" in plan.describe(), plan.describe()


def test_calls_given_their_leading_arguments_by_keyword_are_planned_as_if_by_position() -> None:
    """torch.export and dynamo write every call of a captured region with keywords
    (``linear(input=x, weight=w, bias=b)``); the rewrite puts a prefix of them back by position where
    every signature accepting the call agrees, keyword-only ones stay; a call with its tensor by position
    is left as written."""
    from kernelevo.agent.builtin.keyword_arguments import leading_arguments_by_position

    graph = torch.fx.Graph()
    x, w, b = graph.placeholder("x"), graph.placeholder("w"), graph.placeholder("b")
    linear = graph.call_function(torch._C._nn.linear, (), {"input": x, "weight": w, "bias": b})
    softmax = graph.call_function(torch.softmax, (), {"input": linear, "dim": -1})
    summed = graph.call_function(torch.sum, (softmax,), {"dtype": torch.float64})
    gelu = graph.call_function(torch.nn.functional.gelu, (), {"input": summed, "approximate": "tanh"})
    cat = graph.call_function(torch.cat, (), {"tensors": [gelu, gelu]})
    graph.output(cat)
    assert leading_arguments_by_position(graph) == 4
    assert (linear.args, linear.kwargs) == ((x, w, b), {})
    assert (softmax.args, softmax.kwargs) == ((linear, -1), {})
    assert (summed.args, summed.kwargs) == ((softmax,), {"dtype": torch.float64})  # its tensor by position
    assert (gelu.args, gelu.kwargs) == ((summed,), {"approximate": "tanh"})
    assert (cat.args, cat.kwargs) == (([gelu, gelu],), {})


def test_repeated_heads_are_grouped_only_where_they_match_the_query_heads(tmp_path: Path) -> None:
    """k and v heads repeated to q's heads are grouped-query attention; repeated against a q whose one
    head broadcasts, they are not (enable_gqa would refuse what the reference computes), and a mask
    made in forward is refused with its reason rather than rendered as a tensor ModelNew lacks."""
    body = "F.scaled_dot_product_attention(q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1){})"
    source = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return BODY


def get_inputs():
    return [torch.randn(1, QH, 33, 24), torch.randn(1, 2, 50, 24), torch.randn(1, 2, 50, 24)]


def get_init_inputs():
    return []
"""
    path = tmp_path / "gqa.py"
    path.write_text(source.replace("BODY", body.format("")).replace("QH", "6"))
    assert recognise(load_task(str(path), "full")).kind == "attention"
    path.write_text(source.replace("BODY", body.format("")).replace("QH", "1"))
    with pytest.raises(CannotCover):
        recognise(load_task(str(path), "full"))
    mask = ", attn_mask=torch.ones(33, 50, dtype=torch.bool).tril(10)"
    path.write_text(source.replace("BODY", body.format(mask)).replace("QH", "6"))
    with pytest.raises(CannotCover, match="mask computed in forward"):
        recognise(load_task(str(path), "full"))


POSITIONS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        t = x.size(-1)
        pos = torch.arange(t, device=x.device)
        return BODY


def get_inputs():
    return [torch.randn(2, 40, 40)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(("body", "why"), [
    ("x + (pos[None, :] * pos[:, None]).float()", "integer arithmetic on positions"),
    ("x + (pos[None, :] // 3).float()", "floordiv"),
    ("x + (pos[None, :] * 1000000).float()", "integer arithmetic on positions"),
    ("x + ((pos[None, :] * 299999 + 1) - pos[None, :] * 299999).float()", "integer arithmetic on positions"),
    ("x + (pos[None, :] * 4).to(torch.int8)", "int8"),
    ("x + pos[:5].float().sum()", "indexes a tensor"),
    ("x + torch.softmax(pos[None, :] - pos[:, None].float(), -1)", "reduces or normalises positions"),
    ("x * 0 + (pos[None, :] - pos[:, None]).float()[:, :1]", "indexes a tensor"),
])
def test_positions_are_refused_where_the_kernel_would_not_compute_what_torch_does(tmp_path: Path, body: str,
                                                                                  why: str) -> None:
    """Positions made with arange are computed from an element's index only where that is exact:
    no integer products or floor division (fp32 is not int64 there), no slices of them, no reduction
    or normalisation of a tensor smaller than the kernel's shape (it would run over the kernel's
    rows); each is refused with its reason, never rendered."""
    path = tmp_path / "positions.py"
    path.write_text(POSITIONS.replace("BODY", body))
    with pytest.raises(CannotCover, match=why):
        recognise(load_task(str(path), "full"))
    path.write_text(POSITIONS.replace("BODY", "x + (3 * pos[None, :] - pos[:, None]).abs().float() / 8"))
    plan = recognise(load_task(str(path), "full"))
    assert [n.args for n in plan.program.nodes if n.op == "position"] == [[2, 3], [1, 3]]


@pytest.mark.parametrize(("mask", "causal"), [
    ("i[None, :] > i[:, None]", True),
    ("i[:, None] < i[None, :]", True),
    ("i[None, :] >= i[:, None]", False),  # the diagonal masked too: not attention's causal mask
    ("i[None, :] > i[:, None] + 1", False),
    # a sliding window as wide as the traced sequence: its values are the triangle's there, not beyond
    ("(i[:, None] - i[None, :] < 0) | (i[:, None] - i[None, :] >= 64)", False),
])
def test_a_mask_of_positions_is_causal_attention_only_where_it_masks_exactly_the_future(tmp_path: Path, mask: str,
                                                                                       causal: bool) -> None:
    """Attention by hand masked with positions compared is the flash kernel's causal attention only
    where the mask is true exactly above the diagonal at every size, which its form shows; any other
    mask stays as written, even one whose values at the traced size are the triangle's."""
    source = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, q, k, v):
        i = torch.arange(q.size(-2), device=q.device)
        s = (q @ k.transpose(-2, -1)) * 0.25
        return torch.softmax(s.masked_fill(MASK, float("-inf")), dim=-1) @ v


def get_inputs():
    return [torch.randn(2, 2, 24, 16), torch.randn(2, 2, 24, 16), torch.randn(2, 2, 24, 16)]


def get_init_inputs():
    return []
"""
    path = tmp_path / "masked.py"
    path.write_text(source.replace("MASK", mask))
    try:
        plan = recognise(load_task(str(path), "full"))
    except CannotCover:
        plan = None
    assert (plan is not None and plan.kind == "attention" and "causal" in plan.describe()) == causal


def test_a_segment_computes_in_the_dtype_of_the_tensors_it_reads_not_of_the_token_ids(tmp_path: Path) -> None:
    """A task whose only input is token ids (int64): the GEMM after the lookup computes in fp32 and is
    seeded as fp32 GEMMs are (products emulated to fp32's accuracy), not as an integer task."""
    path = tmp_path / "embed_linear.py"
    path.write_text("""import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.fc = nn.Linear(32, 48)

    def forward(self, idx):
        return torch.relu(self.fc(self.emb(idx)))


def get_inputs():
    return [torch.randint(0, 100, (4, 16))]


def get_init_inputs():
    return []
""")
    plan = recognise(load_task(str(path), "full"))
    gemm = next(s for s in plan.extra["segments"] if s.plan.kind == "matmul")
    assert gemm.plan.dtype == "float32" and gemm.params.get("precision") == "bf16x6"


def test_one_value_computed_into_a_tensor_with_dimensions_is_refused(tmp_path: Path) -> None:
    """A full reduction times a one-element tensor of rank 1 is a tensor of shape [1] in torch: a
    one-value kernel would allocate a tensor of no dimensions, so that tail is refused."""
    path = tmp_path / "tail.py"
    path.write_text("""import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, s):
        return (x * x).sum() * s


def get_inputs():
    return [torch.randn(8, 30), torch.randn(1)]


def get_init_inputs():
    return []
""")
    with pytest.raises(CannotCover, match="one value computed into a tensor of shape"):
        recognise(load_task(str(path), "full"))


def test_positions_are_cast_only_to_dtypes_that_hold_them_as_they_are() -> None:
    """torch wraps ``arange(300).to(torch.uint8)`` at 256; the kernel computes positions as they are,
    so such a cast is refused; float dtypes round as torch rounds."""
    from kernelevo.agent.builtin.lower_positions import holds

    assert not holds(torch.uint8, 0, 299) and holds(torch.uint8, 0, 255) and holds(torch.int16, 0, 299)
    assert not holds(torch.uint8, -1, 5) and not holds(torch.int8, 0, 128) and holds(torch.int8, -128, 127)
    assert holds(torch.bfloat16, 0, 1e6) and not holds(torch.float64, 0, 1) and not holds(torch.bool, 0, 1)


GROUPED_VIEW = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        return {body}


def get_inputs():
    return [torch.randn(16, 2048, 1024)]


def get_init_inputs():
    return [16]
'''


def test_an_input_read_through_one_view_is_planned_as_the_view_only_where_its_sizes_serve_that_view(
        tmp_path: Path) -> None:
    """``x.view(b, t, heads, c // heads).mean(2)``: the input is planned in the view's shape, and the
    generated forward views it first (at the task's shapes alone). A size read for arithmetic with a
    tensor is a number by then, and one of the dims both shapes lead with reads the same of either;
    where a size of another dim is read for anything else (here a second view of the result), that
    size would read the view's shape, so the input stays as it is."""
    path = tmp_path / "grouped.py"
    path.write_text(GROUPED_VIEW.format(body="x.view(b, t, self.heads, c // self.heads).mean(2)"))
    plan = recognise(load_task(str(path), "full"))
    assert [(v.name, v.shape) for v in plan.leading_views] == [("x", (16, 2048, 16, 64))]
    assert plan.sized_for == [(16, 2048, 1024)]
    source = _first_seed(path)
    forward = source[source.index("    def forward(self, x):"):]
    assert forward.index("generated for inputs of shapes") < forward.index("x = x.reshape(16, 2048, 16, 64)")
    path.write_text(GROUPED_VIEW.format(body="x.view(b, t, self.heads, -1).mean(2) / c * b"))
    assert [v.name for v in recognise(load_task(str(path), "full")).leading_views] == ["x"]
    path.write_text(GROUPED_VIEW.format(body="x.view(b, t, self.heads, -1).mean(2).reshape(b, c // self.heads * t)"))
    with pytest.raises(CannotCover, match="no template for `view`"):
        recognise(load_task(str(path), "full"))


FLATTENED_PAIR = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, logits, target):
        p = torch.sigmoid(logits.flatten(1))
        t = torch.flatten(target, 1)
        inter = (p * t).sum(dim=1)
        return 1 - ((2 * inter + 1.0) / (p.sum(dim=1) + t.sum(dim=1) + 1.0)).mean()


def get_inputs():
    return [torch.randn(16, 1, 256, 256), torch.rand(16, 1, 256, 256)]


def get_init_inputs():
    return []
'''


def test_inputs_read_through_flatten_are_planned_flat(tmp_path: Path) -> None:
    """A Dice loss flattens both its inputs (the method and the function): each is planned in the flat
    shape, so the row program over dim 1 sees inputs of one shape, and forward flattens them first."""
    path = tmp_path / "dice.py"
    path.write_text(FLATTENED_PAIR)
    plan = recognise(load_task(str(path), "full"))
    assert [(v.name, v.shape) for v in plan.leading_views] == [("logits", (16, 65536)), ("target", (16, 65536))]
    source = _first_seed(path)
    assert "logits = logits.reshape(16, 65536)" in source and "target = target.reshape(16, 65536)" in source


CAT_OF_A_PARAMETER = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = nn.Parameter(torch.randn(1, 1, 64))

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(8, 16, 64)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize(("body", "planned"), [
    ("        return torch.cat([self.t.expand(x.shape[0], -1, -1), x], dim=1)", True),
    # expanded along the joined dim: four rows of the parameter, which the broadcast read would not add
    ("        return torch.cat([self.t.expand(x.shape[0], 4, -1), x], dim=1)", False),
    # parameters alone: nothing sizes the output from an input
    ("        return torch.cat([self.t, self.t], dim=1) + 0 * x.sum()", False),
], ids=["class-token", "expanded-along-the-cat", "parameters-only"])
def test_a_cat_reads_a_parameter_broadcast_only_where_that_is_its_expansion(tmp_path: Path, body: str,
                                                                          planned: bool) -> None:
    path = tmp_path / "cat.py"
    path.write_text(CAT_OF_A_PARAMETER.format(body=body))
    try:
        plan = recognise(load_task(str(path), "full"))
    except CannotCover:
        plan = None
    moved = plan is not None and plan.kind == "rearrange"
    assert moved == planned, plan.describe() if plan is not None else None
    if planned:
        assert "attr_0_t = self.t.contiguous()" in _first_seed(path)


SIZED_MODULE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim, self.scale = dim, dim ** -0.5
        self.weight = nn.Parameter(torch.randn(16, dim))
        self.act = nn.Sequential(nn.LeakyReLU(dim ** -0.5), nn.Tanh())

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return [1024]
'''


@pytest.mark.parametrize(("body", "words"), [
    # bits read as another dtype: no shape view, and nothing raised while planning
    ("        return x.view(torch.int32).float() * 0.5", None),
    ("        return x.view(torch.bfloat16).float() * 2.0", None),
    # a constant the tracer made is no attribute ModelNew has
    ("        return F.linear(x, self.weight * torch.tensor(0.5))", None),
    # a called module's float that follows the size
    ("        return self.act(x)", "has negative_slope"),
    # ops that follow a size: the traced graph is not the one run at the task's size
    ("        if self.dim > 512:\n            x = x * self.scale\n        return torch.tanh(x)", "other ops at the size"),
], ids=["int32-bits", "bf16-bits", "tracer-constant", "module-float", "branch-on-a-size"])
def test_what_differs_at_the_size_being_optimised_is_refused_not_planned_wrong(tmp_path: Path, body: str,
                                                                              words: str | None) -> None:
    """Found by a review: each of these was planned into code that computes something else at the task's
    size, or raised while planning."""
    path = tmp_path / "sized.py"
    path.write_text(SIZED_MODULE.format(body=body))
    with pytest.raises(CannotCover, match=words or "."):
        plan = recognise(load_task(str(path), "full"))
        assert not plan.leading_views
        source = _first_seed(path)
        assert "_tensor_constant" not in source
        raise CannotCover("planned, but without the mistake")


GROUPS_FROM_THE_CONSTRUCTOR = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A depthwise convolution written as a call: its groups is a constructor argument, which the
    small size shrinks with the channels."""
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.w = nn.Parameter(torch.randn(c, 1, 3, 3))

    def forward(self, x):
        WEIGHT
        return F.conv2d(x, w, padding=self.c // 64, groups=self.c)


def get_inputs():
    return [torch.randn(8, 64, 96, 96)]


def get_init_inputs():
    return [64]
'''

RUN_AT_FULL_CHANNELS = """
import importlib.util, json, sys
import torch
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
ref, cand = load("reference", sys.argv[1]), load("candidate", sys.argv[2])
torch.manual_seed(0)
model = ref.Model(*ref.get_init_inputs())
new = cand.ModelNew(*ref.get_init_inputs())
new.load_state_dict(model.state_dict())
x = torch.randn(1, 64, 4, 4)
with torch.no_grad():
    print(json.dumps((new(x) - model(x)).abs().max().item()))
"""


@pytest.mark.parametrize("weight", ["w = self.w", "w = self.w - self.w.mean(dim=(1, 2, 3), keepdim=True)"],
                         ids=["parameter", "computed"])
def test_a_functional_convolutions_numbers_are_the_full_sizes(tmp_path: Path, weight: str) -> None:
    """The plan is recognised at the small size, where groups and padding (numbers written into the
    candidate) come out smaller: the candidate must carry the full size's, not compute a grouped
    convolution of the wrong groups. Run at the full channel count on a tiny image, directly."""
    task_file = tmp_path / "depthwise.py"
    task_file.write_text(GROUPS_FROM_THE_CONSTRUCTOR.replace("WEIGHT", weight))
    plan = recognise(load_task(str(task_file), "full"))
    assert "64->64" in plan.describe() and "64 groups" in plan.describe() and "padding (1, 1)" in plan.describe()
    candidate = tmp_path / "candidate.py"
    candidate.write_text(_first_seed(task_file))
    done = subprocess.run([sys.executable, "-c", RUN_AT_FULL_CHANNELS, str(task_file), str(candidate)],
                          capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) < 1e-4


TWO_FUNCTIONAL_CONVOLUTIONS = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, c, o):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(o, c, 3, 3))
        self.w2 = nn.Parameter(torch.randn(o, o, 1, 1))

    def forward(self, x):
        return F.conv2d(torch.relu(F.conv2d(x, self.w1, None, 2, 1)), self.w2)


def get_inputs():
    return [torch.randn(2, 64, 64, 64)]


def get_init_inputs():
    return [64, 64]
'''


def test_each_functional_convolution_keeps_its_own_numbers(tmp_path: Path) -> None:
    """The full size's numbers are those of the same call (told by its weight), not of the model's
    first convolution: the 1x1 convolution after a strided one keeps stride 1 and no padding."""
    path = tmp_path / "two.py"
    path.write_text(TWO_FUNCTIONAL_CONVOLUTIONS)
    described = recognise(load_task(str(path), "full")).describe()
    first, second = described.split("2. ")
    assert "stride (2, 2), padding (1, 1)" in first and "stride (1, 1), padding (0, 0)" in second, described


TWO_WEIGHT_NORMALISED = '''import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm


class Model(nn.Module):
    def __init__(self, c, o):
        super().__init__()
        self.a = weight_norm(nn.Conv2d(c, o, 3, stride=2, padding=1))
        self.b = weight_norm(nn.Conv2d(o, o, 3, padding=1, groups=o))

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def get_inputs():
    return [torch.randn(2, 64, 64, 64)]


def get_init_inputs():
    return [64, 64]
'''


def test_weight_normalised_convolutions_are_told_apart_by_their_biases(tmp_path: Path) -> None:
    """Their weights are computed, so each call is found at the full size by its bias: the second keeps
    its own stride, padding and groups (64, a constructor argument the small size shrinks)."""
    path = tmp_path / "two_wn.py"
    path.write_text(TWO_WEIGHT_NORMALISED)
    described = recognise(load_task(str(path), "full")).describe()
    convs = [part for part in described.split("; ") if "Conv2d" in part]
    assert len(convs) == 2, described
    assert "stride (2, 2), padding (1, 1)" in convs[0] and "groups" not in convs[0], described
    assert "stride (1, 1), padding (1, 1)" in convs[1] and "64 groups" in convs[1], described


def test_a_layer_under_another_parametrization_is_refused_with_the_reason(tmp_path: Path) -> None:
    """Spectral norm computes the weight in torch on every read: no template does, so no plan reads it."""
    path = tmp_path / "spectral.py"
    path.write_text("import torch\nimport torch.nn as nn\nfrom torch.nn.utils.parametrizations import spectral_norm\n\n\n"
                    "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.fc = spectral_norm(nn.Linear(64, 32))\n\n    def forward(self, x):\n"
                    "        return torch.relu(self.fc(x))\n\n\ndef get_inputs():\n    return [torch.randn(16, 64)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    with pytest.raises(CannotCover, match=r"parametrization \(SpectralNorm\)"):
        recognise(load_task(str(path), "full"))


def test_a_weight_fed_to_a_convolution_is_not_read_as_a_broadcast(tmp_path: Path) -> None:
    """A weight-normalised conv's computed weight [C, C, 3] and the activations [B, C, L] have the same
    rank; at the small size C and L can meet where they differ at full size, which matters only to
    inputs that broadcast, not to a convolution's weight."""
    path = tmp_path / "resblock.py"
    path.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                    "from torch.nn.utils.parametrizations import weight_norm\n\n\n"
                    "class Model(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n"
                    "        self.conv = weight_norm(nn.Conv1d(c, c, 3, padding=1))\n\n    def forward(self, x):\n"
                    "        return x + self.conv(F.leaky_relu(x, 0.1))\n\n\n"
                    "def get_inputs():\n    return [torch.randn(16, 256, 8192)]\n\n\n"
                    "def get_init_inputs():\n    return [256]\n")
    assert "Conv1d 256->256" in recognise(load_task(str(path), "full")).describe()


GRAM_OF_A_VIEW = '''import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        b, c, h, w = x.shape
        f = x.reshape(b, c, h * w)
        g = torch.bmm(f, f.transpose(1, 2)) / (h * w)
        return F.normalize(g.reshape(b, c * c), dim=1)

def get_inputs():
    return [torch.randn(32, 512, 28, 28)]

def get_init_inputs():
    return []
'''


def test_an_input_read_through_a_view_whose_sizes_are_read_again_is_planned_as_the_view(tmp_path: Path) -> None:
    """``b, c, h, w = x.shape`` then ``x.reshape(b, c, h * w)`` used twice: the view is the input, the
    sizes read elsewhere (``b`` and ``c`` lead both shapes; ``h * w`` becomes a number), and the GEMM is
    planned at the view's full shape (512 x 512 outputs of 784 products for each of 32), not the
    input's."""
    path = tmp_path / "gram.py"
    path.write_text(GRAM_OF_A_VIEW)
    plan = recognise(load_task(str(path), "full"))
    assert plan.kind == "sequence" and plan.leading_views[0].shape == (32, 512, 784), plan.describe()
    gemm = plan.extra["segments"][0].plan
    assert gemm.kind == "matmul" and gemm.rows == 32 * 512, gemm.describe()


@pytest.mark.slow
def test_a_size_read_from_a_computed_value_is_its_number_at_the_size_being_optimised(evaluator, tmp_path: Path
                                                                                     ) -> None:
    """``count_nonzero(h, 1) / h.shape[1]`` with ``h`` computed in ``forward``: the file shrinks for
    tracing, so the small trace reads 320 there; the full trace gives ``h``'s shape at the size being
    optimised, and the kernel divides by 640."""
    path = tmp_path / "density.py"
    path.write_text(BROADCAST_INPUTS.replace("def forward(self, x, t, s):", "def forward(self, x):")
                    .replace("return torch.clamp(1 - x * t, min=0) * s + t",
                             "h = torch.relu(x) * 2.0\n        return h, torch.count_nonzero(h, dim=1).to(h.dtype) / h.shape[1]")
                    .replace("[torch.randn(6, 300), torch.randn(300, 2)[:, 0], torch.randn(())]  # t is strided",
                             "[torch.randn(2048, 640)]"))
    assert recognise(load_task(str(path), "small")).cols == 320
    source = _first_seed(path)
    assert "/ 640.0" in source and "/ 320.0" not in source
    verdict, code = _judge_first_seed(evaluator, path, "full")
    assert code == 0, verdict.reason


HEADS_OF_A_GEMM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, heads, head_dim):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, heads * head_dim)
        self.heads, self.head_dim = heads, head_dim

    def forward(self, x):
        x = self.fc(x)
        x = x.view(x.shape[0], self.heads, self.head_dim)
        return torch.tanh(torch.logsumexp(x, dim=-1))


batch_size, in_features, heads, head_dim = 1024, 1024, 8, 128


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, heads, head_dim]
'''


@pytest.mark.slow  # a GEMM judged under the interpreter: about 40 s
def test_a_view_mixing_a_size_read_with_a_constructor_size_infers_the_one_that_shrinks(evaluator, tmp_path: Path
                                                                                       ) -> None:
    """``x.view(x.shape[0], self.heads, self.head_dim)`` between a GEMM and a reduction: the automatic
    small size halves ``head_dim`` (128 there, 32 here), so the view is written with ``-1`` in its place,
    right at both sizes, and the candidate rendered for the full size is correct at the small one."""
    path = tmp_path / "heads.py"
    path.write_text(HEADS_OF_A_GEMM)
    source = _first_seed(path)
    assert re.search(r"\.view\(\w+, 8, -1\)", source), source[source.index("    def forward(self, x):"):]
    verdict, code = _judge_first_seed(evaluator, path, "small")
    assert code == 0, verdict.reason


@pytest.mark.parametrize(("body", "inputs", "why"), [
    # a number written into a view of a value: the write would land in the value, which the rewrite cannot see
    ("y = x * 2\n        z = y[:, 1:]\n        z[:, 0] = 0.0\n        return y", "torch.randn(8, 30)",
     "assigns into"),
    # a view taken before the write, through an op that may share storage, reads the written values
    ("y = x * 2\n        z = y.swapdims(0, 1).swapdims(0, 1)\n        y[:, 0] = 0.0\n        return z + 1",
     "torch.randn(8, 30)", "assigns into"),
    ("return torch.matmul(x, y)", "torch.randn(24), torch.randn(3, 24, 20)", "vector times a batch"),
])
def test_writes_and_products_the_templates_cannot_follow_are_refused(tmp_path: Path, body: str, inputs: str,
                                                                     why: str) -> None:
    """An item assignment left in place (into a view, or with a view of its target taken before it) and
    a vector times a batch of matrices are refused with their reason, never planned as if absent."""
    args = "x, y" if inputs.count("torch.randn") == 2 else "x"
    path = tmp_path / "refused.py"
    path.write_text(f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, {args}):\n"
                    f"        {body}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n"
                    "    return []\n")
    with pytest.raises(CannotCover, match=why):
        recognise(load_task(str(path), "full"))


@pytest.mark.parametrize("body", [
    # two writes into one mask: its or is no in-place write
    "m = x > 0\n        m[:, 0] = True\n        m[:, 1] = True\n        return x.masked_fill(m, 0.0)",
    # a dtype's limit in arithmetic, then a clamp's bounds
    "v = torch.finfo(x.dtype).max - 1000\n        y = torch.clamp(x * 1e37, min=-v, max=v)\n"
    "        fi = torch.finfo(x.dtype)\n        return y.clamp(fi.min / 2, fi.max / 2) * 1e-30",
])
def test_mask_writes_and_dtype_limits_in_bounds_are_planned(tmp_path: Path, body: str) -> None:
    path = tmp_path / "planned.py"
    path.write_text(f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                    f"        {body}\n\n\ndef get_inputs():\n    return [torch.randn(8, 30)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    assert recognise(load_task(str(path), "full")).kind == "pointwise"


def test_a_view_of_a_parameter_made_with_the_files_constants_is_planned_for_its_size_alone() -> None:
    """Group-wise fake quantisation views its weight in groups of ``GROUP_SIZE``, a module constant the
    small size shrinks (128 there, 16 traced): the view is written with 128, so the plan says it holds
    at that size alone, and a check at the small size plans the small size afresh (with 16)."""
    path = ROOT / "bench/probes/level1/int4_groupwise_fake_quant_linear.py"
    plan = recognise(load_task(str(path), "full"))
    assert plan.numbers_there and "// (128)), 128)" in plan.numbers_there[0]
    small = recognise(load_task(str(path), "small"))
    source = render(small, *seeds(small)[0])
    assert "// (16)), 16)" in source and "// (128)" not in source


SLICE_BROADCAST = '''import torch
import torch.nn as nn

D = 3000
SMALL = {small}
batch = 8


class Model(nn.Module):
    def forward(self, {args}):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize(("small", "args", "body", "inputs", "refused"), [
    # one column at the small size, as wide as y: a kernel planned there reads y along columns it lacks
    ('{"D": 2}', "x, y", "(x[:, 1:] - y).pow(2).sum(-1)", "torch.randn(batch, D), torch.randn(batch, 1)", True),
    # a size of 1 at the small size that is 1 or absent at full size too is read the same: planned
    ('{"batch": 1}', "x, w", "torch.relu(x[:, 1:] * w)", "torch.randn(batch, D), torch.randn(D - 1)", False),
    ('{"batch": 1}', "x", "x[:, 1:] * x[:, 1:].sum(0, keepdim=True)", "torch.randn(batch, D)", False),
])
def test_a_broadcast_inside_forward_that_changes_with_the_size_is_refused(tmp_path: Path, small: str, args: str,
                                                                          body: str, inputs: str,
                                                                          refused: bool) -> None:
    path = tmp_path / "sliced.py"
    path.write_text(SLICE_BROADCAST.format(small=small, args=args, body=body, inputs=inputs))
    if refused:
        with pytest.raises(CannotCover, match="reads `y` broadcast differently at the small size"):
            recognise(load_task(str(path), "full"))
    else:
        assert recognise(load_task(str(path), "full")).kind in ("pointwise", "row", "sequence")
