"""The reference traced at the size being optimised (on the meta device), to check the numbers the
templates copy from the small trace into generated code.

Views are replayed in the generated ``forward`` with the reference's own arguments
(``qkv.split(n_embd, dim=2)``, ``x.view(b, groups, c // groups, h, w)``). Sizes read from tensors are
read again at run time, but a number the small trace holds as a constant (a module attribute such
as ``n_embd``, a size folded where it was the same) may be another at the size being optimised. Each
replayed call is therefore matched by name with the full trace's, and a number that differs is
refused with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin import size_tracing
from kernelevo.agent.builtin.decompose import decompose


def traced_there(full: torch.nn.Module | None, inputs: list[Any], shapes: list[tuple[int, ...]]
                 ) -> torch.fx.GraphModule | None:
    """``full`` (the model at the size being optimised, on the meta device) traced, its inputs named
    and its functions decomposed as the small graph's were; None where that cannot be done."""
    from kernelevo.agent.builtin.recognize import safe_input_names  # it plans with this module

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if full is None or len(tensors) != len(inputs) or len(shapes) != len(inputs):
        return None
    try:
        traced = size_tracing.traced(full)
        safe_input_names(traced)
        metas = [torch.empty(s, dtype=x.dtype, device="meta") for s, x in zip(shapes, inputs, strict=True)]
        ShapeProp(traced).propagate(*metas)
        if decompose(traced):
            ShapeProp(traced).propagate(*metas)
    except Exception:  # noqa: BLE001 (the caller refuses what it cannot check)
        return None
    return traced


def _leaves(value: Any) -> list[Any]:
    leaves: list[Any] = []
    torch.fx.node.map_aggregate(value, leaves.append)
    return leaves


def numbers_that_change(nodes: Iterable[torch.fx.Node], there: torch.fx.GraphModule | None) -> str | None:
    """Why ``nodes`` (calls of the small graph replayed in generated code) cannot be replayed at the
    size being optimised (``there``: the full trace), or None where every number they take is the same
    there."""
    if there is None:
        return "the views' numbers cannot be checked at the size being optimised (its model does not trace)"
    by_name = {n.name: n for n in there.graph.nodes}
    for node in nodes:
        other = by_name.get(node.name)
        if other is None or other.target != node.target:
            return f"`{node.name}` has no counterpart at the size being optimised"
        mine, theirs = _leaves((node.args, node.kwargs)), _leaves((other.args, other.kwargs))
        if len(mine) != len(theirs):
            return f"`{node.name}` takes other arguments at the size being optimised"
        for a, b in zip(mine, theirs, strict=True):
            # a number of the small graph where the full one reads a size was folded as the same there
            if isinstance(a, (int, float)) and not isinstance(a, bool) and not isinstance(b, torch.fx.Node) and a != b:
                return (f"`{node.name}` takes {a} at the traced size and {b} at the size being optimised (a "
                        "number the generated code would hold)")
    return None
