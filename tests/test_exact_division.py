"""Generated kernels divide as torch does, rounded once (IEEE), not with Triton's default fp32 "/",
which compiles to the GPU's approximate division (up to 2 ulp off). The difference matters where a
quotient meets a rounding or comparison boundary: a quantiser's ``round(w / scale)`` then picks the
neighbouring level, and a whole output column moves by one step. Checked in the PTX compiled for
sm_90a without a GPU."""

from __future__ import annotations

import pytest

from kernelevo.agent.builtin import expressions

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def quotient(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, {expression})
'''


def _ptx(expression: str, tmp_path) -> str:
    pytest.importorskip("triton")
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = tmp_path / f"k{abs(hash(expression))}.py"
    path.write_text(KERNEL.format(expression=expression))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = ASTSource(module.quotient, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                                    "BLOCK": "constexpr"}, constexprs={"BLOCK": 128})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]


def test_division_of_two_values_is_rounded_once(tmp_path) -> None:
    assert "div.full.f32" in _ptx("x / y", tmp_path)  # why the generated code does not write "/"
    ptx = _ptx(expressions.elementwise("div", ["x", "y"]), tmp_path)
    assert "div.rn.f32" in ptx and "div.full.f32" not in ptx


def test_division_by_a_number_is_rounded_once(tmp_path) -> None:
    ptx = _ptx(expressions.elementwise("div", ["x", 15.0]), tmp_path)
    assert "div.rn.f32" in ptx and "div.full.f32" not in ptx


def test_a_quotient_of_two_numbers_is_folded_as_fp32_divides() -> None:
    import torch

    assert float(expressions.elementwise("div", [1.0, 3.0])) == torch.tensor(1.0, dtype=torch.float32).div(3.0).item()
    assert expressions.elementwise("div", [1.0, 0.0]) == 'float("inf")'
    assert expressions.elementwise("div", [0.0, 0.0]) == 'float("nan")'


POSITIONS_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def positions(out_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)[:, None]
    j = tl.arange(0, BLOCK)[None, :]
    tl.store(out_ptr + i * BLOCK + j, ({expression}).to(tl.float32))
'''


@pytest.mark.parametrize("spec", [
    ("lt", ("div", ("sub", ("j", 0, 1), ("i", 0, 1)), ("number", 7)), ("number", 1.0)),
    ("div", ("number", 3), ("add", ("j", 0, 1), ("number", 1))),
])
def test_a_mask_made_from_positions_divides_rounded_once(tmp_path, spec) -> None:
    """``(j - i) / 7 < 1`` on the GPU's approximate division: 7 / 7 may come out just below 1."""
    pytest.importorskip("triton")
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernelevo.agent.builtin.attention_positions import triton_text

    path = tmp_path / "positions.py"
    path.write_text(POSITIONS_KERNEL.format(expression=triton_text(spec)))
    module_spec = importlib.util.spec_from_file_location("positions_kernel", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    source = ASTSource(module.positions, signature={"out_ptr": "*fp32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 32})
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "div.rn.f32" in ptx and "div.full.f32" not in ptx


def test_a_mask_quotient_in_float64_keeps_the_division_that_is_exact_there() -> None:
    from kernelevo.agent.builtin.attention_positions import triton_text

    text = triton_text(("div", ("cast", "float64", ("j", 0, 1)), ("number", 3)))
    assert "div_rn" not in text and " / " in text
    assert triton_text(("div", ("number", 1), ("number", 3))) == repr(torch_fp32_third())


def torch_fp32_third() -> float:
    import torch

    return torch.tensor(1.0, dtype=torch.float32).div(3.0).item()
