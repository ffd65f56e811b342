"""Reductions over dimensions that are not neighbours, written as reductions over runs of neighbouring
dimensions, one after the other, so that the templates (which reduce one run of adjacent dimensions:
``dimreduce``, the row programs' spans) cover any set of dims.

``amax(x, (0, 2))`` on ``[A, B, C]`` becomes ``amax(amax(x, 2), 0)``: the first reduction reads the
input once and writes ``A * B`` values, ``1 / C`` of it, so the second costs little. Runs are reduced
from the last to the first, which leaves the indices of the earlier runs as they were whether or not
the dimensions are kept. Each rewrite computes what the call computes, only in another order of
additions:
- ``sum``, ``amax``, ``amin``: nested, as written.
- ``mean``: a mean of means over equally many values each is the mean.
- ``logsumexp``: ``log sum_a exp(log sum_c exp(x))`` is the log-sum-exp over both.
- vector norms of order 1, 2 and infinity (``torch.norm``, ``Tensor.norm``, ``linalg.vector_norm``):
  the norm of the norms; for 2, ``sqrt(sum (sqrt(sum x^2))^2)`` is ``sqrt(sum x^2)``.
Vector norms of any other order, over any dims, are written as what they are made of (``_any_order``),
which the rewrites above and the pointwise ones then take.
Variance and deviation are not nested (a variance of variances is not one) and stay as written, as does
any call with a ``dtype`` or an ``out``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.input_views import view_text
from kernelevo.agent.builtin.rewrite_in_place import option
from kernelevo.agent.builtin.rewrite_ops import rank, replace_each
from kernelevo.agent.builtin.vocabulary import plain_int

NESTED = {torch.sum: "sum", torch.mean: "mean", torch.amax: "amax", torch.amin: "amin",
          torch.logsumexp: "logsumexp"}
"""Reductions over a set of dims that nest: the op of each run is the op itself."""
NESTED_METHODS = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin,
                  "logsumexp": torch.logsumexp}
NORM_ORDERS = (1.0, 2.0, math.inf)
HALF_DTYPES = (torch.float16, torch.bfloat16)
"""Inputs whose reductions torch accumulates in float32, rounding once at the end."""


def runs(dims: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct dims as (first, count) runs of neighbours: [0, 2, 3] -> [(0, 1), (2, 2)]."""
    out: list[tuple[int, int]] = []
    for d in dims:
        if out and out[-1][0] + out[-1][1] == d:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((d, 1))
    return out


def _split_dims(dim: Any, rank: int | None) -> list[tuple[int, int]] | None:
    """The runs of a dim list that has more than one, else None (nothing to rewrite)."""
    if rank is None or not isinstance(dim, (tuple, list)) or len(dim) < 2:
        return None
    if not all(isinstance(d, int) and not isinstance(d, bool) and -rank <= d < rank for d in dim):
        return None
    found = sorted({d % rank for d in dim})
    if len(found) != len(dim):
        return None
    parts = runs(found)
    return parts if len(parts) > 1 else None


def _nest(x: torch.fx.Node, parts: list[tuple[int, int]], keepdim: bool, reduce: Any) -> torch.fx.Node:
    """``reduce(value, dims, keepdim)`` over each run, the last run first."""
    value = x
    for first, count in reversed(parts):
        dims = first if count == 1 else tuple(range(first, first + count))
        value = reduce(value, dims, keepdim)
    return value


def _widened(graph: torch.fx.Graph, x: Any, nest: Any) -> torch.fx.Node:
    """``nest(x)`` computed in fp32 where ``x`` is bf16 or fp16, rounded back once: torch accumulates a
    half-precision reduction in fp32 and rounds its result once, where rounding the first reduction's
    values would lose what the second adds up (rows that cancel, or a row's sum past fp16's range)."""
    meta = x.meta.get("tensor_meta") if isinstance(x, torch.fx.Node) else None
    if meta is None or meta.dtype not in HALF_DTYPES:
        return nest(x)
    return graph.call_method("to", (nest(graph.call_method("to", (x, torch.float32))), meta.dtype))


def _nested(graph: torch.fx.Graph, node: torch.fx.Node, target: Any) -> torch.fx.Node | None:
    x, dim = option(node, "input", 0, None), option(node, "dim", 1, None)
    keepdim = option(node, "keepdim", 2, False)
    if node.kwargs.get("dtype") is not None or node.kwargs.get("out") is not None or not isinstance(keepdim, bool):
        return None
    parts = _split_dims(dim, rank(x))
    if parts is None:
        return None

    def nest(value: Any) -> torch.fx.Node:
        return _nest(value, parts, keepdim,
                     lambda v, dims, keep: graph.call_function(target, (v, dims), {"keepdim": keep}))

    return nest(x) if target in (torch.amax, torch.amin) else _widened(graph, x, nest)  # (extremes are exact)


def _norm_call(node: torch.fx.Node) -> tuple[Any, Any, Any, Any] | None:
    """``(input, order, dim, keepdim)`` of a vector-norm call, else None."""
    if node.op == "call_function" and node.target is torch.linalg.vector_norm:
        return (option(node, "x", 0, option(node, "input", 0, None)), option(node, "ord", 1, 2),
                option(node, "dim", 2, None), option(node, "keepdim", 3, False))
    if (node.op == "call_function" and node.target is torch.norm) or (
            node.op == "call_method" and node.target == "norm"):
        order = option(node, "p", 1, "fro")
        return (option(node, "input", 0, None), 2 if order == "fro" else order,
                option(node, "dim", 2, None), option(node, "keepdim", 3, False))
    return None


def _norm(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    found = _norm_call(node)
    if found is None or node.kwargs.get("dtype") is not None or node.kwargs.get("out") is not None:
        return None
    x, order, dim, keepdim = found
    if not isinstance(order, (int, float)) or isinstance(order, bool) or not isinstance(keepdim, bool):
        return None
    if float(order) not in NORM_ORDERS:
        return _any_order(graph, x, float(order), dim, keepdim)
    parts = _split_dims(dim, rank(x))
    if parts is None:
        return None
    return _widened(graph, x, lambda wide: _nest(wide, parts, keepdim, lambda value, dims, keep: graph.call_function(
        torch.linalg.vector_norm, (value, float(order)), {"dim": dims, "keepdim": keep})))




def _any_order(graph: torch.fx.Graph, x: Any, order: float, dim: Any, keepdim: bool) -> torch.fx.Node | None:
    """A vector norm of an order the templates have no kernel for, as what it is made of: ``sum |x|^p``
    to the power ``1 / p``; the count of nonzero values for 0; the least magnitude for -inf. As torch
    does, a half-precision input's powers and sum are taken in float32 (in fp16, ``|x|^3`` of a few
    thousand values overflows) and the result rounded once."""
    meta = x.meta.get("tensor_meta") if isinstance(x, torch.fx.Node) else None
    if meta is None or not getattr(meta, "dtype", torch.int64).is_floating_point or math.isnan(order):
        return None
    magnitude = graph.call_function(torch.abs, (x,))
    if order == -math.inf:  # a least magnitude is exact in any dtype
        return graph.call_function(torch.amin, (magnitude,), {"dim": dim, "keepdim": keepdim})
    half = meta.dtype in HALF_DTYPES
    wide = graph.call_method("to", (magnitude, torch.float32)) if half else magnitude
    if order == 0:
        nonzero = graph.call_function(torch.ne, (wide, 0.0))
        counted = graph.call_method("to", (nonzero, torch.float32 if half else meta.dtype))
        result = graph.call_function(torch.sum, (counted,), {"dim": dim, "keepdim": keepdim})
    else:
        powered = graph.call_function(torch.pow, (wide, order))
        total = graph.call_function(torch.sum, (powered,), {"dim": dim, "keepdim": keepdim})
        result = graph.call_function(torch.pow, (total, 1.0 / order))
    return graph.call_method("to", (result, meta.dtype)) if half else result


def _shape(x: Any) -> tuple[int, ...] | None:
    shape = getattr(x.meta.get("tensor_meta"), "shape", None) if isinstance(x, torch.fx.Node) else None
    return None if shape is None else tuple(shape)


def _broadcasts(shape: tuple[int, ...], to: tuple[int, ...]) -> bool:
    """Does a tensor of ``shape`` broadcast to ``to`` (and not, say, hold more values, or a slice)?"""
    try:
        return torch.broadcast_shapes(shape, to) == to
    except RuntimeError:
        return False


def reads_broadcast(x: torch.fx.Node) -> bool:
    """Is ``x`` computed, through values of its own shape, from a tensor of another shape holding more
    than one value (a target per sample, a weight per class, a mask per pixel), or from a view of one
    (``x[:, 1:] - x[:, :-1]``)?"""
    shape, seen, stack = _shape(x), set(), [x]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for arg in node.all_input_nodes:
            there = _shape(arg)
            if there == shape and arg.op in ("call_function", "call_method", "call_module"):
                stack.append(arg)
            elif there is not None and there != shape and math.prod(there) > 1 and (
                    _broadcasts(there, shape) or view_text(node, arg.name) is not None):
                return True
    return False


def _whole(graph: torch.fx.Graph, node: torch.fx.Node, target: Any) -> torch.fx.Node | None:
    """A sum or mean of a whole computed tensor that reads a broadcast one or a view, as the reduction of
    its last dimension and then of the rest. Over the whole tensor, only the reduced values themselves can
    be laid out in one run (``Program.span``): a tensor broadcast against them, or a view, cannot. Over
    the last dimension they are read as a row program reads them (per row, per column, per channel, through
    strides), and the second reduction reads one value per row."""
    x, dim = option(node, "input", 0, None), option(node, "dim", 1, None)
    keepdim = option(node, "keepdim", 2, False)
    shape = _shape(x)
    if target not in (torch.sum, torch.mean) or node.kwargs.get("dtype") is not None or \
            node.kwargs.get("out") is not None or not isinstance(keepdim, bool) or shape is None or len(shape) < 2:
        return None
    every = isinstance(dim, (tuple, list)) and all(plain_int(d) for d in dim) and sorted(
        d % len(shape) for d in dim) == list(range(len(shape)))
    if (dim is not None and not every) or x.op not in ("call_function", "call_method", "call_module") or \
            not reads_broadcast(x):
        return None
    parts = [(0, len(shape) - 1), (len(shape) - 1, 1)]
    return _widened(graph, x, lambda value: _nest(value, parts, keepdim, lambda v, dims, keep: graph.call_function(
        target, (v, dims), {"keepdim": keep})))


def rewrite_reductions(gm: torch.fx.GraphModule) -> bool:
    """Every reduction of ``gm`` over dims that are not one run, nested as above, and every whole sum or
    mean that reads a broadcast tensor (``_whole``); True when something changed (the caller recompiles
    and propagates shapes again)."""
    def rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
        target = NESTED_METHODS.get(str(node.target)) if node.op == "call_method" else (
            node.target if node.op == "call_function" and node.target in NESTED else None)
        if target is None:
            return _norm(graph, node)
        return _nested(graph, node, target) or _whole(graph, node, target)

    return replace_each(gm, rewrite)
