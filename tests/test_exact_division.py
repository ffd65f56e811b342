"""Generated kernels divide as eager divides on the device they run on, not with Triton's default fp32
"/", which compiles to the GPU's approximate division (up to 2 ulp off). Two values: rounded once
(IEEE), as torch divides them everywhere. By a number: on a GPU torch multiplies by the number's fp32
reciprocal; on the CPU it divides. The last place matters where a quotient meets a rounding or
comparison boundary: a quantiser's ``round(w / scale)`` then picks the neighbouring level, and a whole
output column moves by one step. The PTX is checked as compiled for sm_90a without a GPU; the values
under Triton's interpreter (in a process of its own) and, on a GPU, against torch there."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import require_gpu
from kernelevo.agent.builtin import expressions
from kernelevo.agent.builtin.attention_positions import triton_text

HEAD = '''
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction


{helpers}
'''
QUOTIENT = HEAD + '''
@triton.jit
def quotient(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.load(y_ptr + offs, mask=offs < n, other=1.0)
    tl.store(out_ptr + offs, {expression}, mask=offs < n)
'''
POSITIONS = HEAD + '''
@triton.jit
def positions(out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)[:, None]
    j = tl.arange(0, BLOCK)[None, :]
    tl.store(out_ptr + i * BLOCK + j, ({expression}).to(tl.float32))
'''


def _module(template: str, expression: str, path: Path):
    path.write_text(template.format(helpers=expressions.helpers_for(expression), expression=expression))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ptx(template: str, expression: str, tmp_path: Path) -> str:
    pytest.importorskip("triton")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = _module(template, expression, tmp_path / f"k{abs(hash(expression))}.py")
    if template is QUOTIENT:
        source = ASTSource(module.quotient, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                                        "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 128})
    else:
        source = ASTSource(module.positions, signature={"out_ptr": "*fp32", "BLOCK": "constexpr"},
                           constexprs={"BLOCK": 32})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]


def test_division_of_two_values_is_rounded_once(tmp_path: Path) -> None:
    assert "div.full.f32" in _ptx(QUOTIENT, "x / y", tmp_path)  # why the generated code never writes "/"
    ptx = _ptx(QUOTIENT, expressions.elementwise("div", ["x", "y"]), tmp_path)
    assert "div.rn.f32" in ptx and "div.full.f32" not in ptx


def test_division_by_a_number_is_a_product_with_its_reciprocal_on_a_gpu(tmp_path: Path) -> None:
    expression = expressions.elementwise("div", ["x", 15.0])
    assert expression == f"divide_by_number(x, 15.0, {expressions.reciprocal(15.0)!r})"
    ptx = _ptx(QUOTIENT, expression, tmp_path)
    assert "div." not in ptx and "mul.f32" in ptx
    assert expressions.reciprocal(15.0) == (torch.tensor(1.0) / torch.tensor(15.0)).item()


@pytest.mark.parametrize("operands", [["x", "n"], ["n", 3.0], ["n", "x"]])
def test_a_count_among_the_operands_is_divided_as_a_float(tmp_path: Path, operands) -> None:
    """A mean's count or a variance's ``n - 1`` is an int32 argument of the kernel."""
    assert "div.full" not in _ptx(QUOTIENT, expressions.elementwise("div", operands), tmp_path)


def test_a_quotient_of_two_numbers_is_folded_as_fp32_divides() -> None:
    assert float(expressions.elementwise("div", [1.0, 3.0])) == torch.tensor(1.0).div(3.0).item()
    assert expressions.elementwise("div", [1.0, 0.0]) == 'float("inf")'
    assert expressions.elementwise("div", [0.0, 0.0]) == 'float("nan")'


@pytest.mark.parametrize("spec", [
    ("lt", ("div", ("sub", ("j", 0, 1), ("i", 0, 1)), ("number", 7)), ("number", 1.0)),
    ("div", ("number", 3), ("add", ("j", 0, 1), ("number", 1))),
])
def test_a_mask_made_from_positions_divides_as_eager(tmp_path: Path, spec) -> None:
    """``(j - i) / 7 < 1`` on the GPU's approximate division: 7 / 7 may come out just below 1."""
    ptx = _ptx(POSITIONS, triton_text(spec), tmp_path)
    assert "div.full.f32" not in ptx


def test_a_mask_quotient_in_float64_keeps_the_division_that_is_exact_there() -> None:
    text = triton_text(("div", ("cast", "float64", ("j", 0, 1)), ("number", 3)))
    assert "div_rn" not in text and "divide_by_number" not in text and " / " in text
    assert triton_text(("div", ("number", 1), ("number", 3))) == repr(torch.tensor(1.0).div(3.0).item())


INTERPRETED = '''
import json, sys
import torch
sys.path.insert(0, {folder!r})
import quotients
x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(0)) * 100
y = torch.rand(1 << 16, generator=torch.Generator().manual_seed(1)) + 0.01
out = {{}}
for name, want in (("by_values", x / y), ("by_number", x / 15.0)):
    got = torch.empty_like(x)
    getattr(quotients, name)[(x.numel() // 1024,)](x, y, got, x.numel(), BLOCK=1024)
    out[name] = int((got != want).sum())
print(json.dumps(out))
'''


def _quotients(folder: Path) -> Path:
    """A module with one kernel dividing by values and one by the number 15, as generated."""
    by_values = QUOTIENT.format(helpers=expressions.helpers_for("true_divide("),
                                expression=expressions.elementwise("div", ["x", "y"]))
    by_number = QUOTIENT.format(helpers=expressions.helpers_for("divide_by_number("),
                                expression=expressions.elementwise("div", ["x", 15.0]))
    source = by_values.replace("def quotient(", "def by_values(") + by_number.split("\n\n\n", 1)[1].replace(
        "def quotient(", "def by_number(")
    (folder / "quotients.py").write_text(source)
    return folder


def test_under_the_interpreter_quotients_are_the_cpus_bit_for_bit(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(INTERPRETED.format(folder=str(_quotients(tmp_path))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"by_values": 0, "by_number": 0}


@pytest.mark.gpu
def test_on_a_gpu_quotients_are_torchs_bit_for_bit(tmp_path: Path) -> None:
    require_gpu()
    sys.path.insert(0, str(_quotients(tmp_path)))
    try:
        import quotients
    finally:
        sys.path.pop(0)
    x = torch.randn(1 << 20, device="cuda") * 100
    y = torch.rand(1 << 20, device="cuda") + 0.01
    for kernel, want in ((quotients.by_values, x / y), (quotients.by_number, x / 15.0)):
        got = torch.empty_like(x)
        kernel[(x.numel() // 1024,)](x, y, got, x.numel(), BLOCK=1024)
        assert int((got != want).sum()) == 0
