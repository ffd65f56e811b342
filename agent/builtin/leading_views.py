"""Inputs that ``forward`` first reads through a view: planned as the view, viewed again in ModelNew.

``x.view(b, t, heads, -1).mean(2)`` reads the input's memory as four dims before a reduction over one
of them. A view of a contiguous tensor moves nothing, so the input is planned as if the task had
passed it in the view's shape, and the generated ``forward`` begins with the same view. The view's
shape at the size being optimised comes from the reference traced there (``full_trace``), written
as numbers: the generated code then holds at the task's input shapes alone, and says so when called
at others (``Plan.sized_for``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.vocabulary import reads_metadata

VIEWS = {"view", "reshape", "flatten"}
"""Methods (and ``torch.reshape``, ``torch.flatten``) that read a tensor's memory in another shape."""
VIEW_FUNCTIONS = {torch.reshape, torch.flatten}


@dataclass
class LeadingView:
    """An input read only through views of one shape: its name and the view's shape at the size being optimised."""

    name: str
    shape: tuple[int, ...]

    def line(self) -> str:
        return f"{self.name} = {self.name}.reshape({', '.join(str(s) for s in self.shape)})"


def _shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def _is_view_of(use: torch.fx.Node, placeholder: torch.fx.Node) -> bool:
    """Is ``use`` a view of ``placeholder``'s memory in another shape, the same dtype?"""
    viewing = (use.op == "call_method" and use.target in VIEWS) or (use.op == "call_function" and
                                                                    use.target in VIEW_FUNCTIONS)
    if not (viewing and use.args and use.args[0] is placeholder):
        return False
    dtypes = [getattr(n.meta.get("tensor_meta"), "dtype", None) for n in (placeholder, use)]
    leaves: list[Any] = []
    torch.fx.node.map_aggregate((use.args[1:], use.kwargs), leaves.append)
    # x.view(torch.int32) reads the bits as another dtype: no shape view
    return dtypes[0] is not None and dtypes[0] == dtypes[1] and not any(isinstance(v, torch.dtype) for v in leaves)


def _the_views(placeholder: torch.fx.Node, given: tuple[tuple[int, ...], tuple[int, ...]],
               full: dict[str, tuple[int, ...] | None]) -> list[torch.fx.Node]:
    """``placeholder``'s uses where each is a view of it in one shape (``f = x.reshape(b, c, -1)`` read
    twice is often written as two equal views); none otherwise. Its metadata may be read too where the
    view reads the same (its dtype, its device, a size among the leading dims both shapes share at both
    sizes: ``given``, the input's small and full shapes; ``full``, each node's full shape), and
    otherwise only for the views' own arguments: any other read would read the view's shape once the
    input is planned as the view."""
    reads = [u for u in placeholder.users if reads_metadata(u)]
    uses = [u for u in placeholder.users if u not in reads]
    if not uses or not all(_is_view_of(u, placeholder) for u in uses) or len({_shape(u) for u in uses}) != 1:
        return []
    shared = min(_common_prefix(a, b) if b is not None else 0
                 for a, b in zip(given, (_shape(uses[0]), full.get(uses[0].name)), strict=True))
    return uses if all(_only_feeds(read, uses) or _reads_the_same(read, uses, shared) for read in reads) else []


def _reads_the_same(read: torch.fx.Node, views: list[torch.fx.Node], shared: int) -> bool:
    """Does ``read`` give the same values of the view as of the input: its dtype or device, a size
    ``x.size(i)`` with ``i`` below ``shared``, or ``x.shape`` / ``x.size()`` whose every use is such an
    index or feeds only the views?"""
    if read.op == "call_function" and read.args[1] in ("dtype", "device"):
        return True
    index = read.args[1] if len(read.args) > 1 else read.kwargs.get("dim")
    if read.op == "call_method" and read.target == "size" and index is not None:
        return isinstance(index, int) and 0 <= index < shared
    whole = (read.op == "call_function" and read.args[1] == "shape") or (read.op == "call_method" and
                                                                         read.target == "size")
    return whole and all(
        (user.op == "call_function" and user.target is operator.getitem and isinstance(user.args[1], int)
         and 0 <= user.args[1] < shared) or _only_feeds(user, views) for user in read.users)


def _only_feeds(node: torch.fx.Node, views: list[torch.fx.Node]) -> bool:
    """Do the values computed from ``node`` (a size read) reach nothing but ``views``' arguments?"""
    for user in node.users:
        if user in views:
            continue
        if user.op != "call_function" or any(isinstance(a, torch.fx.Node) and a.meta.get("tensor_meta") is not None
                                             for a in user.args):
            return False  # a size used by a tensor op, a method or another call
        if not _only_feeds(user, views):
            return False
    return True


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def take_views(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]],
               there: torch.fx.GraphModule | None) -> list[LeadingView]:
    """Plan each tensor input that ``forward`` reads only through views of one shape as that view: the views'
    users read the input instead, ``inputs`` (the small tensors) and ``shapes`` (at the size being
    optimised) take the view's shapes, in place. Returns the views ModelNew must make first; none
    where the full trace is missing or the input is not contiguous."""
    if there is None:
        return []
    full = {n.name: _shape(n) for n in there.graph.nodes}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    taken = []
    for index, (node, value) in enumerate(zip(placeholders, inputs, strict=False)):
        usable = isinstance(value, torch.Tensor) and value.is_contiguous() and index < len(shapes)
        views = _the_views(node, (tuple(value.shape), tuple(shapes[index])), full) if usable else []
        small = _shape(views[0]) if views else None
        fulls = {full.get(view.name) for view in views}
        big = fulls.pop() if len(fulls) == 1 else None
        if small is None or big is None:
            continue
        for view in views:
            view.replace_all_uses_with(node)
            gm.graph.erase_node(view)
        inputs[index] = value.reshape(small)
        shapes[index] = big
        taken.append(LeadingView(node.name, big))
    if taken:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return taken
