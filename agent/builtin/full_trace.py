"""The reference traced at the size being optimised (on the meta device), for the numbers the
templates copy from a trace into generated code.

Views are replayed in the generated ``forward`` with the reference's own arguments
(``qkv.split(n_embd, dim=2)``, ``x.view(b, groups, c // groups, h, w)``). Sizes read from tensors are
read again at run time, but a number the small trace holds as a constant (a module attribute such
as ``n_embd``) may be another at the size being optimised. Each replayed call is therefore matched by
name with the full trace's and written with the numbers it takes there (the generated code then holds
at that size alone); a call without a counterpart of the same form is refused. Inputs whose
broadcasting the small shapes would misread there are refused too (:func:`refuse_hidden_broadcast`).
"""

from __future__ import annotations

import copy
import math
import operator
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin import conv_functional, size_tracing
from kernelevo.agent.builtin.decompose import decompose_fully
from kernelevo.agent.builtin.program import CannotCover


def traced_there(full: torch.nn.Module | None, inputs: list[Any], shapes: list[tuple[int, ...]]
                 ) -> torch.fx.GraphModule | None:
    """``full`` (the model at the size being optimised, on the meta device) traced, its inputs named
    and its functions decomposed as the small graph's were; None where that cannot be done."""
    from kernelevo.agent.builtin.input_names import safe_input_names

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if full is None or len(tensors) != len(inputs) or len(shapes) != len(inputs):
        return None
    try:
        traced = size_tracing.traced(full)
        safe_input_names(traced)
        metas = [torch.empty(s, dtype=x.dtype, device="meta") for s, x in zip(shapes, inputs, strict=True)]
        ShapeProp(traced).propagate(*metas)
        decompose_fully(traced, lambda: ShapeProp(traced).propagate(*metas))
    except Exception:  # noqa: BLE001 (the caller refuses what it cannot check)
        return None
    return traced


def matching_shapes(gm: torch.fx.GraphModule, there: torch.fx.GraphModule | None) -> dict[str, tuple[int, ...]]:
    """The shapes at the size being optimised of ``gm``'s values that have a counterpart in ``there``:
    the same name, the same call and the same rank (a node a rewrite of the small graph alone made may
    share a name with another there, and is left out where its call differs). Sound because its caller
    runs after ``size_constants.adopt_numbers_there`` matched the two graphs node for node (or refused
    the task): a rewrite of one graph alone keeping a same-named node's call and rank would fool it."""
    nodes = {n.name: n for n in gm.graph.nodes}
    found = {}
    for name, other in counterparts(gm, gm, there).items():
        small, big = (getattr(n.meta.get("tensor_meta"), "shape", None) for n in (nodes[name], other))
        if small is not None and big is not None and other.target == nodes[name].target and len(small) == len(big):
            found[name] = tuple(int(d) for d in big)
    return found


def _leaves(value: Any) -> list[Any]:
    leaves: list[Any] = []
    torch.fx.node.map_aggregate(value, leaves.append)
    return leaves


def unmatched(nodes: Iterable[torch.fx.Node], there: dict[str, torch.fx.Node]) -> str | None:
    """Why ``nodes`` (calls of the small graph replayed in generated code) cannot take their numbers
    from their counterparts at the size being optimised (``there``, by name), or None where each has
    one of the same form (the same call, the same shape of arguments)."""
    for node in nodes:
        other = there.get(node.name)
        if other is None or other.target != node.target:
            return f"`{node.name}` has no counterpart at the size being optimised to take its numbers from"
        if len(_leaves((node.args, node.kwargs))) != len(_leaves((other.args, other.kwargs))) or \
                len(node.args) != len(other.args) or set(node.kwargs) != set(other.kwargs):
            return f"`{node.name}` takes other arguments at the size being optimised"
    return None


def counterparts(model: torch.nn.Module, gm: torch.fx.GraphModule, there: torch.fx.GraphModule | None
                 ) -> dict[str, torch.fx.Node]:
    """Each call of ``gm`` by name, with its counterpart in ``there`` (the reference traced at the size
    being optimised). ``model``: the graph ``gm`` was traced from, whose names are the whole graph's (a
    segment's trace names its nodes afresh); empty where the two cannot be matched."""
    if there is None:
        return {}
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    originals = calls
    if isinstance(model, torch.fx.GraphModule) and model is not gm:
        originals = [n for n in model.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
        if len(originals) != len(calls) or any(a.target != b.target for a, b in zip(originals, calls, strict=True)):
            return {}
    by_name = {n.name: n for n in there.graph.nodes}
    return {n.name: by_name[o.name] for n, o in zip(calls, originals, strict=True) if o.name in by_name}


def replayed_there(gm: torch.fx.GraphModule, replayed: list[str], there: dict[str, torch.fx.Node]) -> None:
    """CannotCover where a call the generated code replays (``replayed``: names in ``gm``) has no
    counterpart of the same form at the size being optimised (``there``), whose numbers it takes."""
    why = unmatched([n for n in gm.graph.nodes if n.name in replayed], there)
    if why:
        raise CannotCover(why)


LAYER_FUNCTIONS = {*conv_functional.FUNCTIONS, *conv_functional.TRANSPOSED, F.linear, F.embedding, torch.matmul,
                   operator.matmul, torch.mm, torch.bmm}
"""Calls that read their operands by their own shapes (an input, a weight), never broadcast."""


def _fed_to_layers_alone(gm: torch.fx.GraphModule) -> set[str]:
    """Inputs whose every use is an operand of a layer (a module call, a convolution, a matmul): they
    do not broadcast against anything, whatever their shapes."""
    return {n.name for n in gm.graph.nodes if n.op == "placeholder" and n.users and all(
        u.op == "call_module" or (u.op == "call_function" and u.target in LAYER_FUNCTIONS) for u in n.users)}


def refuse_hidden_broadcast(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]]) -> None:
    """CannotCover where the small inputs cannot tell how the tensor inputs broadcast at the size being
    optimised (``shapes``). The templates read the broadcasting from the small shapes: where a size
    shrunk to 1 makes two inputs agree on a dimension they differ on at full size (or the other way
    round), a kernel planned from them would index one of them wrongly."""
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    tensors = [(name, v) for name, v in zip(names, inputs, strict=False) if isinstance(v, torch.Tensor)]
    full = [shapes[i] for i, v in enumerate(inputs) if isinstance(v, torch.Tensor)] \
        if len(shapes) == len(inputs) else shapes
    if len(full) != len(tensors) or not tensors:
        return
    largest = max(range(len(tensors)), key=lambda i: tensors[i][1].numel())
    (main, first), main_full = tensors[largest], tuple(full[largest])
    layered = _fed_to_layers_alone(gm)
    for (name, value), size in zip(tensors, full, strict=True):
        if name == main or name in layered:
            continue
        small, big = tuple(value.shape), tuple(size)
        if len(small) != len(big) or len(small) > first.dim():
            continue
        a, b = tuple(first.shape)[first.dim() - len(small):], main_full[len(main_full) - len(big):]
        # a broadcast input (another shape than the main one) read by its sizes of 1 at the small
        # size: one of them that grows at full size is read along it there
        grows = small != tuple(first.shape) and any(s == 1 and f > 1 for s, f in zip(small, big, strict=True))
        if grows or any((s == m) != (f == g) for s, m, f, g in zip(small, a, big, b, strict=True)):
            raise CannotCover(f"input `{name}` broadcasts against `{main}` differently at the small size "
                              f"({list(small)} on {list(first.shape)}) than at the size being optimised "
                              f"({list(big)} on {list(main_full)})")


def refuse_broadcast_that_changes(gm: torch.fx.GraphModule, there: dict[str, tuple[int, ...]]) -> None:
    """CannotCover where a value is read along a dimension of a pointwise call's result one way at the
    small size and another at the size being optimised (``there``: the values' shapes there, by name):
    ``x[:, 1:] - y`` with ``x`` two columns wide at the small size is one column, as wide as ``y``, and a
    kernel planned there reads ``y`` along the columns it does not have at full size. Only calls whose
    result has the broadcast shape of their tensor arguments (pointwise ones) are compared."""
    for node in gm.graph.nodes:
        args = [a for a in node.all_input_nodes if hasattr(a.meta.get("tensor_meta"), "shape")]
        small = [tuple(a.meta["tensor_meta"].shape) for a in args]
        if node.op not in ("call_function", "call_method") or len(args) < 2 or node.name not in there or \
                any(a.name not in there for a in args) or not _broadcast_of(small, node):
            continue
        out, big = tuple(there[node.name]), [tuple(there[a.name]) for a in args]
        if not _broadcast_of(big, out):
            continue  # (a same-named value of the full trace that is not this one's counterpart)
        shape = tuple(node.meta["tensor_meta"].shape)
        for arg, a_small, a_big in zip(args, small, big, strict=True):
            if _misread(a_small, shape, a_big, out, arg.op in ("placeholder", "get_attr")):
                raise CannotCover(f"`{node.name}` reads `{arg.name}` broadcast differently at the small size "
                                  f"({list(a_small)} into {list(shape)}) than at the size being optimised "
                                  f"({list(a_big)} into {list(out)})")


def _broadcast_of(shapes: list[tuple[int, ...]], out: Any) -> bool:
    """Is ``out`` (a shape, or a node's) the broadcast of ``shapes``?"""
    if isinstance(out, torch.fx.Node):
        out = getattr(out.meta.get("tensor_meta"), "shape", None)
    try:
        return out is not None and tuple(torch.broadcast_shapes(*shapes)) == tuple(out)
    except RuntimeError:
        return False


def _misread(small: tuple[int, ...], out: tuple[int, ...], big: tuple[int, ...], out_big: tuple[int, ...],
             from_memory: bool) -> bool:
    """Would a kernel planned at the small size read an argument of shape ``small`` (into ``out``) wrongly at
    full size (``big`` into ``out_big``)? Along a dimension the argument is either one value repeated (its
    size 1, the result's larger) or one per position (the result's size): a dimension read one way at one
    size and the other way at the other is misread. Where both are 1 at the small size the planner cannot
    tell; a tensor it reads from memory (an input, a parameter) is then read as one per position, wrong
    where it is repeated at full size. A dimension the argument lacks is repeated at every size."""
    lead = len(out) - len(small)
    for d, (o_small, o_big) in enumerate(zip(out, out_big, strict=True)):
        a_small = small[d - lead] if d >= lead else 1
        a_big = big[d - lead] if d >= lead else 1
        repeated_small, repeated_big = a_small == 1 != o_small, a_big == 1 != o_big
        along_small, along_big = a_small == o_small != 1, a_big == o_big != 1
        if (repeated_small and along_big) or (along_small and repeated_big):
            return True
        if from_memory and d >= lead and a_small == o_small == 1 and repeated_big:
            return True
    return False


def output_shape(model: torch.nn.Module, inputs: list[Any], shapes: list[tuple[int, ...]]
                 ) -> tuple[int, ...] | None:
    """The output's shape with the tensor inputs at their full ``shapes``, run on the meta device (a
    copy of the model moved there: nothing allocated, the model itself untouched), or None where that
    cannot be run (a graph traced with the small sizes in it, say)."""
    try:
        with torch.no_grad():
            out = copy.deepcopy(model).to("meta")(*_meta_inputs(inputs, shapes))
        return tuple(out.shape) if isinstance(out, torch.Tensor) else None
    except Exception:
        return None


def largest_value(model: torch.nn.Module, inputs: list[Any], shapes: list[tuple[int, ...]]
                  ) -> tuple[int, ...] | None:
    """The shape of the largest value ``forward`` computes with the tensor inputs at their full ``shapes``
    (traced on the meta device, as :func:`output_shape` runs), or None where that cannot be run."""
    from kernelevo.agent.builtin.lower import trace  # (lower imports the planners that import this module)

    try:
        gm = trace(copy.deepcopy(model).to("meta"), _meta_inputs(inputs, shapes))
    except Exception:
        return None
    computed = [tuple(n.meta["tensor_meta"].shape) for n in gm.graph.nodes
                if n.op in ("call_function", "call_method") and hasattr(n.meta.get("tensor_meta"), "shape")]
    return max(computed, key=math.prod, default=None)


def _meta_inputs(inputs: list[Any], shapes: list[tuple[int, ...]]) -> list[Any]:
    """The inputs with each tensor at its full shape on the meta device (nothing allocated)."""
    full = iter(shapes)
    return [torch.empty(next(full), dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x
            for x in inputs]
