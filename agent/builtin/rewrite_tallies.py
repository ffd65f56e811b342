"""Reductions the templates have no kernel of their own for, written as ones they have, in the traced
graph: counts and truth values, NaN-skipping sums and means, and the least and greatest at once.

Each rewrite computes what the call computes:
- ``count_nonzero(x, dim)``: ``sum(x != 0, dim)``, an int64 count as torch returns.
- ``all(x, dim)`` / ``any(x, dim)``: no zero counted / some nonzero counted, a bool as torch returns
  (uint8 for a uint8 input); over no values at all, True / False as torch gives.
- ``nansum(x, dim)``: the sum with each NaN taken as 0 (of integers, the sum); ``nanmean``: that sum
  over the count of the values that are not NaN (all NaN: 0 / 0, a NaN, as torch gives).
Over every value (``dim`` None) with ``keepdim``, every dim is named, so each is kept as torch keeps it.
- ``aminmax(x, dim=...)``: its ``min`` and ``max`` read as ``amin`` and ``amax``.
(``var_mean`` and ``std_mean`` are split in :mod:`rewrite_functions`.)
A call with a ``dtype`` or an ``out``, or whose result is read otherwise than as written above, stays.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.rewrite_in_place import option
from kernelevo.agent.builtin.rewrite_ops import rank, replace_each

Node = torch.fx.Node


def _name(node: Node) -> str:
    """NAME of ``torch.NAME(x, ...)`` or ``x.NAME(...)``; "" for any other node."""
    if node.op == "call_method":
        return str(node.target)
    name = getattr(node.target, "__name__", "") if node.op == "call_function" else ""
    return name if name and getattr(torch, name, None) is node.target else ""


def _reduced(node: Node) -> tuple[Any, Any, Any] | None:
    """``(input, dim, keepdim)`` of a reduction call without ``dtype`` or ``out``, else None."""
    if node.kwargs.get("dtype") is not None or node.kwargs.get("out") is not None:
        return None
    x, dim, keepdim = option(node, "input", 0, None), option(node, "dim", 1, None), option(node, "keepdim", 2, False)
    if not isinstance(x, Node) or not isinstance(keepdim, bool) or (dim is None and keepdim and rank(x) is None):
        return None  # every dim kept: they must be named
    return x, dim, keepdim


def _reduce(graph: torch.fx.Graph, target: Any, x: Node, dim: Any, keepdim: bool, rank: int | None) -> Node:
    """``target(x, dim, keepdim)``; over every value where ``dim`` is None (each of the ``rank`` dims
    named where they are kept)."""
    if dim is None and not keepdim:
        return graph.call_function(target, (x,))
    dims = tuple(range(rank or 0)) if dim is None else dim
    return graph.call_function(target, (x, dims), {"keepdim": keepdim})


def _meta(x: Any) -> Any:
    return x.meta.get("tensor_meta") if isinstance(x, Node) else None


def _count_or_truth(graph: torch.fx.Graph, node: Node) -> Node | None:
    found = _reduced(node)
    if found is None:
        return None
    x, dim, keepdim = found
    if _name(node) == "count_nonzero":  # keeps no dims
        return _reduce(graph, torch.sum, graph.call_function(torch.ne, (x, 0)), dim, False, rank(x))
    every = _name(node) == "all"
    counted = _reduce(graph, torch.sum, graph.call_function(torch.eq if every else torch.ne, (x, 0)), dim, keepdim,
                      rank(x))
    truth = graph.call_function(torch.eq if every else torch.gt, (counted, 0))
    uint8 = getattr(_meta(x), "dtype", None) == torch.uint8  # torch answers a uint8 input in uint8
    return graph.call_method("to", (truth, torch.uint8)) if uint8 else truth


def _nan_skipping(graph: torch.fx.Graph, node: Node) -> Node | None:
    found = _reduced(node)
    if found is None:
        return None
    x, dim, keepdim = found
    meta = _meta(x)
    if meta is None or (not meta.dtype.is_floating_point and _name(node) == "nanmean"):
        return None
    if not meta.dtype.is_floating_point:  # integers hold no NaN: their sum, in their own dtype
        return _reduce(graph, torch.sum, x, dim, keepdim, rank(x))
    missing = graph.call_function(torch.isnan, (x,))
    total = _reduce(graph, torch.sum, graph.call_function(torch.where, (missing, 0.0, x)), dim, keepdim, rank(x))
    if _name(node) == "nansum":
        return total
    present = graph.call_function(torch.logical_not, (missing,))
    return graph.call_function(operator.truediv, (total, _reduce(graph, torch.sum, present, dim, keepdim,
                                                                  rank(x))))


PAIRS = {"aminmax": (("min", torch.amin), ("max", torch.amax))}
"""Calls that return two reductions of one input: each part's name and the call computing it."""


def _pair(graph: torch.fx.Graph, node: Node) -> bool:
    """Each part of an ``aminmax`` read (``[0]``, ``.min``, ...) as its own reduction; False (nothing
    changed) where the pair is read whole or its options are not covered."""
    parts = PAIRS[_name(node)]
    reads = {}
    for user in node.users:
        index = user.args[1] if len(user.args) == 2 else None
        if user.op != "call_function" or user.target not in (operator.getitem, getattr) or user.args[0] is not node:
            return False
        names = [name for name, _ in parts]
        position = index if user.target is operator.getitem else (names.index(index) if index in names else None)
        if position not in (0, 1):
            return False
        reads[user] = position
    x = option(node, "input", 0, None)
    if not isinstance(x, Node) or node.kwargs.get("out") is not None:
        return False
    options = {k: v for k, v in node.kwargs.items() if k != "input"}
    if node.args[1:]:
        return False  # aminmax's options are keyword-only
    if "dim" not in options and options.get("keepdim") and rank(x) is None:
        return False
    for user, position in reads.items():
        kwargs = dict(options)
        if "dim" not in kwargs and kwargs.pop("keepdim", False):  # over every value, each dim kept
            kwargs.update(dim=tuple(range(rank(x) or 0)), keepdim=True)
        with graph.inserting_before(user):
            replacement = graph.call_function(parts[position][1], (x,), kwargs)
        user.replace_all_uses_with(replacement)
        graph.erase_node(user)
    graph.erase_node(node)
    return True


REWRITES = {"count_nonzero": _count_or_truth, "all": _count_or_truth, "any": _count_or_truth,
            "nansum": _nan_skipping, "nanmean": _nan_skipping}


def rewrite_tallies(gm: torch.fx.GraphModule) -> bool:
    """Every call above in ``gm`` rewritten; True when something changed (the caller recompiles and
    propagates shapes again)."""
    changed = False
    for node in list(gm.graph.nodes):
        if _name(node) in PAIRS:
            changed |= _pair(gm.graph, node)
    return replace_each(gm, lambda graph, node: REWRITES[_name(node)](graph, node) if _name(node) in REWRITES
                        else None) or changed
