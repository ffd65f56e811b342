"""Slice bounds written from the sliced tensor's own size, as the numbers they always are:
``x[:, :, :x.size(2) - 1]`` is ``x[:, :, :-1]`` and ``x[:, x.shape[1] - 1:]`` is ``x[:, -1:]``, at any size.

Written with a size, the slice is a computation on sizes read in ``forward``; written with ``-1``, it is
a view of the input that a kernel reads through strides, from its own first element
(:mod:`input_views`), with no copy. Only a bound of the size less one is rewritten: for any size ``n``,
``n - 1`` and ``-1`` name the same position (for ``n = 0`` both give an empty run). A bound of the size
less ``k > 1`` is not the same as ``-k`` where ``n < k``, and stays as written.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.vocabulary import drop_unused_ancestors, plain_int


def _size_read(node: Any) -> tuple[torch.fx.Node, int] | None:
    """``(tensor, dim)`` where ``node`` reads one size of a tensor: ``t.size(d)``, ``t.size()[d]``,
    ``t.shape[d]`` (``d`` a number), else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_method" and node.target == "size" and len(node.args) == 2 and plain_int(node.args[1]):
        return node.args[0], node.args[1]
    if node.op != "call_function" or node.target is not operator.getitem or not plain_int(node.args[1]):
        return None
    whole = node.args[0]
    if not isinstance(whole, torch.fx.Node):
        return None
    if whole.op == "call_method" and whole.target == "size" and len(whole.args) == 1:
        return whole.args[0], node.args[1]
    if whole.op == "call_function" and whole.target is getattr and whole.args[1] == "shape":
        return whole.args[0], node.args[1]
    return None


def _size_less_one(bound: Any, tensor: torch.fx.Node, dim: int, rank: int) -> bool:
    """Is ``bound`` the size of ``tensor``'s dimension ``dim`` less one?"""
    if not isinstance(bound, torch.fx.Node) or bound.op != "call_function" or bound.target is not operator.sub \
            or bound.kwargs or bound.args[1] != 1 or isinstance(bound.args[1], bool):
        return False
    found = _size_read(bound.args[0])
    return found is not None and found[0] is tensor and found[1] % rank == dim


def _rewritten(node: torch.fx.Node) -> tuple[Any, ...] | None:
    """The index of ``node`` (``tensor[index]``) with each size-less-one bound as ``-1``, else None."""
    tensor, index = node.args
    meta = tensor.meta.get("tensor_meta") if isinstance(tensor, torch.fx.Node) else None
    parts = index if isinstance(index, tuple) else (index,)
    if meta is None or not hasattr(meta, "shape") or not all(isinstance(p, slice) or plain_int(p) for p in parts):
        return None  # (positions in the index are the tensor's dimensions only where each takes one: ints, slices)
    rank, changed, out = len(meta.shape), False, []
    for dim, part in enumerate(parts):
        if isinstance(part, slice) and part.step in (None, 1):
            start, stop = (-1 if _size_less_one(b, tensor, dim, rank) else b for b in (part.start, part.stop))
            if (start, stop) != (part.start, part.stop):
                part, changed = slice(start, stop, part.step), True
        out.append(part)
    if not changed:
        return None
    return tuple(out) if isinstance(index, tuple) else out[0]


def rewrite_slices(gm: torch.fx.GraphModule) -> bool:
    """Every slice bound of ``gm`` that is its tensor's size less one, as ``-1``; True when one was (the
    size reads left without users are dropped)."""
    replaced: list[torch.fx.Node] = []
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not operator.getitem or len(node.args) != 2:
            continue
        index = _rewritten(node)
        if index is not None:
            old = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
            replaced += [b for p in old if isinstance(p, slice) for b in (p.start, p.stop)
                         if isinstance(b, torch.fx.Node)]
            node.args = (node.args[0], index)
    for bound in dict.fromkeys(replaced):  # the size arithmetic no one reads any more, back to the reads
        drop_unused_ancestors(gm, bound)
    if replaced:
        gm.recompile()
    return bool(replaced)
