"""Views taken in ``forward`` before scaled-dot-product attention, read by the kernel through their strides.

Real attention code rarely passes q, k and v in as they are: it splits a packed projection into heads
(``qkv.unflatten(-1, (3, heads, d)).permute(2, 0, 3, 1, 4)``, then ``[0]``, ``[1]``, ``[2]``) or views each
projection as heads (``q.view(b, n, heads, d).transpose(1, 2)``). Those views compute nothing: the
generated ``forward`` replays them with the reference's own calls (at any size: sizes are read from the
tensors), and the attention kernel reads q, k and v through their strides, which it takes for every
dim but the head's own. Only a view whose head dim is not contiguous, or k and v laid out differently,
is copied first. The output is allocated with q's strides, which the kernel writes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.attention_positions import attention_with_positions
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.view_copy import (
    COPY_METHODS,
    RESHAPE_METHODS,
    Writer,
    is_size_read,
    is_tensor,
    split_name,
    view_name,
)
from kernelevo.agent.builtin.vocabulary import Capture, graph_calls, returns_only

ATTENTION_CALLS = {F.scaled_dot_product_attention, attention_with_positions}
"""The calls the flash kernel computes: torch's, and the same with a mask made from positions."""


@dataclass
class AttentionViews:
    statements: list[str]
    """``forward``'s lines that take the views, before the kernel's launch."""
    qkv: tuple[str, str, str]
    """The names q, k and v have there."""
    shapes: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    """Their shapes at the size being optimised."""
    replayed: list[str]
    """The names of the graph's calls the statements replay (whose numbers they hold)."""
    resized: list[str]
    """Those written with a number of the size being optimised (the code then holds at that size)."""


def _full_shapes(gm: torch.fx.GraphModule, call: torch.fx.Node, inputs: list[Any], shapes: list[tuple[int, ...]],
                 known: dict[str, tuple[int, ...]], there: dict[str, torch.fx.Node]
                 ) -> tuple[tuple[int, ...], ...]:
    """q, k and v's shapes with the tensor inputs at their ``shapes``: their counterparts' in the full
    trace (``there``), or ``known``'s, or else the views run on the meta device."""
    full = [there[a.name].meta.get("tensor_meta") if a.name in there else None for a in call.args[:3]]
    if all(hasattr(m, "shape") for m in full):
        return tuple(tuple(m.shape) for m in full)
    if all(a.name in known for a in call.args[:3]):
        return tuple(tuple(known[a.name]) for a in call.args[:3])
    full = iter(shapes)
    meta = [torch.empty(next(full), dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x
            for x in inputs]
    try:
        seen = Capture(gm, stop=call).run_up_to(*meta)
    except Exception as exc:  # a view that holds at the small size only: the sizes are what they are
        raise CannotCover(f"the views before attention do not hold at the size being optimised ({exc})") from None
    return tuple(tuple(seen[a.name].shape) for a in call.args[:3])


def find(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]],
         known: dict[str, tuple[int, ...]], there: dict[str, torch.fx.Node] | None = None) -> AttentionViews | None:
    """The views before the graph's one attention call, if every other op of the graph is a view (or a
    read of a size) taken of the inputs for q, k and v; None where there are none or other ops
    (``known``: shapes at the size being optimised of nodes by name, where a larger graph gives them;
    ``there``: each node's counterpart there, whose numbers the statements take)."""
    calls, placeholders = graph_calls(gm)
    if len(calls) < 2 or calls[-1].op != "call_function" or calls[-1].target not in ATTENTION_CALLS \
            or not returns_only(gm, calls[-1]) or len(calls[-1].args) < 3:
        return None
    call, before = calls[-1], calls[:-1]
    for node in before:
        view = view_name(node) if is_tensor(node) else split_name(node)
        if view is None and not is_size_read(node):
            return None
        if view in COPY_METHODS | RESHAPE_METHODS - {"reshape", "flatten"}:
            return None  # a copy the reference asks for: the view-copy template's work
        if any(user is call and node not in call.args[:3] for user in node.users):
            return None  # a mask computed in forward
    if not all(isinstance(a, torch.fx.Node) and (a in before or a in placeholders) for a in call.args[:3]):
        return None
    w = Writer(placeholders, there)
    statements = [f"{w.name(node)} = {w.replayed(node)}" for node in before]
    q, k, v = (w.text(a) for a in call.args[:3])
    shapes_there = _full_shapes(gm, call, inputs, shapes, known, there or {})
    return AttentionViews(statements=statements, qkv=(q, k, v), shapes=shapes_there,
                          replayed=[n.name for n in before], resized=w.resized)


def prologue(found: AttentionViews) -> str:
    """The views taken, then copies only where the kernel cannot read through them: a head dim that is
    not contiguous, a query view that names an element twice (the output is written through its
    strides; see :data:`HELPER`), or k and v of different strides (the kernel walks both with k's)."""
    q, k, v = found.qkv
    lines = [*found.statements,
             f"if {q}.stride(-1) != 1 or _overlapping({q}):",
             f"    {q} = {q}.contiguous()",
             f"if {k}.stride(-1) != 1 or {k}.stride() != {v}.stride():",
             f"    {k}, {v} = {k}.contiguous(), {v}.contiguous()"]
    return "\n    ".join(lines)


HELPER = '''def _overlapping(t):
    # Does t name some element twice (a stride of 0, windows that share elements)? The output is
    # written through q's strides, so two programs would then write one address.
    reach = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz > 1):
        if stride < reach:
            return True
        reach = stride * size
    return False
'''
"""Rendered beside the attention kernel where q is a view taken in ``forward``."""
