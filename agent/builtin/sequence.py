"""References no single template covers, as consecutive segments that templates do cover: a
convolution, then a normalisation over the last dimension, then a pooling, say. Each segment is
its own kernel (or kernels) reading the previous segment's output from memory; within a segment,
everything is fused as that template fuses it.

The split is greedy and longest-first: from the first op, the longest run of ops that (a) hands
only its last value to what follows and (b) some template covers becomes a segment. A segment reads
the previous segment's output, the forward's inputs, and any earlier segment's output (``x - x.mean(
(2, 3, 4), keepdim=True)`` as a reduction kernel, then a pointwise one reading both ``x`` and the mean). Each segment
is planned by :func:`recognize.plan_graph` on its own small graph, with the sizes it will see at the
size being optimised (the full model's shapes, propagated on the meta device). The search tunes the
heaviest segment (a GEMM or a convolution if there is one); the others keep their first seed.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin import attention, attention_by_hand, made_from_sizes, position_masks
from kernelevo.agent.builtin.lower import trace
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.sequence_views import (
    FLOW,
    chunk_parts,
    feeds_a_view,
    input_view,
    kept_view,
    size_of,
    view_of,
)
from kernelevo.agent.builtin.shape_reads import FullSizes, fold_numbers
from kernelevo.agent.builtin.vocabulary import Capture, attribute_at, reads_metadata

KEPT = "_kernelevo_kept"
"""``KEPT`` + k: the name of segment k's output where a segment after the next one reads it too."""
LEAD_KINDS = ("conv", "matmul", "attention")
SHARED_HELPERS = {made_from_sizes.HELPER, "round_to_bf16", "fmod_exact", "divide_by_number", "true_divide",
                  "phase_taps", "aligned", "conv_geometry", "pool_geometry", "tma_scratch", "ceil_div",
                  "next_power_of_2"}
"""Helpers every template writes identically: one copy in the file, never renamed."""


@dataclass
class Segment:
    """One segment: its plan, the choice it is rendered with, and its method's arguments."""

    plan: Any
    strategy: str
    params: dict[str, Any]
    why: str
    inputs: list[str] = field(default_factory=list)
    """The segment method's arguments: ``flow`` (the previous segment's output) and/or the forward's inputs."""
    passed: list[str] = field(default_factory=list)
    """What ``forward`` passes for them, where not the same names: a parameter's path (``self.weight``)."""
    views: list[str] = field(default_factory=list)
    """Glue before the segment reads ``flow``, no kernel, as statements of ``forward``: a view taken of
    it (``_kernelevo_flow = _kernelevo_flow.unsqueeze(1)``), or a read of its sizes (``getitem_1 =
    getattr_1[1]``)."""


def _calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The graph's calls in an order the split can use: each value computed from sizes alone (a size
    read, positions made with ``arange`` from it) just before the first call that needs it, not where
    the trace met it. Written first, ``b, t = idx.size(); pos = torch.arange(t)`` would start every
    segment with calls no template takes on their own, before the lookup of ``idx`` that needs none
    of them."""
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    from_sizes: set[torch.fx.Node] = set()
    for n in calls:
        if reads_metadata(n) or (n.all_input_nodes and all(a in from_sizes for a in n.all_input_nodes)):
            from_sizes.add(n)
    order: list[torch.fx.Node] = []
    placed: set[torch.fx.Node] = set()

    def place(n: torch.fx.Node) -> None:
        for a in n.all_input_nodes:
            if a in from_sizes and a not in placed:
                place(a)
        placed.add(n)
        order.append(n)

    for n in calls:
        if n not in from_sizes:
            place(n)
    for n in calls:  # what only the output reads
        if n not in placed:
            place(n)
    return order


def _subgraph(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], flow: torch.fx.Node | None,
              earlier: dict[torch.fx.Node, str] | None = None, sizes: Collection[str] = (),
              parameters_in: bool = False) -> torch.fx.GraphModule | None:
    """``nodes`` as a graph of their own, or None if they read a computed value other than ``flow``,
    the outputs of earlier segments (``earlier``: node -> the name it is kept under) and sizes read
    in ``forward`` (``sizes``: their names, each passed in as a number), or hand on a value other than
    their last. ``parameters_in``: the parameters and buffers they read come in as arguments (named as
    their ``get_attr`` nodes), for a segment that computes from parameters alone."""
    earlier = earlier or {}
    inside = set(nodes)
    for node in nodes[:-1]:
        if any(user not in inside for user in node.users):
            return None
    used = [a for n in nodes for a in n.all_input_nodes if a not in inside]
    if any(a.op not in ("placeholder", "get_attr") and a is not flow and a not in earlier and a.name not in sizes
           for a in used):
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    if flow is not None and flow in used:
        env[flow] = graph.placeholder(FLOW)
    for a in dict.fromkeys(a for a in used if a in earlier and a is not flow):
        env[a] = graph.placeholder(earlier[a])
    for a in dict.fromkeys(a for a in used if a.name in sizes and a not in earlier and a is not flow):
        env[a] = graph.placeholder(a.name)
    for p in [n for n in gm.graph.nodes if n.op == "placeholder" and n in used]:
        env[p] = graph.placeholder(p.name)
    for a in dict.fromkeys(a for a in used if parameters_in and a.op == "get_attr"):
        env[a] = graph.placeholder(a.name)

    def mapped(n: torch.fx.Node) -> torch.fx.Node:
        if n not in env:
            env[n] = graph.get_attr(str(n.target))
        return env[n]

    for node in nodes:
        env[node] = graph.node_copy(node, mapped)
    graph.output(env[nodes[-1]])
    return torch.fx.GraphModule(gm, graph)


def _segment_graph(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], flow: torch.fx.Node | None,
                   earlier: dict[torch.fx.Node, str], sizes: Collection[str], model: torch.nn.Module | None
                   ) -> tuple[torch.fx.GraphModule | None, list[str], list[str]]:
    """``nodes`` as a segment: its graph (None where they cannot be one), its inputs' names, and what
    ``forward`` passes for them where not those names (a segment computed from parameters alone)."""
    sub = _subgraph(gm, nodes, flow, earlier, sizes)
    names = [n.name for n in sub.graph.nodes if n.op == "placeholder"] if sub is not None else []
    if sub is None or names:
        return sub, names, []
    sub, passed = _from_parameters(gm, nodes, flow, earlier, sizes, model)
    names = [n.name for n in sub.graph.nodes if n.op == "placeholder"] if sub is not None else []
    return (sub, names, passed) if names else (None, [], [])


def _from_parameters(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], flow: torch.fx.Node | None,
                     earlier: dict[torch.fx.Node, str], sizes: Collection[str], model: torch.nn.Module | None
                     ) -> tuple[torch.fx.GraphModule | None, list[str]]:
    """``nodes``, which read parameters and buffers alone (a weight normalised, scaled or merged in
    ``forward``), as a segment whose inputs they are: its graph and what ``forward`` passes for each
    (``self.weight``). Recomputed on every call, as the reference does: a parameter may change between
    calls. Only attributes ModelNew has (``model``: the reference built at the size being optimised):
    a constant the tracer made (``torch.tensor(0.5)`` in ``forward``) is none of them."""
    sub = _subgraph(gm, nodes, flow, earlier, sizes, parameters_in=True)
    if sub is None or model is None:
        return None, []
    targets = {n.name: str(n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    names = [n.name for n in sub.graph.nodes if n.op == "placeholder"]
    # (the tracer sets its constants on the model it traces as ``_tensor_constant<n>``)
    if any(name not in targets or targets[name].startswith("_tensor_constant")
           or not isinstance(attribute_at(model, targets[name]), torch.Tensor) for name in names):
        return None, []
    return sub, [f"self.{targets[name]}" for name in names]


def _full_node_shapes(inputs: list[Any], shapes: list[tuple[int, ...]], full_graph: torch.fx.GraphModule | None
                      ) -> dict[str, tuple[int, ...]]:
    """Every node's output shape at the size being optimised (``full_graph``: the reference traced
    there, named and decomposed as the small graph; rewritten here as recognise rewrote that one, on a
    copy); empty where that cannot be worked out (the small shapes are used then)."""
    if full_graph is None:
        return {}
    traced = copy.deepcopy(full_graph)
    try:
        metas = [torch.empty(s, dtype=x.dtype, device="meta") for s, x in zip(shapes, inputs, strict=True)]
        there = {n.name: tuple(n.meta["tensor_meta"].shape) for n in traced.graph.nodes
                 if hasattr(n.meta.get("tensor_meta"), "shape")}
        names = [n.name for n in traced.graph.nodes if n.op == "placeholder"]
        fold_numbers(traced, FullSizes(dict(zip(names, shapes, strict=True)), all_same=True))
        if attention_by_hand.rewrite(traced, there):  # as recognise rewrote the small graph
            ShapeProp(traced).propagate(*metas)
        if attention.decompose_wide(traced, there):  # as recognise rewrote the small graph
            ShapeProp(traced).propagate(*metas)
        if position_masks.rewrite(traced):
            ShapeProp(traced).propagate(*metas)
    except Exception:
        return {}
    found = {n.name: tuple(n.meta["tensor_meta"].shape) for n in traced.graph.nodes
             if isinstance(n.meta.get("tensor_meta"), torch.fx.passes.shape_prop.TensorMetadata)}
    # an input planned as the view forward reads it through (``leading_views``) has the view's shape
    return found | {name: tuple(shape) for name, shape in zip(names, shapes, strict=False)}


def plan(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]], context: Any,
         whole: CannotCover) -> Any:
    """A sequence plan for ``gm``, or CannotCover (with the reason the whole graph was not covered,
    and the op where the split stopped)."""
    from kernelevo.agent.builtin.policy import seeds
    from kernelevo.agent.builtin.recognize import Plan

    calls = _calls(gm)
    capture = Capture(gm)
    try:
        capture.run(*inputs)
    except Exception as exc:
        raise CannotCover(f"the reference does not run on its small inputs ({exc})") from None
    full_shapes = _full_node_shapes(inputs, shapes, context.full_graph())
    small = {n.name: tuple(v.shape) for n in gm.graph.nodes if isinstance(v := capture.seen.get(n.name), torch.Tensor)}
    segments: list[Segment] = []
    glue = made_from_sizes.Glue(gm, capture.seen, context, whole)
    start, flow = 0, None
    views: list[str] = []
    earlier: dict[torch.fx.Node, str] = {}
    """Each segment's output, by the name it is kept under."""
    read_sizes: set[str] = set()
    """Names of the sizes read in ``forward`` so far."""

    def spelled(n: torch.fx.Node) -> str | None:
        return glue.spelled(n, read_sizes)

    while start < len(calls):
        size = size_of(calls[start], flow, read_sizes) if feeds_a_view(calls[start]) else None
        if size is not None:
            views.append(size)
            read_sizes.add(calls[start].name)
            start += 1
            continue
        view = view_of(calls[start], flow, full_shapes, read_sizes, spelled)
        if view is not None:
            views.append(view)
            if flow in earlier:  # kept viewed too: a later kernel may read the view after another one ran
                views.append(f"{earlier[flow]} = {FLOW}")
                earlier[calls[start]] = earlier[flow]
            flow, start = calls[start], start + 1
            continue
        kept = kept_view(calls[start], earlier, full_shapes, read_sizes, spelled)
        if kept is not None:  # a view of an earlier kernel's output, kept under its name
            views.append(kept)
            start += 1
            continue
        if calls[start] in earlier:  # a part of a chunk, taken with the chunk below
            start += 1
            continue
        found, failure, end = _longest_segment(gm, calls, start, flow, earlier, read_sizes, capture.seen,
                                               (full_shapes, small), context, whole)
        if found is None:  # no kernel starts here: glue, or forward's own work
            views += _forward_work(calls[start], earlier, full_shapes, read_sizes, glue, failure,
                                   str(whole) if not start else f"{whole}; split into kernels, no template "
                                   f"covers the ops from `{calls[start].name}`")
            start += 1
            continue
        sub_plan, names, passed = found
        strategy, params, why = seeds(sub_plan)[0]
        segments.append(Segment(plan=sub_plan, strategy=strategy, params=params, why=why, inputs=names,
                                passed=passed, views=views))
        flow, views = calls[end], []
        earlier[flow] = f"{KEPT}{len(segments) - 1}"
        start = end + 1
    if not segments:  # one segment is enough where views before or after it were what the whole missed
        raise CannotCover(str(whole))
    lead = next((i for i, s in enumerate(segments) if s.plan.kind in LEAD_KINDS), 0)
    first = segments[0].plan
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return Plan(kind="sequence", program=None, init=context.init, imports=context.imports, rows=first.rows,
                cols=first.cols, dtype=context.dtype, ops=[op for s in segments for op in s.plan.ops], inputs=names,
                extra={"segments": segments, "lead": lead, "tail_views": views,
                       "returns": _returned(gm, flow, earlier)})


def _forward_work(node: torch.fx.Node, earlier: dict[torch.fx.Node, str], full: dict[str, tuple[int, ...]],
                  sizes: set[str], glue: made_from_sizes.Glue, failure: str | None, otherwise: str) -> list[str]:
    """Statements of ``forward`` for ``node`` where no kernel starts at it: the parts of a chunk no kernel
    reads whole (views of a kept output), a view of an input read otherwise too, or ``forward``'s own
    work (sizes, tensors made from them); CannotCover (``failure``, else ``otherwise``) where it is none."""
    def spelled(n: torch.fx.Node) -> str | None:
        return glue.spelled(n, sizes)

    parts = chunk_parts(node, earlier, spelled)
    if parts is not None:
        return parts
    viewed = input_view(node, earlier, full, sizes, spelled)
    if viewed is not None:
        return [viewed]
    taken = glue.take(node, failure, sizes)
    if taken is None:
        raise CannotCover(failure or otherwise)
    if taken[0]:
        earlier[node] = taken[1]
        return [taken[0]]
    return []


def _returned(gm: torch.fx.GraphModule, flow: torch.fx.Node | None, earlier: dict[torch.fx.Node, str]) -> str:
    """What ``forward`` returns: the last value (``FLOW``), or a tuple of values kept under their names
    where the reference returns several (``h, h.sum(1)``: the first kernel's output and the last's).
    CannotCover where a returned value is one no kernel wrote whole, or one whose name a later view
    takes over."""
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    values = list(out) if isinstance(out, (tuple, list)) else [out]
    spelled = []
    for value in values:
        if value is flow:
            spelled.append(FLOW)
            continue
        name = earlier.get(value) if isinstance(value, torch.fx.Node) else None
        if name is None or sum(kept == name for kept in earlier.values()) > 1:
            raise CannotCover(f"the reference returns `{getattr(value, 'name', value)}`, a value inside a kernel's "
                              "work (covered: values the kernels write whole)")
        spelled.append(name)
    if not isinstance(out, (tuple, list)):
        return spelled[0]
    return "(" + ", ".join(spelled) + ("," if len(spelled) == 1 else "") + ")"


def _longest_segment(gm: torch.fx.GraphModule, calls: list[torch.fx.Node], start: int, flow: torch.fx.Node | None,
                     earlier: dict[torch.fx.Node, str], read_sizes: set[str], seen: dict[str, Any],
                     shapes: tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]], context: Any,
                     whole: CannotCover) -> tuple[Any, str | None, int]:
    """The longest run of calls from ``start`` that a template covers, as ``(plan, its input names, what
    forward passes for them)``, with why none covers the call at ``start`` alone (None where nothing was
    tried or a run was found) and the run's last index. ``shapes``: every node's shape at the size being
    optimised, and on the small inputs."""
    from kernelevo.agent.builtin.recognize import plan_graph

    full_shapes, small = shapes
    failure = None
    for end in range(len(calls) - 1, start - 1, -1):
        if start == 0 and end == len(calls) - 1:
            continue  # the whole graph: already refused
        sub, names, passed = _segment_graph(gm, calls[start:end + 1], flow, earlier, read_sizes, context.full)
        if sub is None:
            continue
        kept_as = {name: node.name for node, name in earlier.items()}
        sources = [flow.name if name == FLOW and flow is not None else kept_as.get(name, name) for name in names]
        values = [seen[s] for s in sources]
        try:
            traced = trace(sub, values)
            sizes = [full_shapes.get(s, small.get(s, ())) for s, v in zip(sources, values, strict=True)
                     if isinstance(v, torch.Tensor)]  # a size read in forward comes in as a number
            return ((plan_graph(sub, traced, values, sizes, _segment_context(context, values, full_shapes)), names,
                     passed), None, end)
        except CannotCover as exc:
            if end == start:
                failure = str(whole) if str(exc) == str(whole) else (
                    f"{whole}; split into kernels, `{calls[start].name}` is not covered either: {exc}")
    return None, failure, start


def _segment_context(context: Any, values: list[Any], full_shapes: dict[str, tuple[int, ...]]) -> Any:
    """The planning context of a segment reading ``values``: the whole graph's, with its own dtype where
    it reads floating-point tensors (a GEMM after a lookup of token ids computes in the table's dtype)."""
    floating = next((v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()), None)
    dtype = str(floating.dtype).removeprefix("torch.") if floating is not None else context.dtype
    return replace(context, node_shapes=full_shapes, dtype=dtype)


def searched(plan: Any) -> Any:
    """The plan the search tunes: the lead segment's for a sequence, else the plan itself."""
    return plan.extra["segments"][plan.extra["lead"]].plan if plan.kind == "sequence" else plan


def describe(plan: Any) -> str:
    parts = [f"{i + 1}. {s.plan.describe()}" for i, s in enumerate(plan.extra["segments"])]
    if len(parts) == 1:
        return f"one kernel, with torch's views around it: {parts[0]}"
    return f"{len(parts)} kernels in sequence: " + "; ".join(parts)
