"""The Triton compile gate: a candidate's kernels compiled for sm_90a without a GPU, in the sandbox,
with the register and spill report, or the compiler's error pointing at the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import candidate
from kernelevo.tasks import load_task
from kernelevo.tools.kernel_tools import describe_triton_gate


def test_an_honest_kernel_compiles_for_hopper_with_its_resources(evaluator) -> None:
    result = evaluator.triton_gate(load_task("relu", "full"), candidate("ok_relu_empty"))
    assert result["ok"] and result["target"] == "sm_90a"
    (kernel,) = result["kernels"]
    assert kernel["ok"] and "registers" in kernel["resources"]
    assert "ok" in describe_triton_gate(result) and "registers" in describe_triton_gate(result)


def test_a_compile_error_names_the_line(evaluator, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(candidate("ok_relu_empty").read_text().replace("tl.maximum(x, 0.0)",
                                                                      "tl.maximum(x, undefined_name)"))
    result = evaluator.triton_gate(load_task("relu", "full"), broken)
    assert not result["ok"]
    text = describe_triton_gate(result)
    assert "FAILED" in text and "undefined_name" in text and "tl.maximum(x, undefined_name)" in text


def test_a_forward_that_fails_or_launches_nothing_is_reported(evaluator, tmp_path: Path) -> None:
    silent = tmp_path / "silent.py"
    source = candidate("ok_relu_empty").read_text()
    silent.write_text(source.replace("relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)", "pass"))
    result = evaluator.triton_gate(load_task("relu", "full"), silent)
    assert not result["ok"] and "launched no Triton kernel" in result["error"]
    failing = tmp_path / "failing.py"
    failing.write_text(source.replace("n = x.numel()", "n = x.numel() // 0"))
    result = evaluator.triton_gate(load_task("relu", "full"), failing)
    assert not result["ok"] and "ZeroDivisionError" in result["error"]


@pytest.mark.slow
def test_every_builtin_plan_compiles_for_hopper(evaluator, tmp_path: Path) -> None:
    """What the interpreter cannot show (types, layouts, register pressure): one seed of every strategy
    of every built-in task, at full size, compiles for sm_90a without spilling."""
    from kernelevo.agent.builtin.policy import BuiltinPolicy, seeds
    from kernelevo.agent.builtin.templates import render
    from kernelevo.tasks import builtin_names

    problems = []
    for name in builtin_names():
        task = load_task(name, "full")
        policy = BuiltinPolicy()
        policy.prepare(task)
        done = set()
        for strategy, params, why in seeds(policy.plan):
            if strategy in done:
                continue
            done.add(strategy)
            path = tmp_path / f"{name}-{strategy}.py"
            path.write_text(render(policy.plan, strategy, params, why))
            result = evaluator.triton_gate(task, path)
            if not result["ok"]:
                problems.append(f"{name}/{strategy}: {describe_triton_gate(result)[:300]}")
            problems += [f"{name}/{strategy}: {k['resources']}" for k in result["kernels"]
                         if "spill stores" in k.get("resources", "")]
    assert not problems, "\n".join(problems)


def test_the_gate_specialises_arguments_as_the_launcher_does() -> None:
    """An integer equal to 1 (a unit stride, say) is a constant and multiples of 16 are marked
    divisible, as in Triton's launcher: without that the gate reported twice the registers."""
    from types import SimpleNamespace

    from kernelevo.sandbox.child.triton_gate import _specialise

    plain = SimpleNamespace(do_not_specialize=False, do_not_specialize_on_alignment=False)
    assert _specialise(1, plain) == ("constexpr", False)
    assert _specialise(8192, plain) == ("i32", True)
    assert _specialise(8193, plain) == ("i32", False)
    assert _specialise(2.5, plain)[0] == "fp32"
    assert _specialise(1, SimpleNamespace(do_not_specialize=True, do_not_specialize_on_alignment=False))[0] == "i32"


@pytest.mark.slow
def test_a_promised_vector_width_turns_scalar_loads_into_16_byte_ones(evaluator, tmp_path: Path) -> None:
    """Rows of 1000 bf16 values: Triton cannot prove 16-byte alignment (1000 is not a multiple of 16)
    and reads one element per instruction; with VEC=8 the forward checks the promise and the loads
    become 128 bits wide. STATIC (the sizes as compile-time constants) gets the same loads without
    the promise. The helper refuses a misaligned tensor."""
    import importlib.util

    import torch

    from kernelevo.agent.builtin.policy import seeds
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.agent.builtin.templates import render

    task = load_task("rmsnorm", "small")
    plan = recognise(task)
    strategy, params, why = seeds(plan)[0]
    widths = {}
    for label, change in (("none", {"VEC": 1, "STATIC": False}), ("vec", {"STATIC": False}),
                          ("static", {"VEC": 1, "STATIC": True})):
        path = tmp_path / f"{label}.py"
        path.write_text(render(plan, strategy, dict(params, **change), why))
        result = evaluator.triton_gate(task, path)
        assert result["ok"], describe_triton_gate(result)
        widths[label] = result["kernels"][0]["load_bits"]
    # STATIC (sizes as compile-time constants, as torch.compile's kernels have them) gets there too
    assert widths == {"none": 16, "vec": 128, "static": 128}
    assert "global loads up to 128 bits wide" in describe_triton_gate(result)
    spec = importlib.util.spec_from_file_location("vec_candidate", tmp_path / "vec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    whole = torch.zeros(8 * 1000 + 8, dtype=torch.bfloat16)
    assert module.aligned(8, (1000,), (whole[:8000].view(8, 1000),)) == 8
    assert module.aligned(8, (1000,), (whole[1:8001].view(8, 1000),)) == 1  # starts 2 bytes in
    assert module.aligned(8, (1004,), (whole,)) == 1


GATED = {
    "fmod-of-a-row-value-against-values": (
        "torch.fmod(x.sum(1, keepdim=True), x) + torch.remainder(x, 0.7) + torch.fmod(x.amax(), x)",
        "torch.randn(64, 3000)", ""),
    "convtranspose-phases-dilated": ("self.conv(x)", "torch.randn(4, 32, 4096)",
                                     "        self.conv = nn.ConvTranspose1d(32, 16, 3, stride=2, padding=1, dilation=2)"),
}
TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("name", list(GATED))
def test_generated_helpers_compile_for_hopper(evaluator, tmp_path: Path, name: str) -> None:
    """What the interpreter runs but the compiler may refuse: the exact fmod helper with operands of
    two shapes (a row's value against the row, one value against a block), and the dilated phase split
    (taps counted per program), each strategy's first seed."""
    from kernelevo.agent.builtin.policy import seeds
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.agent.builtin.templates import render

    body, inputs, init = GATED[name]
    path = tmp_path / "task.py"
    path.write_text(TASK.format(init=init or "        pass", body=body, inputs=inputs))
    task = load_task(str(path), "full")
    plan = recognise(task)
    done: set[str] = set()
    for strategy, params, why in seeds(plan):
        if strategy in done:
            continue
        done.add(strategy)
        source = render(plan, strategy, params, why)
        assert "fmod_exact(" in source or "phase_taps(" in source
        candidate_path = tmp_path / f"{strategy}.py"
        candidate_path.write_text(source)
        result = evaluator.triton_gate(task, candidate_path)
        assert result["ok"], describe_triton_gate(result)[:600]
