"""Rotary position embedding: ``x * cos + rotate_half(x) * sin``, with ``rotate_half(x)`` the halves of
the last dim swapped and the second negated (``torch.cat((-x2, x1), dim=-1)``, the halves taken by
``chunk(2, -1)`` or by slicing at ``d // 2``), as LLaMA-style models write it.

Each program takes a block of rows (every dim but the last) and both halves of each: the two halves
of ``x`` are read once, ``cos`` and ``sin`` through their strides as broadcast to ``x`` (a table of
``[seq, d]`` shared by every batch and head stays in L2), and both halves of the output are written
once: ``out1 = x1 * cos1 - x2 * sin1`` and ``out2 = x2 * cos2 + x1 * sin2``, in fp32 registers. The
rotated copy of ``x`` that torch writes and reads back never reaches memory.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import graph_calls, is_call, returns_only

MAX_RANK = 5
"""Dims of ``x`` covered: up to four before the rotated one."""


@dataclass
class Rotary:
    x: str
    cos: str
    sin: str
    inputs: list[str]
    rank: int
    out_dtype: str


def _product(node: Any) -> tuple[Any, Any] | None:
    if is_call(node, (operator.mul, torch.mul), ("mul",)) and len(node.args) == 2:
        return node.args[0], node.args[1]
    return None


def _half(node: Any, x: torch.fx.Node, first: bool, width: int) -> bool:
    """Is ``node`` the first (or second) half of ``x``'s last dim?"""
    if not is_call(node, (operator.getitem,)) or node.args[0] is None:
        return False
    source, index = node.args
    if is_call(source, (torch.chunk,), ("chunk",)) and source.args[0] is x:
        chunks = source.kwargs.get("chunks", source.args[1] if len(source.args) > 1 else None)
        dim = source.kwargs.get("dim", source.args[2] if len(source.args) > 2 else 0)
        return chunks == 2 and isinstance(dim, int) and dim in (-1, width - 1) and index == (0 if first else 1)
    if source is not x or not isinstance(index, tuple) or len(index) != 2 or index[0] is not Ellipsis:
        return False
    half = x.meta["tensor_meta"].shape[-1] // 2
    cut = index[1]
    return isinstance(cut, slice) and cut.step is None and (
        (cut.start is None and cut.stop == half) if first else (cut.start == half and cut.stop is None))


def _rotated(node: Any) -> torch.fx.Node | None:
    """``x`` where ``node`` is ``cat((-x2, x1), dim=-1)`` of its halves."""
    if not is_call(node, (torch.cat, torch.concat)) or len(node.args) < 1:
        return None
    parts = node.args[0]
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
    if not isinstance(parts, (tuple, list)) or len(parts) != 2:
        return None
    negated, first = parts
    if not is_call(negated, (operator.neg, torch.neg), ("neg",)) or not is_call(first, (operator.getitem,)):
        return None
    x = first.args[0].args[0] if is_call(first.args[0], (torch.chunk,), ("chunk",)) else first.args[0]
    if not isinstance(x, torch.fx.Node) or "tensor_meta" not in x.meta:
        return None
    rank = len(x.meta["tensor_meta"].shape)
    if dim not in (-1, rank - 1) or not _half(first, x, True, rank) or not _half(negated.args[0], x, False, rank):
        return None
    return x


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> Rotary | None:
    """The plan if the graph is ``x * cos + rotate_half(x) * sin`` of its inputs, else None."""
    calls, placeholders = graph_calls(gm)
    if not calls or not is_call(calls[-1], (operator.add, torch.add), ("add",)) or not returns_only(gm, calls[-1]) \
            or len(calls[-1].args) != 2 or calls[-1].kwargs:
        return None
    found = None
    for plain, turned in (calls[-1].args, reversed(calls[-1].args)):
        a, b = _product(plain), _product(turned)
        if a is None or b is None:
            continue
        for x, cos in (a, reversed(a)):
            for rot, sin in (b, reversed(b)):
                if isinstance(rot, torch.fx.Node) and _rotated(rot) is x:
                    found = (x, cos, sin)
    if found is None:
        return None
    x, cos, sin = found
    if not all(isinstance(t, torch.fx.Node) and t.op == "placeholder" for t in found):
        raise CannotCover("rotary embedding of computed tensors (covered: x, cos and sin passed to forward)")
    value = inputs[placeholders.index(x)]
    tables = [inputs[placeholders.index(t)] for t in (cos, sin)]
    if not 2 <= value.dim() <= MAX_RANK or value.shape[-1] % 2 or not value.is_floating_point() or \
            any(t.dtype != value.dtype or t.dim() > value.dim() for t in tables):
        raise CannotCover(f"rotary embedding of a {value.dim()}-D {value.dtype} input (covered: 2-{MAX_RANK} dims, "
                          "an even last dim, cos and sin of its dtype)")
    try:
        if any(torch.broadcast_shapes(tuple(t.shape), tuple(value.shape)) != tuple(value.shape) for t in tables):
            raise RuntimeError
    except RuntimeError:
        raise CannotCover("rotary embedding whose cos or sin does not broadcast to x") from None
    return Rotary(x=x.name, cos=cos.name, sin=sin.name, inputs=[p.name for p in placeholders], rank=value.dim(),
                  out_dtype=str(value.dtype).removeprefix("torch."))


KERNEL = '''@triton.jit
def rotary_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, n_rows, S1, S2, S3, C0, C1, C2, C3, CD, T0, T1, T2, T3, TD,
                  HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr):
    # Program p: rows [p * BLOCK_R, (p + 1) * BLOCK_R) of x (every dim but the last, the sizes S0..S3
    # with S0 implied), both halves of each. A row's coordinates address cos and sin through their
    # strides as broadcast to x (C*, T*; 0 along a broadcast dim); x and out are contiguous.
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < n_rows
    rest = rows.to(tl.int64)
    i3 = rest % S3
    rest = rest // S3
    i2 = rest % S2
    rest = rest // S2
    i1 = rest % S1
    i0 = rest // S1
    at_cos = (i0 * C0 + i1 * C1 + i2 * C2 + i3 * C3)[:, None]
    at_sin = (i0 * T0 + i1 * T1 + i2 * T2 + i3 * T3)[:, None]
    cols = tl.arange(0, BLOCK_H)
    mask = row_ok[:, None] & (cols < HALF)[None, :]
    first = (rows.to(tl.int64) * (2 * HALF))[:, None] + cols[None, :]
    x1 = tl.load(x_ptr + first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + first + HALF, mask=mask, other=0.0).to(tl.float32)
    c1 = tl.load(cos_ptr + at_cos + cols[None, :] * CD, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + at_cos + (cols[None, :] + HALF) * CD, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + at_sin + cols[None, :] * TD, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + at_sin + (cols[None, :] + HALF) * TD, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + first, (x1 * c1 - x2 * s1).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + first + HALF, (x2 * c2 + x1 * s2).to(out_ptr.dtype.element_ty), mask=mask)
'''


def forward(plan: Rotary, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: x contiguous, cos and sin broadcast to it (strides, no copy), one launch."""
    x, cos, sin = plan.x, plan.cos, plan.sin
    pad = MAX_RANK - plan.rank
    body = [f"{x} = {x}.contiguous()",
            f"table_c = {cos}.expand({x}.shape)",
            f"table_s = {sin}.expand({x}.shape)",
            f"sizes = [1] * {pad} + list({x}.shape[:-1])",
            f"strides_c = [0] * {pad} + list(table_c.stride()[:-1])",
            f"strides_s = [0] * {pad} + list(table_s.stride()[:-1])",
            f"out = torch.empty_like({x})",
            f"n_rows = {x}.numel() // {x}.shape[-1]",
            "if n_rows:",
            f"    rotary_kernel[(ceil_div(n_rows, {params['BLOCK_R']}),)](",
            f"        {x}, table_c, table_s, out, n_rows, *sizes[1:], *strides_c, table_c.stride(-1), *strides_s,",
            f"        table_s.stride(-1), HALF={x}.shape[-1] // 2, BLOCK_H=next_power_of_2({x}.shape[-1] // 2),",
            f"        BLOCK_R={params['BLOCK_R']}, num_warps={params['num_warps']})",
            "return out"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "".join(f"    {line}\n" for line in body)


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK_R": rows, "num_warps": warps}, f"seed: {rows} rows per program")
            for rows, warps in ((16, 4), (32, 8), (8, 4))]


def describe(plan: Rotary) -> str:
    return f"rotary embedding of a {plan.rank}-D input, {plan.out_dtype}"
