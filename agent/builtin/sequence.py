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
import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin import attention, attention_by_hand, made_from_sizes, position_masks
from kernelevo.agent.builtin.lower import trace
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.shape_reads import INTEGER_ARITHMETIC, FullSizes, fold_numbers
from kernelevo.agent.builtin.vocabulary import Capture, attribute_at, is_call, plain_int, reads_metadata, view_method

FLOW = "_kernelevo_flow"
"""The name a segment gives the previous segment's output."""
KEPT = "_kernelevo_kept"
"""``KEPT`` + k: the name of segment k's output where a segment after the next one reads it too."""
LEAD_KINDS = ("conv", "matmul", "attention")
SHARED_HELPERS = {made_from_sizes.HELPER, "round_to_bf16", "fmod_exact", "phase_taps", "aligned", "conv_geometry",
                  "pool_geometry", "tma_scratch"}
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


def _size_of(node: torch.fx.Node, flow: torch.fx.Node | None, sizes: Collection[str]) -> str | None:
    """``node`` as a statement reading sizes of ``flow`` or of a forward input (``x.shape``,
    ``x.size(1)``, an element of either), with ``flow`` written ``FLOW``; else None. The sizes are
    read from the tensor itself when ``forward`` runs, so a view built from them holds at every size."""
    tensor = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
    of = FLOW if tensor is not None and tensor is flow else (
        tensor.name if tensor is not None and tensor.op == "placeholder" else None)
    if of is not None and node.op == "call_function" and node.target is getattr and len(node.args) == 2 and \
            node.args[1] == "shape":
        return f"{node.name} = {of}.shape"
    if of is not None and node.op == "call_method" and node.target == "size" and not node.kwargs and \
            all(plain_int(a) for a in node.args[1:]):
        return f"{node.name} = {of}.size({', '.join(map(repr, node.args[1:]))})"
    if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2 and \
            isinstance(node.args[0], torch.fx.Node) and node.args[0].name in sizes and _plain_index(node.args[1]):
        return f"{node.name} = {node.args[0].name}[{node.args[1]!r}]"
    return None


def _feeds_a_view(node: torch.fx.Node) -> bool:
    """Does this read of sizes reach a view (directly, or through items of it and arithmetic)? Such
    reads are glue in ``forward``; others (a normalized shape, a scale from a size) stay with the ops
    that use them, which fold them to numbers."""
    pending, seen = list(node.users), set()
    while pending:
        user = pending.pop()
        if user in seen:
            continue
        seen.add(user)
        if view_method(user) is not None:
            return True
        if user.op == "call_function" and (user.target is operator.getitem or user.target in INTEGER_ARITHMETIC):
            pending.extend(user.users)
    return False


def _plain_index(index: Any) -> bool:
    """An int, or a slice of ints and Nones (``shape[1:]``)."""
    if isinstance(index, slice):
        return all(part is None or plain_int(part) for part in (index.start, index.stop, index.step))
    return plain_int(index)


SHAPED_AS = {"view_as", "reshape_as"}
"""Views to another tensor's shape."""


def _view_of(node: torch.fx.Node, flow: torch.fx.Node | None, full: dict[str, tuple[int, ...]],
             sizes: Collection[str] = (), spelled: Callable[[torch.fx.Node], str | None] = lambda n: None,
             name: str = FLOW, into: str | None = None) -> str | None:
    """``node`` as the statement that takes a view of ``flow`` and nothing else (``.unsqueeze(1)``),
    when ``flow`` is used by it alone (and by reads of its sizes) and its arguments are plain numbers
    or sizes read in ``forward`` (``sizes``: their names); else None. Such a view between two segments (a pooling over
    a 2-D GEMM output seen as one channel, a softmax over the spatial dimensions flattened) is torch's
    glue in ``forward``, not a kernel. A ``view`` or ``reshape`` that names sizes as numbers took them
    from the small model: it is kept only where they give the node's own shape at the size being
    optimised (``full``); sizes read in ``forward`` hold at every size, beside them only ``-1``, and so
    does arithmetic on them (``spelled``: such a number's expression, or None). ``name``: what
    ``forward`` calls ``flow`` (an earlier kernel's output kept for later is viewed the same way);
    ``into``: the name the view is kept under, where not ``name`` (``flow`` may then have other readers)."""
    if flow is None or not node.args or node.args[0] is not flow or \
            (into is None and any(user is not node and user.name not in sizes for user in flow.users)):
        return None
    method = view_method(node) or (node.target if node.op == "call_method" and node.target in SHAPED_AS else None)
    if method is None:
        return None
    if method in SHAPED_AS:  # the shape of an input: ``y.view_as(x)``
        other = node.args[1] if len(node.args) == 2 and not node.kwargs else None
        return f"{into or name} = {name}.{method}({other.name})" if isinstance(other, torch.fx.Node) and \
            other.op == "placeholder" else None

    def read(a: Any) -> bool:
        return isinstance(a, torch.fx.Node) and (a.name in sizes or spelled(a) is not None)

    def plain(a: Any) -> bool:
        return plain_int(a) or read(a) or (isinstance(a, (tuple, list)) and all(plain_int(x) or read(x) for x in a))

    rest, kwargs = list(node.args[1:]), dict(node.kwargs)
    if not all(plain(a) for a in [*rest, *kwargs.values()]):
        return None
    flat = [x for a in [*rest, *kwargs.values()] for x in (a if isinstance(a, (tuple, list)) else [a])]
    if any(read(x) for x in flat):
        if any(plain_int(x) and x != -1 for x in flat):
            rest = _inferred(node, rest, kwargs, full, read)
            if rest is None:
                return None
    elif method in ("view", "reshape") and not _same_at_full_size(flow, node, rest, kwargs, full):
        return None

    def word(a: Any) -> str:
        if isinstance(a, (tuple, list)):
            return "(" + "".join(f"{word(x)}, " for x in a) + ")"
        if isinstance(a, torch.fx.Node):
            return a.name if a.name in sizes else str(spelled(a))
        return repr(a)

    words = [word(a) for a in rest] + [f"{k}={word(v)}" for k, v in kwargs.items()]
    return f"{into or name} = {name}.{method}({', '.join(words)})"


def _inferred(node: torch.fx.Node, rest: list[Any], kwargs: dict[str, Any], full: dict[str, tuple[int, ...]],
              read: Callable[[Any], bool]) -> list[Any] | None:
    """A view's sizes beside sizes read in ``forward`` (``x.view(x.shape[0], heads, self.head_dim)``)
    where each number is the view's size there at the size being optimised too, or one alone is not
    (a constructor's size the small model holds smaller): that one written ``-1``, which torch infers
    at both sizes. None where neither holds."""
    sizes = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
    there = full.get(node.name)
    if kwargs or view_method(node) not in ("view", "reshape") or there is None or len(sizes) != len(there) or \
            any(plain_int(x) and x == -1 for x in sizes):
        return None
    differ = [i for i, x in enumerate(sizes) if not read(x) and x != there[i]]
    if len(differ) > 1:
        return None
    return [-1 if i in differ else x for i, x in enumerate(sizes)]


def _kept_view(node: torch.fx.Node, earlier: dict[torch.fx.Node, str], full: dict[str, tuple[int, ...]],
               sizes: Collection[str], spelled: Callable[[torch.fx.Node], str | None]) -> str | None:
    """A view of an earlier kernel's output (not the one flowing) as the statement that takes it, the
    view then kept under the same name (``earlier`` gains ``node``); None where ``node`` is no such view."""
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node) or source not in earlier:
        return None
    view = _view_of(node, source, full, sizes, spelled, name=earlier[source])
    if view is not None:
        earlier[node] = earlier[source]
    return view


def _input_view(node: torch.fx.Node, earlier: dict[torch.fx.Node, str], full: dict[str, tuple[int, ...]],
                sizes: Collection[str], spelled: Callable[[torch.fx.Node], str | None]) -> str | None:
    """``node`` a view of an input that is read otherwise too (``x.flatten(1)`` before the first kernel,
    ``view_as(x)`` after the last) as the statement that takes it under a name of its own (``earlier``
    gains ``node``: later kernels read the view by that name); None where it is no such view."""
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node) or source.op != "placeholder" or \
            all(user is node or reads_metadata(user) for user in source.users):
        return None  # an input read through this view alone is planned as the view (``leading_views``)
    into = f"_kernelevo_view_{node.name}"
    index = _index_text(node.args[1]) if node.op == "call_function" and node.target is operator.getitem else None
    view = f"{into} = {source.name}[{index}]" if index is not None else \
        _view_of(node, source, full, sizes, spelled, name=source.name, into=into)
    if view is not None:
        earlier[node] = into
    return view


def _index_text(index: Any) -> str | None:
    """A basic index (ints, slices of ints, None, ``...``) as Python source; None for any other."""
    def part(p: Any) -> str | None:
        if p is None or p is Ellipsis:
            return repr(p)
        if plain_int(p):
            return repr(p)
        if isinstance(p, slice) and all(b is None or plain_int(b) for b in (p.start, p.stop, p.step)):
            return ":".join("" if b is None else repr(b) for b in (p.start, p.stop)) + (
                f":{p.step!r}" if p.step is not None else "")
        return None

    parts = [part(p) for p in (index if isinstance(index, tuple) else (index,))]
    return None if None in parts else ", ".join(parts)  # type: ignore[arg-type]


def _chunk_parts(node: torch.fx.Node, earlier: dict[torch.fx.Node, str],
                 spelled: Callable[[torch.fx.Node], str | None]) -> list[str] | None:
    """``node`` a ``chunk`` or ``split`` of an earlier kernel's output (``gamma, beta =
    self.style(w).chunk(2, 1)``, ``q, k, v = self.c_attn(x).split(self.n_embd, dim=2)``) whose every
    use takes one part by a plain index, as the statements that take each part under a name of its own
    (``earlier`` gains the parts); None where it is no such call. A part is a view: the kernels after
    it read it through its strides, as they read any other view. A size read in ``forward`` is
    spelled as ``forward`` reads it (``spelled``)."""
    source = node.args[0] if node.args else None
    method = "split" if is_call(node, (torch.split,), ("split",)) else "chunk"
    if not is_call(node, (torch.chunk, torch.split), ("chunk", "split")) or not isinstance(source, torch.fx.Node) \
            or source not in earlier or not node.users:
        return None
    def text(a: Any) -> str | None:
        if isinstance(a, (list, tuple)):  # split's sizes
            items = [text(x) for x in a]
            return None if None in items else f"[{', '.join(items)}]"  # type: ignore[arg-type]
        return repr(a) if plain_int(a) else spelled(a) if isinstance(a, torch.fx.Node) else None

    parts = list(node.users)
    texts = [text(a) for a in node.args[1:]] + [f"{k}={text(v)}" for k, v in node.kwargs.items()]
    if any(t is None or t.endswith("=None") for t in texts) or not all(
            part.op == "call_function" and part.target is operator.getitem and plain_int(part.args[1])
            and part.args[1] >= 0 for part in parts):
        return None
    how = ", ".join(texts)  # type: ignore[arg-type]
    statements = []
    for part in parts:
        earlier[part] = f"{earlier[source]}_part{part.args[1]}"
        statements.append(f"{earlier[part]} = {earlier[source]}.{method}({how})[{part.args[1]}]")
    return statements


def _same_at_full_size(flow: torch.fx.Node, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any],
                       full: dict[str, tuple[int, ...]]) -> bool:
    if flow.name not in full or node.name not in full:
        return False
    sizes = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else kwargs.get("shape", args)
    try:
        return tuple(torch.empty(full[flow.name], device="meta").reshape(*sizes).shape) == full[node.name]
    except (RuntimeError, TypeError):
        return False


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
    while start < len(calls):
        size = _size_of(calls[start], flow, read_sizes) if _feeds_a_view(calls[start]) else None
        if size is not None:
            views.append(size)
            read_sizes.add(calls[start].name)
            start += 1
            continue
        view = _view_of(calls[start], flow, full_shapes, read_sizes, lambda n: glue.spelled(n, read_sizes))
        if view is not None:
            views.append(view)
            if flow in earlier:  # kept viewed too: a later kernel may read the view after another one ran
                views.append(f"{earlier[flow]} = {FLOW}")
                earlier[calls[start]] = earlier[flow]
            flow, start = calls[start], start + 1
            continue
        kept = _kept_view(calls[start], earlier, full_shapes, read_sizes, lambda n: glue.spelled(n, read_sizes))
        if kept is not None:  # a view of an earlier kernel's output, kept under its name
            views.append(kept)
            start += 1
            continue
        if calls[start] in earlier:  # a part of a chunk, taken with the chunk below
            start += 1
            continue
        found, failure, end = _longest_segment(gm, calls, start, flow, earlier, read_sizes, capture.seen,
                                               (full_shapes, small), context, whole)
        parts = _chunk_parts(calls[start], earlier, lambda n: glue.spelled(n, read_sizes)) if found is None else None
        if parts is not None:  # no kernel reads the chunk whole: its parts, as views of a kept output
            views += parts
            start += 1
            continue
        viewed = _input_view(calls[start], earlier, full_shapes, read_sizes, lambda n: glue.spelled(n, read_sizes)) \
            if found is None else None
        if viewed is not None:  # an input read only through this view: the view taken in forward, then read
            views.append(viewed)
            start += 1
            continue
        if found is None:
            taken = glue.take(calls[start], failure, read_sizes)  # no kernel starts here: forward's own work
            if taken is None:
                raise CannotCover(failure or (f"{whole}; split into kernels, no template covers the ops from "
                                              f"`{calls[start].name}`" if start else str(whole)))
            if taken[0]:
                views.append(taken[0])
                earlier[calls[start]] = taken[1]
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
