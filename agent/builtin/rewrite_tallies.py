"""Reductions the templates have no kernel of their own for, written as ones they have, in the traced
graph: counts and truth values, NaN-skipping sums and means, and the least and greatest at once.

Each rewrite computes what the call computes:
- ``count_nonzero(x, dim)``: ``sum(x != 0, dim)``, an int64 count as torch returns.
- ``all(x, dim)`` / ``any(x, dim)``: the least / greatest of ``(x != 0)`` as 0.0 and 1.0, compared
  with 0 again: a bool, as torch returns.
- ``nansum(x, dim)``: the sum with each NaN taken as 0; ``nanmean``: that sum over the count of the
  values that are not NaN (all NaN: 0 / 0, a NaN, as torch gives).
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

Node = torch.fx.Node


def _name(node: Node) -> str:
    if node.op == "call_method":
        return str(node.target)
    return getattr(node.target, "__name__", "") if node.op == "call_function" else ""


def _is_torch_call(node: Node, name: str) -> bool:
    """``torch.NAME(x, ...)`` or ``x.NAME(...)``."""
    return _name(node) == name and (node.op == "call_method" or getattr(torch, name, None) is node.target)


def _reduced(node: Node) -> tuple[Any, Any, Any] | None:
    """``(input, dim, keepdim)`` of a reduction call without ``dtype`` or ``out``, else None."""
    if node.kwargs.get("dtype") is not None or node.kwargs.get("out") is not None:
        return None
    x, dim, keepdim = option(node, "input", 0, None), option(node, "dim", 1, None), option(node, "keepdim", 2, False)
    if not isinstance(x, Node) or not isinstance(keepdim, bool):
        return None
    return x, dim, keepdim


def _reduce(graph: torch.fx.Graph, target: Any, x: Node, dim: Any, keepdim: bool) -> Node:
    """``target(x, dim, keepdim)``; over every value where ``dim`` is None."""
    if dim is None:
        return graph.call_function(target, (x,))
    return graph.call_function(target, (x, dim), {"keepdim": keepdim})


def _count_or_truth(graph: torch.fx.Graph, node: Node) -> Node | None:
    found = _reduced(node)
    if found is None:
        return None
    x, dim, keepdim = found
    nonzero = graph.call_function(torch.ne, (x, 0))
    if _name(node) == "count_nonzero":
        return _reduce(graph, torch.sum, nonzero, dim, False)  # count_nonzero keeps no dims
    ones = graph.call_method("to", (nonzero, torch.float32))
    extreme = _reduce(graph, torch.amin if _name(node) == "all" else torch.amax, ones, dim, keepdim)
    return graph.call_function(torch.ne, (extreme, 0.0))


def _nan_skipping(graph: torch.fx.Graph, node: Node) -> Node | None:
    found = _reduced(node)
    if found is None:
        return None
    x, dim, keepdim = found
    missing = graph.call_function(torch.isnan, (x,))
    total = _reduce(graph, torch.sum, graph.call_function(torch.where, (missing, 0.0, x)), dim, keepdim)
    if _name(node) == "nansum":
        return total
    present = graph.call_function(torch.logical_not, (missing,))
    return graph.call_function(operator.truediv, (total, _reduce(graph, torch.sum, present, dim, keepdim)))


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
    for user, position in reads.items():
        kwargs = dict(options)
        if "dim" not in kwargs:  # over every value: no dims to keep
            kwargs.pop("keepdim", None)
        with graph.inserting_before(user):
            replacement = graph.call_function(parts[position][1], (x,), kwargs)
        user.replace_all_uses_with(replacement)
        graph.erase_node(user)
    graph.erase_node(node)
    return True


def rewrite_tallies(gm: torch.fx.GraphModule) -> bool:
    """Every call above in ``gm`` rewritten; True when something changed (the caller recompiles and
    propagates shapes again)."""
    changed = False
    for node in list(gm.graph.nodes):
        if any(_is_torch_call(node, name) for name in PAIRS):
            changed |= _pair(gm.graph, node)
            continue
        if any(_is_torch_call(node, name) for name in ("count_nonzero", "all", "any")):
            rewrite = _count_or_truth
        elif any(_is_torch_call(node, name) for name in ("nansum", "nanmean")):
            rewrite = _nan_skipping
        else:
            continue
        with gm.graph.inserting_before(node):
            result = rewrite(gm.graph, node)
        if result is None:
            continue
        node.replace_all_uses_with(result)
        gm.graph.erase_node(node)
        changed = True
    return changed
