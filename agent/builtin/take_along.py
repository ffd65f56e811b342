"""Gathers along a dim (``torch.gather``, ``Tensor.gather``, ``torch.take_along_dim`` with a dim): each
output element is the input's element at the same coordinates, except along ``dim``, where the index
tensor says which one.

One program writes BLOCK consecutive output elements. The indices are read once and the output
written once, both in memory order; each input value is one element at a place the indices choose, so
the reads are as scattered as the indices: along the last dim they stay within a row (a few cache
lines), along an outer dim each lands in its own line. The output's coordinates are unpicked from its
flat offset with the index tensor's sizes (up to four dims) and the input is read through its own
strides, so a non-contiguous input or buffer needs no copy. Ops after the gather run as kernels of their own
(:mod:`sequence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import graph_calls, returns_only

INDEX_DTYPES = (torch.int64,)
RANKS = 4
"""The kernel unpicks up to four coordinates; inputs of fewer dims are padded with leading ones."""


@dataclass
class TakeAlong:
    source: str
    """The gathered tensor's expression in ``ModelNew.forward`` (an input's name or ``self.<buffer>``)."""
    index: str
    dim: int
    """Non-negative, counted in the source's own dims."""
    rank: int
    inputs: list[str]
    out_dtype: str


def _arguments(node: torch.fx.Node) -> tuple[Any, Any, Any] | None:
    """(source, dim, index) of a gather or take-along-dim call, else None."""
    args, kwargs = node.args, node.kwargs
    if node.op == "call_function" and node.target is torch.gather or \
            node.op == "call_method" and node.target == "gather":
        names = ("input", "dim", "index")
    elif node.op == "call_function" and node.target is torch.take_along_dim:
        names = ("input", "indices", "dim")
    else:
        return None
    found = dict(zip(names, args, strict=False))
    found.update({k: v for k, v in kwargs.items() if k in names})
    index = found.get("index", found.get("indices"))
    return found.get("input"), found.get("dim"), index


def _meta(value: Any) -> Any:
    return value.meta.get("tensor_meta") if isinstance(value, torch.fx.Node) else None


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> TakeAlong | None:
    """The plan if the graph is one gather along a dim of an input's (or buffer's) values by an input's
    indices, else None; CannotCover with the reason for a gather this kernel does not take."""
    calls, placeholders = graph_calls(gm)
    found = _arguments(calls[0]) if calls else None
    if found is None:
        return None
    source, dim, index = found
    if dim is None:
        raise CannotCover("take_along_dim without a dim (it gathers from the flattened input)")
    source_meta, index_meta = _meta(source), _meta(index)
    if source_meta is None or index_meta is None or not isinstance(dim, int):
        raise CannotCover("a gather whose source, index or dim is not known when traced")
    if index not in placeholders:
        raise CannotCover("a gather by computed indices (covered: indices passed to forward)")
    if source.op not in ("placeholder", "get_attr"):
        raise CannotCover("a gather from a computed tensor (covered: an input, a parameter or a buffer)")
    if index_meta.dtype not in INDEX_DTYPES:
        raise CannotCover(f"a gather by {index_meta.dtype} indices (covered: int64)")
    rank = len(source_meta.shape)
    if not 1 <= rank <= RANKS or len(index_meta.shape) != rank:
        raise CannotCover(f"a gather of {rank} dims by {len(index_meta.shape)} (covered: 1 to {RANKS}, the same)")
    dim = dim % rank
    if calls[0].target is torch.take_along_dim and any(
            i != s for d, (i, s) in enumerate(zip(index_meta.shape, source_meta.shape, strict=True)) if d != dim):
        raise CannotCover("take_along_dim with broadcast indices (covered: the source's shape apart from dim)")
    if len(calls) > 1:
        raise CannotCover("ops after a gather along a dim (each runs as a kernel of its own)")
    if not returns_only(gm, calls[0]):
        return None  # the graph returns something else too (or instead): not this template's output
    expression = source.name if source.op == "placeholder" else f"self.{source.target}"
    return TakeAlong(source=expression, index=index.name, dim=dim, rank=rank,
                     inputs=[p.name for p in placeholders], out_dtype=str(source_meta.dtype).removeprefix("torch."))


KERNEL = '''@triton.jit
def take_along_kernel(src_ptr, idx_ptr, out_ptr, N, S1, S2, S3, T0, T1, T2, T3, DIM_SIZE,
                      DIM: tl.constexpr, BLOCK: tl.constexpr):
    # Program p: output elements [p * BLOCK, (p + 1) * BLOCK) in memory order. S1..S3: the index's
    # sizes (dims padded to four in front); T0..T3: the source's strides, in elements. An index outside
    # [0, DIM_SIZE) reads nothing (its element is written as zero) instead of memory past the source.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    idx = tl.load(idx_ptr + offs, mask=ok, other=0).to(tl.int64)
    inside = ok & (idx >= 0) & (idx < DIM_SIZE)
    c3 = offs % S3
    rest = offs // S3
    c2 = rest % S2
    rest = rest // S2
    c1 = rest % S1
    c0 = rest // S1
    if DIM == 0:
        c0 = idx
    if DIM == 1:
        c1 = idx
    if DIM == 2:
        c2 = idx
    if DIM == 3:
        c3 = idx
    values = tl.load(src_ptr + c0 * T0 + c1 * T1 + c2 * T2 + c3 * T3, mask=inside, other=0)
    tl.store(out_ptr + offs, values, mask=ok)
'''


def forward(plan: TakeAlong, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the output in the index's shape, one launch over it."""
    pad = RANKS - plan.rank
    body = [f"src = {plan.source}",
            f"idx = {plan.index}.contiguous()",
            "out = torch.empty(idx.shape, dtype=src.dtype, device=src.device)",
            f"sizes = (1,) * {pad} + tuple(idx.shape)",
            f"strides = (0,) * {pad} + tuple(src.stride())",
            "n = out.numel()",
            "if n:",
            f"    take_along_kernel[(ceil_div(n, {params['BLOCK']}),)](",
            "        src, idx, out, n, sizes[1], sizes[2], sizes[3], *strides, "
            f"src.shape[{plan.dim}], DIM={plan.dim + pad}, BLOCK={params['BLOCK']}, num_warps={params['num_warps']})",
            "return out"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds() -> list[tuple[dict[str, Any], str]]:
    """A few thousand outputs a program: enough loads in flight to hide the scattered reads."""
    return [({"BLOCK": 1024, "num_warps": 4}, "seed: 1024 outputs per program"),
            ({"BLOCK": 2048, "num_warps": 8}, "seed: 2048 outputs per program, 8 warps"),
            ({"BLOCK": 512, "num_warps": 4}, "seed: 512 outputs per program (more programs for small outputs)")]


def describe(plan: TakeAlong) -> str:
    return f"gather along dim {plan.dim} of {plan.source.removeprefix('self.')} ({plan.rank} dims)"
