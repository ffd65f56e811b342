"""Embedding lookups (``nn.Embedding``, ``F.embedding``) and their like on an input (``index_select``
along dim 0, ``x[idx]`` of a matrix): each index picks a row of the table.

Each program copies BLOCK_D columns of BLOCK_N looked-up rows. A table row is a contiguous run in
memory and so is an output row, so every load and store is a run of whole lines: the kernel reads
the indices once, each looked-up row once, and writes the output once, which is all a lookup can
cost. Ops after the lookup run as kernels of their own (:mod:`sequence`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import graph_calls, returns_only

INDEX_DTYPES = (torch.int64, torch.int32)


@dataclass
class Embedding:
    table: str
    """The table's expression in ``ModelNew.forward`` (``self.emb.weight``, or an input's name)."""
    input: str
    inputs: list[str]
    out_dtype: str
    wraps: bool = False
    """Negative indices count from the end (``x[idx]``); else they are outside the table."""


def _lookup(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[Any, str, dict[str, Any]] | None:
    """(index node, the table's expression, options) of an embedding lookup, else None."""
    if node.op == "call_module":
        sub = gm.get_submodule(str(node.target))
        if not isinstance(sub, nn.Embedding):
            return None
        return node.args[0], f"self.{node.target}.weight", {"max_norm": sub.max_norm}
    if node.op == "call_function" and node.target in (torch.index_select, operator.getitem):
        table, dim, index = (node.args[0], node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None),
                             node.kwargs.get("index", node.args[2] if len(node.args) > 2 else None)) \
            if node.target is torch.index_select else (node.args[0], 0, node.args[1])
        value = table.meta.get("tensor_meta") if isinstance(table, torch.fx.Node) else None
        index_meta = index.meta.get("tensor_meta") if isinstance(index, torch.fx.Node) else None
        if value is None or index_meta is None or index_meta.dtype not in INDEX_DTYPES or dim != 0 or \
                len(value.shape) != 2 or table.op != "placeholder":
            return None
        return index, table.name, {"wraps": node.target is operator.getitem}
    if node.op == "call_function" and node.target is F.embedding:
        table = node.kwargs.get("weight", node.args[1] if len(node.args) > 1 else None)
        if not isinstance(table, torch.fx.Node) or table.op != "get_attr":
            raise CannotCover("an embedding whose table is computed (covered: a parameter or buffer)")
        names = ("padding_idx", "max_norm")
        options = dict(zip(names, node.args[2:], strict=False))
        options.update({k: v for k, v in node.kwargs.items() if k in names})
        return node.kwargs.get("input", node.args[0]), f"self.{table.target}", options
    return None


def table_width(full: torch.nn.Module | None, table: str) -> int | None:
    """The table's row length in the model at the size being optimised (None: not known)."""
    try:
        value = operator.attrgetter(table.removeprefix("self."))(full) if full is not None else None
    except AttributeError:
        return None
    return int(value.shape[1]) if isinstance(value, torch.Tensor) and value.dim() == 2 else None


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> Embedding | None:
    """The plan if the graph is one embedding lookup of an input's indices, else None."""
    calls, placeholders = graph_calls(gm)
    found = _lookup(gm, calls[0]) if calls else None
    if found is None:
        return None
    index, table, options = found
    wraps = bool(options.pop("wraps", False))
    if options.get("max_norm") is not None:
        raise CannotCover("an embedding with max_norm (it rescales the table's rows in place)")
    if index not in placeholders:
        raise CannotCover("an embedding of computed indices (covered: indices passed to forward)")
    x = inputs[placeholders.index(index)]
    if not isinstance(x, torch.Tensor) or x.dtype not in INDEX_DTYPES:
        raise CannotCover(f"an embedding of {getattr(x, 'dtype', type(x))} indices (covered: int64, int32)")
    if len(calls) > 1:
        raise CannotCover("ops after an embedding lookup (each runs as a kernel of its own)")
    if not returns_only(gm, calls[0]):
        return None  # the graph returns something else too (or instead): not this template's output
    result = calls[0].meta["tensor_meta"]
    return Embedding(table=table, input=index.name, inputs=[p.name for p in placeholders],
                     out_dtype=str(result.dtype).removeprefix("torch."), wraps=wraps)


KERNEL = '''@triton.jit
def embedding_kernel(idx_ptr, table_ptr, out_ptr, N, D, V, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     WRAPS: tl.constexpr):
    # Program (p, q): columns [q * BLOCK_D, (q + 1) * BLOCK_D) of lookups [p * BLOCK_N, (p + 1) * BLOCK_N).
    # Reads BLOCK_N indices and BLOCK_N runs of the table, writes BLOCK_N runs of the output. An index
    # outside the table reads nothing (its row is written as zeros) instead of memory past the table.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    row_ok = rows < N
    col_ok = cols < D
    idx = tl.load(idx_ptr + rows, mask=row_ok, other=0).to(tl.int64)
    if WRAPS:  # x[idx]: a negative index counts from the end, as Python's do
        idx = tl.where(idx < 0, idx + V, idx)
    inside = row_ok & (idx >= 0) & (idx < V)
    values = tl.load(table_ptr + idx[:, None] * D + cols[None, :], mask=inside[:, None] & col_ok[None, :],
                     other=0.0)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], values, mask=row_ok[:, None] & col_ok[None, :])
'''


def forward(plan: Embedding, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the table from the module, the output's shape, one launch."""
    x = plan.input
    body = [f"table = {plan.table}.contiguous()",
            f"{x} = {x}.contiguous()",
            "n, d = " + f"{x}.numel(), table.shape[1]",
            f"out = torch.empty((*{x}.shape, d), dtype=table.dtype, device=table.device)",
            "if out.numel():",
            f"    embedding_kernel[(ceil_div(n, {params['BLOCK_N']}), ceil_div(d, {params['BLOCK_D']}))](",
            f"        {x}, table, out, n, d, table.shape[0], BLOCK_N={params['BLOCK_N']}, "
            f"BLOCK_D={params['BLOCK_D']}, WRAPS={plan.wraps}, num_warps={params['num_warps']})",
            "return out"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds(cols: int) -> list[tuple[dict[str, Any], str]]:
    """Rows of up to 256 columns a program (a 1 KB run of fp32 each), more lookups where rows are short."""
    block_d = min(256, 1 << max(cols - 1, 1).bit_length())
    out = []
    for block_n, warps in ((max(4096 // block_d, 1), 4), (max(8192 // block_d, 1), 8), (max(2048 // block_d, 1), 4)):
        out.append(({"BLOCK_N": min(block_n, 256), "BLOCK_D": block_d, "num_warps": warps},
                    f"seed: {min(block_n, 256)} lookups x {block_d} columns per program"))
    return out


def describe(plan: Embedding) -> str:
    return f"embedding lookup in {plan.table.removeprefix('self.')}"
