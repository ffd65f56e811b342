"""Recognise what a task computes from the structure of ``Model.forward`` (torch.fx), never its name.

The result is a :class:`Plan`: a row program (pointwise chains, reductions, softmax, norms; see
:mod:`lower`) or a whole-op template (cross-entropy), the reference's ``__init__`` to copy into
``ModelNew`` so that parameters match, and the shapes at the size being optimised (which seed the
search's heuristics).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin import (
    attention,
    attention_by_hand,
    conv,
    cross_entropy,
    dimreduce,
    full_trace,
    gathers,
    groupnorm,
    leading_views,
    matmul,
    pool,
    position_masks,
    rotary,
    scan,
    size_constants,
    sort,
    view_copy,
)
from kernelevo.agent.builtin.decompose import read_after_written
from kernelevo.agent.builtin.init_source import init_source
from kernelevo.agent.builtin.input_names import GENERATED_NAMES, clashes, safe_input_names
from kernelevo.agent.builtin.leading_views import LeadingView
from kernelevo.agent.builtin.lower import full_sizes, lower, trace
from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.shape_reads import fold_dtypes, fold_numbers, shapes_there
from kernelevo.tasks.loader import import_task_module
from kernelevo.tasks.task import Task

__all__ = ["GENERATED_NAMES", "CannotCover", "Plan", "clashes", "recognise", "safe_input_names"]

@dataclass
class Plan:
    """What the built-in policy will generate for a task."""

    kind: str
    """pointwise, row, dim_reduce, conv, pool, resample, rearrange, view_copy, rotary, embedding,
    group_norm, cross_entropy, matmul, attention or sequence."""
    program: Program | None
    init: str
    """``ModelNew.__init__``: the reference's own, so that parameters are created identically."""
    imports: list[str]
    rows: int
    cols: int
    dtype: str
    ops: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    sized_for: list[tuple[int, ...]] | None = None
    """The inputs' shapes the generated code holds at alone (a size read in ``forward`` was put into a
    kernel as its value there); None: any size the templates' own checks allow."""
    numbers_there: list[str] = field(default_factory=list)
    """Arithmetic that took its numbers from the reference traced at the size being optimised (numbers
    its constructor or its file makes): the code holds for the model built at that size alone."""
    leading_views: list[LeadingView] = field(default_factory=list)
    """Inputs planned in the shape of the view ``forward`` first reads them through (``leading_views``)."""

    @property
    def itemsize(self) -> int:
        """Bytes per element of the task's dtype."""
        return getattr(torch, self.dtype).itemsize

    def describe(self) -> str:
        shape = f"{self.rows} rows x {self.cols} columns, {self.dtype}"
        if self.kind == "cross_entropy":
            return f"cross-entropy over {self.cols} classes ({shape})"
        if self.kind == "attention":
            mask = self.extra.get("mask")
            causal = "causal " if self.extra["causal"] else f"{mask['kind']}-masked " if mask else ""
            keys = self.extra.get("seq_k", self.extra["seq"])
            keys = f" ({keys} keys)" if keys != self.extra["seq"] else ""
            return (f"{causal}attention, sequence {self.extra['seq']}{keys}, head dim {self.extra['head_dim']}, "
                    f"{self.rows // self.extra['seq']} heads in all, {self.dtype}")
        if self.kind == "sequence":
            from kernelevo.agent.builtin import sequence

            return sequence.describe(self)
        if self.kind == "rotary":
            return rotary.describe(self.extra["rotary"])
        if self.kind == "group_norm":
            return f"{groupnorm.describe(self.extra['norm'])}, {self.dtype}"
        if self.kind == "pool":
            return f"{pool.describe(self.extra['pool'])}, {self.dtype}"
        gathered = gathers.describe(self)
        if gathered is not None:
            return gathered
        if self.kind == "conv":
            return f"{conv.describe(self.extra['conv'])}, {self.dtype}"
        if self.kind == "dim_reduce":
            r = self.extra["reduction"]
            dims = f"dim {r.first}" if r.count == 1 else f"dims {r.first}-{r.first + r.count - 1}"
            return f"{r.op} over {dims}: {self.rows} outputs, each over {self.cols} values, {self.dtype}"
        if self.kind == "scan":
            s = self.extra["scan"]
            kind = " ".join(["exclusive"] * s.exclusive + ["reversed"] * s.reverse + [f"cum{s.op}"])
            masked = " of the input times its mask" if s.masked else ""
            return f"{kind}{masked} over dim {s.dim}: {self.rows} scans of {self.cols} values, {self.dtype}"
        if self.kind == "sort":
            s = self.extra["sort"]
            along = "" if s.dim == -1 else f" along dim {s.dim}"
            if s.median or s.pick is not None:
                which = "the lower median" if s.median else f"the {s.pick + 1}-th smallest value"
                return f"{s.op} ({which}){along} of {self.rows} rows of {self.cols} values, {self.dtype}"
            kept = "all values" if s.keep is None else f"the {s.keep} {'largest' if s.descending else 'smallest'}"
            order = "descending" if s.descending else "ascending"
            return f"sort ({order}, {kept}){along} of {self.rows} rows of {self.cols} values, {self.dtype}"
        if self.kind == "matmul":
            parts = []
            for st in self.extra["stages"]:
                epilogue = f" + {', '.join(st.epilogue.ops) or 'bias'}" if st.epilogue else ""
                parts.append(f"{'batched ' if st.batched else ''}GEMM {st.k}->{st.n}{epilogue}")
            tail = self.extra["stages"][-1].tail
            then = f", then a row kernel ({', '.join(tail.ops)})" if tail is not None else ""
            return f"matmul chain ({'; '.join(parts)}){then} on {self.rows} rows, {self.dtype}"
        ops = ", ".join(self.ops) if len(self.ops) <= 8 else ", ".join(self.ops[:8]) + ", ..."
        if self.kind == "pointwise":
            return f"pointwise chain of {len(self.ops)} op{'s' if len(self.ops) != 1 else ''} ({ops}); {shape}"
        span = self.program.span if self.program is not None else None
        if span is None:
            return f"row program ({ops}) over the last dimension; {shape}"
        first, count, rank = span
        dims = f"dim {first}" if count == 1 else f"dims {first}-{first + count - 1}"
        where = ", a row's values strided" if first + count < rank else ""
        return f"row program ({ops}) over {dims} of {rank}{where}; {shape}"


def _full_shapes(task: Task) -> list[tuple[int, ...]]:
    """The input shapes at the size being optimised, without allocating them."""
    module = import_task_module(task.path, task.size)
    torch.manual_seed(0)
    with torch.device("meta"):
        inputs = module.get_inputs()
    return [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]


def _full_model(task: Task) -> torch.nn.Module | None:
    """The reference model at the size being optimised, on the meta device (nothing allocated), or
    None where it cannot be built there."""
    try:
        module = import_task_module(task.path, task.size)
        with torch.device("meta"):
            return module.Model(*module.get_init_inputs()).eval()  # as the traced one is
    except Exception:  # keep the small sizes: they only describe the plan
        return None


def _full_weight_shapes(full: torch.nn.Module | None, stages: list[matmul.Stage],
                        shapes: dict[str, tuple[int, ...]]) -> None:
    """Give each stage its GEMM sizes at the size being optimised (``full``: the model built at that
    size on the meta device; ``shapes``: the inputs' full shapes by name, for weights that are inputs)."""
    if full is None:  # keep the small sizes: they only describe the plan
        return
    for st in stages:
        if st.weight_input:
            if st.weight not in shapes:
                continue
            shape: Any = shapes[st.weight]
        else:
            w: Any = full
            for part in st.weight.removeprefix("self.").split("."):
                w = getattr(w, part)
            shape = w.shape
        st.n, st.k = (int(shape[-2]), int(shape[-1])) if st.transposed else (int(shape[-1]), int(shape[-2]))


def _small(task: Task) -> tuple[torch.nn.Module, list[Any], Any]:
    module = import_task_module(task.path, "small")
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    inputs = list(module.get_inputs())
    if task.dtype:
        dtype = getattr(torch, task.dtype)
        model = model.to(dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    return model.eval(), inputs, module


def _single_call(gm: torch.fx.GraphModule, target: Any, names: tuple[str, ...],
                 first: int) -> tuple[torch.fx.Node, dict[str, Any]] | None:
    """The graph's only op if it calls ``target``, with its arguments after the first ``first`` by name."""
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    if len(calls) != 1 or calls[0].op != "call_function" or calls[0].target is not target:
        return None
    node = calls[0]
    kw = dict(node.kwargs)
    for i, name in enumerate(names):
        if len(node.args) > first + i:
            kw[name] = node.args[first + i]
    return node, kw


def _tail_choice(tail: Plan) -> dict[str, Any]:
    """The row kernel after a matmul chain: its plan and its first seed (the search tunes the GEMM)."""
    from kernelevo.agent.builtin.policy import seeds  # the policy imports this module

    strategy, params, why = seeds(tail)[0]
    return {"plan": tail, "strategy": strategy, "params": params, "why": why}


@dataclass
class Context:
    """What every plan of one task shares: the reference's ``__init__`` source and imports, the
    task's dtype and policy, and the model at the size being optimised (on the meta device)."""

    init: str
    imports: list[str]
    dtype: str
    allow_partial: bool
    full: torch.nn.Module | None
    full_graph: Callable[[], torch.fx.GraphModule | None] = lambda: None
    """The reference traced at the size being optimised (see :mod:`full_trace`), traced when first asked."""
    numbers_there: list[str] = field(default_factory=list)
    """Arithmetic given its numbers at the size being optimised (``size_constants``)."""
    resized: list[str] = field(default_factory=list)
    """Calls replayed with a number of the size being optimised: the plan holds at that size alone
    (shared by the copies a sequence makes of this context)."""
    node_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Shapes at the size being optimised of the whole graph's nodes, by name, where a part of it is
    planned (a segment's views before attention take theirs from here)."""


def recognise(task: Task) -> Plan:
    """Trace the reference and decide what the templates can generate for it: one template for the
    whole forward, or else consecutive segments that templates cover (:mod:`sequence`)."""
    model, inputs, _ = _small(task)
    try:
        shapes = _full_shapes(task)
    except Exception:  # a get_inputs that cannot run on the meta device: fall back to the small shapes
        shapes = [tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    if not shapes:
        raise CannotCover("the task has no tensor inputs")
    # the values' dtype: token ids or a mask may come first, the floating-point tensors say what is computed
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    first = next((x for x in tensors if x.is_floating_point()), tensors[0])
    dtype = task.dtype or str(first.dtype).removeprefix("torch.")
    # The constructor's constants as the file defines them at the size being optimised: the traced
    # model above is the small one, whose module holds the small sizes.
    init, imports = init_source(import_task_module(task.path, task.size).Model)
    context = Context(init=init, imports=imports, dtype=dtype, allow_partial=task.allow_partial,
                      full=_full_model(task))
    context.full_graph = functools.cache(lambda: full_trace.traced_there(context.full, inputs, shapes))
    gm = trace(model, inputs)
    safe_input_names(gm)
    size_constants.numbers_there(model, gm, context)
    given, resized = [tuple(s) for s in shapes], list(context.resized)
    try:
        return _planned(copy.deepcopy(gm), list(inputs), list(shapes), context, given, [])
    except CannotCover as first:
        # Only where nothing else covers it, an input read through views of one shape is planned as the view: the
        # code then holds at the task's shapes alone (``leading_views``).
        fold_numbers(gm, full_sizes(gm, inputs, shapes))  # sizes read for arithmetic are numbers, not reads
        views = leading_views.take_views(gm, inputs, shapes, context.full_graph())
        if not views:
            raise
        context.resized[:] = resized  # what the failed attempt replayed at the full size is not this plan's
        ShapeProp(gm).propagate(*inputs)
        try:
            return _planned(gm, inputs, shapes, context, given, views)
        except CannotCover:
            raise first from None


def _planned(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]], context: Context,
             given: list[tuple[int, ...]], views: list[LeadingView]) -> Plan:
    """The plan of the traced reference (``given``: the task's input shapes at the size being optimised;
    ``views``: inputs planned as the view forward reads them through)."""
    sizes = full_sizes(gm, inputs, shapes)
    attention.fold_repeated_heads(gm)
    if attention.decompose_wide(gm, shapes_there(gm, sizes)):
        ShapeProp(gm).propagate(*inputs)
    if sizes is not None and not sizes.all_same:  # else every value's shape there is the traced one
        sizes = dataclasses.replace(sizes, values=full_trace.matching_shapes(gm, context.full_graph()))
    sized = fold_numbers(gm, sizes)
    fold_dtypes(gm)
    if attention_by_hand.rewrite(gm, shapes_there(gm, sizes), inputs) | position_masks.rewrite(gm):  # scale a number
        ShapeProp(gm).propagate(*inputs)
    written = read_after_written(gm)
    if written is not None:
        raise CannotCover(f"`{written.name}` writes its input in place and the input is read again after it; "
                          "the templates compute every op into a new tensor")
    try:
        # the traced graph stands for the model from here on: its inputs may have been renamed
        plan = plan_graph(gm, gm, inputs, shapes, context)
    except CannotCover as whole:
        from kernelevo.agent.builtin import sequence  # it plans each segment with plan_graph

        plan = sequence.plan(gm, inputs, shapes, context, whole)
    plan.sized_for = given if sized or context.resized or views else None
    plan.leading_views, plan.numbers_there = views, context.numbers_there
    return plan


def plan_graph(model: torch.nn.Module, gm: torch.fx.GraphModule, inputs: list[Any],
               shapes: list[tuple[int, ...]], context: Context) -> Plan:
    """The plan of one traced graph (``gm``, shape-propagated on ``inputs``) with ``shapes`` the
    tensor inputs' shapes at the size being optimised; CannotCover when no template covers it."""
    if not shapes:
        raise CannotCover("no tensor input")
    full_trace.refuse_hidden_broadcast(gm, inputs, shapes)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    given = dict(zip([n for n, x in zip(names, inputs, strict=False) if isinstance(x, torch.Tensor)], shapes,
                     strict=False))
    full_trace.refuse_broadcast_that_changes(
        gm, {**full_trace.matching_shapes(gm, context.full_graph()), **context.node_shapes, **given})
    plan = _whole_op_plan(model, gm, inputs, shapes, context, names)
    if plan is None and any(matmul._linear(gm, n) is not None for n in gm.graph.nodes if n.op.startswith("call")):
        plan = _matmul_plan(model, inputs, shapes, context, names)
    if plan is None:
        plan = _reduction_plan(gm, inputs, shapes[0], context, names)
    if plan is not None:
        return plan
    try:
        return _lowered_plan(model, inputs, shapes, context, names)
    except CannotCover:
        # views the row program cannot read through (a shuffle of channels, a crop) are copied by a
        # kernel of their own; partial replacement that could not keep the convolution in torch (its
        # output is not shaped as the rest's input) has the convolution template replace all of it
        there = full_trace.counterparts(model, gm, context.full_graph())
        moved = view_copy.recognise(gm, inputs, there)
        if moved is not None:
            full_trace.replayed_there(gm, moved.replayed, there)
            context.resized.extend(moved.resized)
            rows, cols = _rows_cols(shapes[0])
            return _covering(context, names, kind="view_copy", rows=rows, cols=cols, extra={"view_copy": moved},
                             ops=moved.views + (moved.epilogue.ops if moved.epilogue else []))
        whole = _conv_plan(gm, inputs, shapes, context, names) if context.allow_partial else None
        if whole is None:
            raise
        return whole


def _rows_cols(shape: tuple[int, ...]) -> tuple[int, int]:
    """``shape`` as rows (every dimension but the last, together) and columns (the last)."""
    return (math.prod(shape[:-1]), shape[-1]) if shape else (1, 1)


def _covering(context: Context, names: list[str], **fields: Any) -> Plan:
    """A plan of the whole graph: the reference's ``__init__``, imports and dtype, the graph's inputs
    (``names``), and ``fields``; no row program unless ``fields`` gives one."""
    return Plan(init=context.init, imports=context.imports, dtype=context.dtype, inputs=names,
                **{"program": None, **fields})


def _whole_op_plan(model: torch.nn.Module, gm: torch.fx.GraphModule, inputs: list[Any],
                   shapes: list[tuple[int, ...]], context: Context, names: list[str]) -> Plan | None:
    """The plan of a template for one whole op (cross-entropy, attention, a convolution, a group or
    instance norm, a pooling), each with what it fuses after it; None when none of them covers ``gm``.
    ``shapes``: the tensor inputs' shapes at the size being optimised."""
    rows, cols = _rows_cols(shapes[0])
    ce = cross_entropy.recognise(gm, inputs)
    if ce is not None:  # the classes are dim 1: rows are every sample's positions
        logits = shapes[names.index(ce["logits"])]
        classes = logits[1]
        return _covering(context, names, kind="cross_entropy", rows=math.prod(logits) // max(classes, 1),
                         cols=classes, ops=["cross_entropy"] + ["weighted"] * bool(ce["weight"]), extra=ce)
    there = full_trace.counterparts(model, gm, context.full_graph())
    found = attention.recognise(gm, inputs, shapes, context.node_shapes, there)
    if found is not None and found.get("views"):
        full_trace.replayed_there(gm, found["views"].replayed, there)
        context.resized.extend(found["views"].resized)
    if found is not None:
        b, h, seq, d = found["views"].shapes[0] if found.get("views") else shapes[0]
        return _covering(context, names, kind="attention", rows=b * h * seq, cols=d,
                         ops=["scaled_dot_product_attention"], extra=found)
    rotated = rotary.recognise(gm, inputs)
    if rotated is not None:
        return _covering(context, names, kind="rotary", rows=rows, cols=cols, ops=["rotary"], extra={"rotary": rotated})
    # a task that allows partial replacement keeps its convolution in torch (cuDNN), the rest fused
    convolution = None if context.allow_partial else _conv_plan(gm, inputs, shapes, context, names)
    if convolution is not None:
        return convolution
    norm = groupnorm.recognise(gm, inputs)
    if norm is not None:
        return _covering(context, names, kind="group_norm", rows=rows, cols=cols,
                         ops=["group_norm" if norm.groups is not None else "instance_norm"]
                         + (norm.epilogue.ops if norm.epilogue else []), extra={"norm": norm})
    pooling = pool.recognise(gm, inputs, context.full)
    if pooling is not None:
        return _covering(context, names, kind="pool", rows=rows, cols=cols,
                         ops=[f"{pooling.op}_pool{pooling.dims}d"] + (pooling.epilogue.ops if pooling.epilogue else []),
                         extra={"pool": pooling})
    gathered = gathers.plan_fields(gm, inputs, shapes, names, context.full)
    return _covering(context, names, **gathered) if gathered is not None else None


def _conv_plan(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]], context: Context,
               names: list[str]) -> Plan | None:
    """The implicit-GEMM convolution with its epilogue fused; None when the graph is not one.
    ``shapes``: the tensor inputs' shapes at the size being optimised."""
    convolution = conv.recognise(gm, inputs)
    if convolution is None:
        return None
    rows = _rows_cols(shapes[0])[0]
    if context.full is not None:
        by_name = dict(zip(names, shapes, strict=False)) if len(shapes) == len(names) else {}
        conv.full_size(convolution, context.full, {**context.node_shapes, **by_name}, context.full_graph())
    # rows: output pixels over the batch, cols: output channels (the implicit GEMM's M and N)
    return _covering(context, names, kind="conv", rows=rows, cols=convolution.out_channels,
                     ops=[f"conv{convolution.dims}d"] + (convolution.epilogue.ops if convolution.epilogue else []),
                     extra={"conv": convolution})


def _matmul_plan(model: torch.nn.Module, inputs: list[Any], shapes: list[tuple[int, ...]], context: Context,
                 names: list[str]) -> Plan:
    """The plan of a chain of linear layers, each with its epilogue, and the row kernel after the
    last where one follows it."""
    stages = matmul.lower_chain(model, inputs)
    by_name = dict(zip(names, shapes, strict=False)) if len(shapes) == len(names) else {}
    _full_weight_shapes(context.full, stages, by_name)
    chain = by_name.get(stages[0].chain_input, shapes[0])
    rows = chain[-1] if stages[0].a_transposed else math.prod(chain[:-1])
    if stages[0].batched and stages[0].weight in by_name:  # the output's rows, over the broadcast batch
        rows = math.prod(torch.broadcast_shapes(chain[:-2], by_name[stages[0].weight][:-2])) * chain[-2]
    ops = [op for st in stages for op in (["linear"] + (st.epilogue.ops if st.epilogue else []))]
    extra: dict[str, Any] = {"stages": stages}
    tail = stages[-1].tail
    if tail is not None:
        ops += tail.ops
        extra["tail"] = _tail_choice(Plan(kind=tail.kind, program=tail, init=context.init, imports=context.imports,
                                          rows=rows, cols=stages[-1].n, dtype=stages[-1].out_dtype, ops=tail.ops,
                                          inputs=tail.inputs))
    return _covering(context, names, kind="matmul", rows=rows, cols=_rows_cols(shapes[0])[1], ops=ops, extra=extra)


def _reduction_plan(gm: torch.fx.GraphModule, inputs: list[Any], main: tuple[int, ...], context: Context,
                    names: list[str]) -> Plan | None:
    """The plan of a reduction over dimensions other than the last, or of a cumulative scan along any
    dimension; None when neither template covers ``gm``."""
    reduction = dimreduce.recognise(gm, inputs)
    if reduction is not None:
        first, last = reduction.first, reduction.first + reduction.count
        return _covering(context, names, kind="dim_reduce", rows=math.prod(main[:first]) * math.prod(main[last:]),
                         cols=math.prod(main[first:last]), ops=[reduction.op],
                         extra={"reduction": reduction, "inner": math.prod(main[last:])})
    scanned = scan.recognise(gm, inputs)
    if scanned is not None:
        d = scanned.dim
        return _covering(context, names, kind="scan", rows=math.prod(main[:d]) * math.prod(main[d + 1:]),
                         cols=main[d], ops=[f"cum{scanned.op}"] + ["reversed"] * scanned.reverse
                         + ["exclusive"] * scanned.exclusive + ["masked"] * scanned.masked,
                         extra={"scan": scanned, "inner": math.prod(main[d + 1:])})
    ordered = sort.recognise(gm, inputs)
    if ordered is not None:
        d = ordered.dim % len(main) if main else 0
        return _covering(context, names, kind="sort", rows=math.prod(main) // max(main[d], 1) if main else 1,
                         cols=main[d] if main else 1, ops=[ordered.op],
                         extra={"sort": ordered, "inner": math.prod(main[d + 1:])})
    return None


def _lowered_plan(model: torch.nn.Module, inputs: list[Any], shapes: list[tuple[int, ...]], context: Context,
                  names: list[str]) -> Plan:
    """The plan of a row program (:mod:`lower`): pointwise chains, reductions over the last
    dimension, softmax, norms; CannotCover when the lowering does not know an op."""
    program = lower(model, inputs, partial=context.allow_partial, full_shapes=shapes)
    largest = max(shapes, key=math.prod)  # the lowering reads the largest input as its main one
    main = largest if math.prod(largest) > math.prod(shapes[0]) else shapes[0]
    rows, cols = _rows_cols(main)
    if program.broadcast_from:
        # rows and columns of the output, larger than every input; or, where the output is one value per
        # row (a reduction of what views compute), of the largest value computed
        there = full_trace.largest_value if program.out_level == "row" else full_trace.output_shape
        main = there(model, inputs, shapes) or main
        rows, cols = _rows_cols(main)
    if program.span is not None:  # rows across the reduced dimensions (at the full size's shape)
        first, count, _ = program.span
        cols = math.prod(main[first:first + count])
        rows = math.prod(main) // max(cols, 1)
    if program.main_chunks > 1 and program.chunk_dim is None:
        cols //= program.main_chunks
    elif program.main_chunks > 1:
        rows //= program.main_chunks
    return _covering(context, names, kind=program.kind, program=program, rows=rows, cols=cols, ops=program.ops)
