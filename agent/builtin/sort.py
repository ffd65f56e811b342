"""Sorting along a dimension (``torch.sort``'s values), its k largest or smallest values
(``torch.topk``'s values, in order) and one order statistic of each row (``torch.median``'s lower
median, ``torch.kthvalue``'s k-th smallest value).

A row is loaded into registers once, padded to a power of two with values that sort last (+inf
ascending, -inf descending), sorted by Triton's bitonic network (``tl.sort``: log2(n)^2 / 2
compare-exchange stages, all in registers and shuffles), and the kept positions stored (the first k,
or the one an order statistic picks): the input is read once and only the kept values are written.
Rows up to ``MAX_COLUMNS`` fit. Along the last dimension a program sorts one row; along another, a
row's values lie ``inner`` apart, so a program takes BLOCK_I neighbouring rows as the columns of a
tile: each load and store of the tile is then a run of BLOCK_I contiguous values, and the tile is
sorted along its last axis.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.program import CannotCover

MAX_COLUMNS = 16384
"""The longest row a program holds (fp32 registers of one program, as for the row templates)."""
FLOATS = (torch.float32, torch.bfloat16, torch.float16)


@dataclass
class Sort:
    """The values of one sort or top-k over the last dimension of the task's input."""

    descending: bool
    keep: int | None
    """How many values each row keeps: a top-k's k; None for a sort (all of them, at any size)."""
    out_dtype: str
    dim: int = -1
    """The sorted dimension, non-negative, or -1 for the last."""
    pick: int | None = None
    """The one sorted position each row keeps (``kthvalue``'s k - 1); None keeps the first ``keep``."""
    median: bool = False
    """Each row keeps sorted position (n - 1) // 2 of its n values (``median``'s lower median)."""
    squeeze: bool = False
    """The sorted dimension is dropped from the output (an order statistic without ``keepdim``)."""

    @property
    def op(self) -> str:
        """The torch call this plan computes, as the plan's ops name it."""
        if self.median or self.pick is not None:
            return "median" if self.median else "kthvalue"
        return "sort" if self.keep is None else "topk"


def _sort_call(node: torch.fx.Node) -> str | None:
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    covered = ("sort", "topk", "median", "kthvalue")
    return name if node.op in ("call_method", "call_function") and name in covered else None


def _dim(node: torch.fx.Node, rank: int) -> int:
    """The sorted dim of a ``sort`` or ``median`` (input, dim, ...) or ``topk`` or ``kthvalue``
    (input, k, dim, ...) call, non-negative; -1 for the last."""
    call = _sort_call(node)
    position = 1 if call in ("sort", "median") else 2
    if call == "median" and len(node.args) <= position and "dim" not in node.kwargs:
        raise CannotCover("`median` of all values at once (covered: along one dim)")
    dim = node.kwargs.get("dim", node.args[position] if len(node.args) > position else -1)
    if not isinstance(dim, int):
        raise CannotCover(f"`{_sort_call(node)}` along a dim not known when traced")
    dim = dim % max(rank, 1)
    return -1 if dim == rank - 1 else dim


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> Sort | None:
    """The plan if the graph is the values of one ``sort``, ``topk``, ``median`` or ``kthvalue`` of its
    one input over one dimension; None when the graph has no such call (other templates may take it)."""
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    sorts = [n for n in calls if _sort_call(n)]
    if len(sorts) != 1:
        return None
    node, what = sorts[0], f"`{_sort_call(sorts[0])}`"
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    values = [n for n in calls if n is not node]
    picks = len(values) == 1 and (values[0].target is operator.getitem and values[0].args[1] == 0
                                  or values[0].target is getattr and values[0].args[1] == "values")
    if not picks or output is not values[0] or len(inputs) != 1 or node.args[0].op != "placeholder":
        raise CannotCover(f"{what} other than the values of one over the input (its indices, or ops around "
                          "it, are not covered)")
    x = inputs[0]
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOATS or x.dim() == 0:
        raise CannotCover(f"{what} of a {getattr(x, 'dtype', type(x))} input (covered: fp32, bf16, fp16)")
    dim = _dim(node, x.dim())
    probe = (torch.randn(x.shape) * 10).round().to(x.dtype)  # ties too: stable or not, the values agree
    want = gm(probe)
    if _sort_call(node) in ("median", "kthvalue"):
        return _order_statistic(node, probe, want, dim)
    for descending in (False, True):
        full = torch.sort(probe, dim=dim, descending=descending).values.movedim(dim, -1)
        moved = want.movedim(dim, -1) if want.dim() == probe.dim() else want
        keep = moved.shape[-1] if moved.dim() else 0
        if moved.shape[:-1] == full.shape[:-1] and torch.equal(full[..., :keep], moved):
            return Sort(descending=descending, keep=None if _sort_call(node) == "sort" else keep,
                        out_dtype=str(want.dtype).removeprefix("torch."), dim=dim)
    raise CannotCover(f"{what} in a form the template does not compute (covered: the values of a sort or top-k "
                      "over one dimension, in order)")


def _order_statistic(node: torch.fx.Node, probe: torch.Tensor, want: torch.Tensor, dim: int) -> Sort:
    """The plan of a ``median`` or ``kthvalue`` whose values ``want`` are those of ``probe``, checked
    against the sorted probe, with its dim kept or dropped."""
    call = _sort_call(node)
    n = probe.shape[dim]
    if call == "median":
        position = (n - 1) // 2
    else:
        k = node.kwargs.get("k", node.args[1] if len(node.args) > 1 else None)
        if not isinstance(k, int) or not 1 <= k <= n:
            raise CannotCover(f"`kthvalue` with k={k!r} over a dim of {n}")
        position = k - 1
    picked = torch.sort(probe, dim=dim).values.narrow(dim, position, 1)
    dtype = str(want.dtype).removeprefix("torch.")
    for squeeze, expected in ((True, picked.squeeze(dim)), (False, picked)):
        if want.shape == expected.shape and torch.equal(want, expected):
            return Sort(descending=False, keep=1, out_dtype=dtype, dim=dim, squeeze=squeeze,
                        pick=None if call == "median" else position, median=call == "median")
    raise CannotCover(f"`{call}` in a form the template does not compute (covered: its values along one dim)")


KERNEL = '''@triton.jit
def sort_kernel(x_ptr, out_ptr, n_cols, start, keep, BLOCK_C: tl.constexpr, DESCENDING: tl.constexpr,
                MEDIAN: tl.constexpr):
    # Program r: row r, loaded once, padded with values that sort last, sorted in registers by a
    # bitonic network; its sorted positions start .. start + keep stored.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_C)
    pad = float("-inf") if DESCENDING else float("inf")
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=pad).to(tl.float32)
    # torch orders NaN above every value: sorted as +inf, then the row's NaN count written back as NaN
    # at the top end (a median of a row with a NaN is NaN)
    nan = x != x
    n_nan = tl.sum(nan.to(tl.int32), 0)
    y = tl.sort(tl.where(nan, float("inf"), x), 0, descending=DESCENDING)
    if DESCENDING:
        y = tl.where(cols < n_nan, float("nan"), y)
    else:
        y = tl.where((cols >= n_cols - n_nan) & (cols < n_cols), float("nan"), y)
    if MEDIAN:
        y = tl.where(n_nan > 0, float("nan"), y)
    kept = (cols >= start) & (cols < start + keep)
    tl.store(out_ptr + row * keep + cols - start, y.to(out_ptr.dtype.element_ty), mask=kept)
'''

STRIDED_KERNEL = '''@triton.jit
def sort_strided_kernel(x_ptr, out_ptr, n_cols, start, keep, inner, BLOCK_C: tl.constexpr,
                        BLOCK_I: tl.constexpr, DESCENDING: tl.constexpr, MEDIAN: tl.constexpr):
    # Program (o, b): rows b * BLOCK_I .. + BLOCK_I of slab o, whose values lie `inner` apart, held as the
    # rows of a BLOCK_I x BLOCK_C tile: every load and store is a run of BLOCK_I neighbours in memory.
    # Each row padded with values that sort last, sorted in registers; positions start .. start + keep
    # stored.
    blocks = tl.cdiv(inner, BLOCK_I)
    slab = (tl.program_id(0) // blocks).to(tl.int64)
    lanes = (tl.program_id(0) % blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    cols = tl.arange(0, BLOCK_C)
    pad = float("-inf") if DESCENDING else float("inf")
    at = cols[None, :].to(tl.int64) * inner + lanes[:, None]
    x = tl.load(x_ptr + slab * n_cols * inner + at, mask=(cols[None, :] < n_cols) & (lanes[:, None] < inner),
                other=pad).to(tl.float32)
    nan = x != x  # NaN above every value, as in sort_kernel
    n_nan = tl.sum(nan.to(tl.int32), 1)[:, None]
    y = tl.sort(tl.where(nan, float("inf"), x), 1, descending=DESCENDING)
    if DESCENDING:
        y = tl.where(cols[None, :] < n_nan, float("nan"), y)
    else:
        y = tl.where((cols[None, :] >= n_cols - n_nan) & (cols[None, :] < n_cols), float("nan"), y)
    if MEDIAN:
        y = tl.where(n_nan > 0, float("nan"), y)
    kept = (cols[None, :] >= start) & (cols[None, :] < start + keep) & (lanes[:, None] < inner)
    tl.store(out_ptr + slab * keep * inner + at - start * inner, y.to(out_ptr.dtype.element_ty), mask=kept)
'''


def forward(plan: Sort, names: list[str], params: dict[str, Any]) -> str:
    """``ModelNew.forward``: rows of the sorted dimension, the output of ``keep`` values a row, one launch."""
    x = names[0]
    if plan.dim != -1:
        return _strided_forward(plan, names, params)
    body = [f"{x} = {x}.contiguous()",
            f"n_cols = {x}.shape[-1]",
            *_kept_positions(plan),
            f"out = torch.empty((*{x}.shape[:-1], keep), dtype=torch.{plan.out_dtype}, device={x}.device)",
            "block_c = next_power_of_2(max(n_cols, 2))",
            f"if block_c > {MAX_COLUMNS}:",
            f"    raise ValueError(f'rows of {{n_cols}} do not fit in registers (at most {MAX_COLUMNS})')",
            "if out.numel():",
            f"    sort_kernel[(out.numel() // keep,)]({x}, out, n_cols, start, keep, BLOCK_C=block_c, "
            f"DESCENDING={plan.descending}, MEDIAN={plan.median}, num_warps={params['num_warps']})",
            "return out.squeeze(-1)" if plan.squeeze else "return out"]
    return f"def forward(self, {', '.join(names)}):\n" + "\n".join("    " + line for line in body) + "\n"


def _kept_positions(plan: Sort) -> list[str]:
    """Lines setting ``start`` and ``keep``, the sorted positions each row stores, from ``n_cols``."""
    if plan.median:
        kept = "start, keep = (n_cols - 1) // 2, 1"
    elif plan.pick is not None:
        kept = f"start, keep = {plan.pick}, 1"
    else:
        kept = "start, keep = 0, " + ("n_cols" if plan.keep is None else str(plan.keep))
    return [kept, "if start < 0 or start + keep > n_cols:",
            "    raise ValueError(f'keeping sorted positions {start} .. {start + keep - 1} of rows of {n_cols}')"]


def _strided_forward(plan: Sort, names: list[str], params: dict[str, Any]) -> str:
    x, d = names[0], plan.dim
    body = [f"{x} = {x}.contiguous()",
            f"n_cols, inner = {x}.shape[{d}], {x}.shape[{d + 1}:].numel()",
            *_kept_positions(plan),
            f"out = torch.empty((*{x}.shape[:{d}], keep, *{x}.shape[{d + 1}:]), dtype=torch.{plan.out_dtype}, "
            f"device={x}.device)",
            "block_c = next_power_of_2(max(n_cols, 2))",
            f"if block_c > {MAX_COLUMNS}:",
            f"    raise ValueError(f'rows of {{n_cols}} do not fit in registers (at most {MAX_COLUMNS})')",
            f"block_i = min(next_power_of_2(inner), max({MAX_COLUMNS} // block_c, 1), {params['BLOCK_I']})",
            "if out.numel():",
            "    sort_strided_kernel[(out.numel() // (keep * inner) * ceil_div(inner, block_i),)](",
            f"        {x}, out, n_cols, start, keep, inner, BLOCK_C=block_c, BLOCK_I=block_i, "
            f"DESCENDING={plan.descending}, MEDIAN={plan.median}, num_warps={params['num_warps']})",
            f"return out.squeeze({d})" if plan.squeeze else "return out"]
    return f"def forward(self, {', '.join(names)}):\n" + "\n".join("    " + line for line in body) + "\n"


def strided_seeds(cols: int, inner: int) -> list[tuple[dict[str, Any], str]]:
    """Neighbouring rows per program: at least a 32-byte run per load, fewer where rows are long."""
    out = []
    for block_i, warps in ((16, 4), (4, 4), (64, 8)):
        block_i = max(1, min(block_i, MAX_COLUMNS // max(cols, 2), 1 << max(inner - 1, 0).bit_length()))
        out.append(({"BLOCK_I": block_i, "num_warps": warps},
                    f"seed: {block_i} neighbouring rows per program, {warps} warps"))
    return list({str(p): (p, why) for p, why in out}.values())


def seeds(cols: int) -> list[tuple[dict[str, Any], str]]:
    """Warps by row length: a few values per thread, so the network's shuffles stay in registers."""
    warps = next((w for w in (1, 2, 4, 8) if w * 32 * 4 >= min(cols, MAX_COLUMNS)), 16)
    return [({"num_warps": w}, f"seed: one row per program, {w} warps")
            for w in dict.fromkeys((warps, min(warps * 2, 16), max(warps // 2, 1)))]
