"""Lower a reference's ``forward`` (traced with torch.fx) to a row program: the IR the templates compile.

A row program computes one output from tensors viewed as ``[rows, cols]`` (``cols`` is the last
dimension): every value is per element (``elem``), per row (``row``: a reduction over the last
dimension), per column (``col``: a parameter of shape ``[cols]``) or a constant. Pointwise chains of
any length, reductions over the last dimension, softmax, log-softmax, LayerNorm, RMSNorm and
variance all lower to it, whatever the reference's names; what does not lower raises
:class:`CannotCover` with the reason. Reductions over other adjacent dimensions (a norm over the
channels of ``[N, C, H, W]``, a LayerNorm over the last three) lower to the same program laid out
with rows across them (``Program.span``): the lowering notices the first such reduction and starts
again in that layout.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin import parametrized, size_tracing
from kernelevo.agent.builtin.decompose import decompose_fully
from kernelevo.agent.builtin.input_views import only_viewed
from kernelevo.agent.builtin.layout import Layout, SpanNeeded
from kernelevo.agent.builtin.lower_calls import IGNORED, CallLowering, _Lowered, _number
from kernelevo.agent.builtin.lower_operands import OperandIntake
from kernelevo.agent.builtin.lower_positions import PositionLowering, Positions
from kernelevo.agent.builtin.program import N_COLS, CannotCover, Node, Operand, Program
from kernelevo.agent.builtin.rowshapes import ONE_VALUE_REDUCTIONS, over_one_value
from kernelevo.agent.builtin.shape_reads import FullSizes, Varying
from kernelevo.agent.builtin.vocabulary import LOW_PRECISION


def trace(model: nn.Module, inputs: list[Any]) -> torch.fx.GraphModule:
    """``model`` traced with torch.fx, each node annotated with its shape and dtype."""
    try:
        gm = size_tracing.traced(model)
        given_out = next((n for n in gm.graph.nodes if isinstance(n.kwargs.get("out"), torch.fx.Node)), None)
        if given_out is None:
            ShapeProp(gm).propagate(*inputs)
            decompose_fully(gm, lambda: ShapeProp(gm).propagate(*inputs))
    except Exception as exc:
        raise CannotCover(f"the reference could not be traced with torch.fx ({type(exc).__name__}: {exc})") from None
    assigned = next((n for n in gm.graph.nodes if n.op == "call_function" and n.target is operator.setitem), None)
    if assigned is not None:  # what item_assignment could not make plain: a view's, an input's, a tensor's values
        target = getattr(assigned.args[0], "name", "?")
        raise CannotCover(f"`{assigned.name}` assigns into `{target}`, a view, an input or a value read through "
                          "another name (covered: a number through ints and slices into a value made in forward)")
    parametrized.refuse_other_parametrizations(gm)
    if given_out is not None:  # a call whose value nothing reads: the passes would drop it, and its write
        raise CannotCover(f"`{given_out.name}` writes into `{given_out.kwargs['out'].name}` through `out=`; the "
                          "templates compute every op into a new tensor")
    return gm


def _one_value(node: torch.fx.Node) -> bool:
    shape = getattr(node.meta.get("tensor_meta"), "shape", None)
    return shape is not None and math.prod(shape) == 1


def full_sizes(gm: torch.fx.GraphModule, inputs: list[Any],
                shapes: list[tuple[int, ...]] | None) -> FullSizes | None:
    """The inputs' shapes at the size being optimised, by placeholder name (None: not known)."""
    tensors = [(n.name, x) for n, x in zip([n for n in gm.graph.nodes if n.op == "placeholder"], inputs,
                                            strict=False) if isinstance(x, torch.Tensor)]
    if shapes is None or len(shapes) != len(tensors):
        return None
    there = {name: tuple(shape) for (name, _), shape in zip(tensors, shapes, strict=True)}
    return FullSizes(inputs=there, all_same=all(tuple(x.shape) == there[name] for name, x in tensors))


class _Lowering(OperandIntake, PositionLowering, CallLowering, Layout):
    """The program being built: its operands and nodes, and how values map to them."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: list[Any], partial: bool = False,
                 span: tuple[int, int, int] | None = None, full: FullSizes | None = None) -> None:
        self.full = full
        """What is known of the sizes being optimised (see :mod:`shape_reads`)."""
        self.span = span
        self.viewed_inputs: dict[str, torch.Tensor] = {}
        """Inputs used only through views that change strides (``input_views``), by name."""
        self.virtual: tuple[int, ...] | None = None
        """The output's shape, where it is larger than every input's (``Program.broadcast_from``)."""
        self.main_shape: tuple[int, ...] | None = None
        self.partial = partial
        self.torch_prefix: list[tuple[str, str]] = []
        self.torch_sources: dict[str, str] = {}
        self.gm = gm
        self.inputs = inputs
        self.nodes: list[Node] = []
        self.operands: list[Operand] = []
        self.values: dict[str, Any] = {}
        """fx node name -> our node name, a Python number, or a tuple of them (chunk, max)."""
        self.ops: list[str] = []
        self.main: str | None = None
        self.main_chunks = 1
        self.chunk_dim: int | None = None
        """Where the main input is chunked along a dimension before the last (``Program.chunk_dim``)."""
        self.rows_shape: tuple[int, ...] | None = None
        self.cols: int | None = None
        self.position_bounds: dict[str, float] = {}
        """Program nodes computed from positions (``lower_positions``), with the largest magnitude their
        integer values can reach."""
        self.positional: set[str] = set()
        """Those of them whose tensors are smaller than the program's shape."""

    # -- helpers ---------------------------------------------------------------------------------
    def add(self, op: str, args: list[Any], level: str, dtype: str = "float32", round_to: str | None = None) -> str:
        name = f"v{len(self.nodes)}"
        self.nodes.append(Node(name=name, op=op, args=args, level=level, dtype=dtype, round_to=round_to))
        return name

    def level(self, value: Any) -> str:
        if isinstance(value, (int, float)):
            return "const"
        return next(n.level for n in self.nodes if n.name == value)

    def arg(self, a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            if a.name not in self.values:
                raise CannotCover(f"`{a.name}` is not something the templates compute")
            value = self.values[a.name]
            if isinstance(value, tuple):
                raise CannotCover(f"`{a.name}` is a tuple; only its elements can be used")
            if value is IGNORED:
                raise CannotCover(f"`{a.name}` (a tensor's dtype, shape or device) is used as a value")
            if isinstance(value, torch.fx.Node):
                raise CannotCover(f"`{a.name}` is read through a view the templates do not follow")
            if isinstance(value, Positions):
                return self.place(value, a.name)
            if isinstance(value, Varying):
                raise CannotCover(f"`{a.name}` is computed from a size read in forward ({value.value} as "
                                  "traced) that may differ at the size being optimised; as a number in a "
                                  "kernel it is not covered")
            return value
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise CannotCover(f"argument {a!r} is neither a tensor nor a number")
        return float(a)

    def meta(self, node: torch.fx.Node) -> tuple[tuple[int, ...], torch.dtype] | None:
        """The node's shape, as the ``[rows, cols]`` layout sees it (:meth:`logical`), and dtype."""
        tm = node.meta.get("tensor_meta")
        if tm is None or not hasattr(tm, "shape"):
            return None
        return self.logical(tuple(tm.shape)), tm.dtype

    def elem_shape(self) -> tuple[int, ...]:
        assert self.rows_shape is not None and self.cols is not None
        return (*self.rows_shape, self.cols)

    def classify(self, node: torch.fx.Node) -> str:
        """elem, row (keepdim), rowflat (reduced dim dropped) or col, from the node's shape."""
        meta = self.meta(node)
        if meta is None:
            raise CannotCover(f"`{node.name}` has no tensor shape")
        shape = meta[0]
        if shape == self.elem_shape() or (self.main_shape == () and math.prod(shape) == 1):
            return "elem"  # (a one-value input, a reduction's result: every one-value tensor is per element)
        if shape == (*self.rows_shape, 1):
            return "row"
        if shape == tuple(self.rows_shape) and len(self.rows_shape) > 0:
            return "rowflat"
        if len(shape) >= 1 and shape[-1] == self.cols and math.prod(shape) == self.cols:
            return "col"
        if self.channel_span(shape) is not None:
            return "row"
        if math.prod(shape) == 1 and node.all_input_nodes and all(_one_value(a) for a in node.all_input_nodes):
            return "col"  # one value computed from one value (``self.logit_scale.exp()``): the same in every column
        raise CannotCover(f"`{node.name}` has shape {list(shape)}; the templates handle tensors shaped like the "
                          f"input {list(self.elem_shape())}, one value per row, or one per column")

    def rounding(self, node: torch.fx.Node) -> tuple[str, str | None]:
        meta = self.meta(node)
        dtype = meta[1] if meta else torch.float32
        low = LOW_PRECISION.get(dtype)
        name = str(dtype).removeprefix("torch.")
        if not dtype.is_floating_point and dtype not in (torch.int64, torch.bool):
            raise CannotCover(f"`{node.name}` is {name}; the templates compute floating-point values")
        if dtype == torch.float64:
            raise CannotCover("float64 is not covered by the templates")
        return name, low

    def combine_levels(self, levels: list[str], node: torch.fx.Node) -> str:
        kinds = {lv for lv in levels if lv != "const"}
        if "elem" in kinds or {"row", "col"} <= kinds:  # a row's value with a column's: one per element
            return "elem"
        return kinds.pop() if kinds else "const"

    # -- lowering --------------------------------------------------------------------------------
    def elementwise(self, node: torch.fx.Node, op: str, args: list[Any]) -> None:
        values = [self.arg(a) for a in args]
        level = self.combine_levels([self.level(v) for v in values], node)
        if self.positional_elementwise(node, op, values, level):
            return
        expect = self.classify(node)
        if level == "const":
            raise CannotCover(f"`{node.name}` computes on constants only")
        if expect == "elem" and level == "row" and self.cols == 1:
            expect = "row"  # rows of one column: a value per row is one per element
        if expect == "col" and level == "row" and self.rows_shape == ():
            expect = "row"  # every dimension reduced: the one value is the one row's
        if {"row": "row", "rowflat": "row"}.get(expect, expect) != level:
            raise CannotCover(f"`{node.name}` broadcasts in a way the templates do not follow")
        flat = [v for v in values if isinstance(v, str) and v in self.rowflat]
        if flat and (expect != "rowflat" or len(flat) != len([v for v in values if isinstance(v, str)])):
            # A reduced value without keepdim broadcasts along the last dimension in torch, not per row.
            raise CannotCover(f"`{node.name}` combines a reduction without keepdim with other tensors")
        dtype, low = self.rounding(node)
        self.values[node.name] = self.add(op, values, level, dtype, low)
        if expect == "rowflat":
            self.rowflat.add(self.values[node.name])
        self.ops.append(op)

    def reduce(self, node: torch.fx.Node, kind: str, x: Any, dim: Any, keepdim: bool, extra: dict[str, Any]) -> None:
        src = self.whole(self.arg(x), node)
        if self.level(src) == "row" and src not in self.rowflat and kind in ONE_VALUE_REDUCTIONS and \
                self.span is None and over_one_value(self.meta(x) if isinstance(x, torch.fx.Node) else None, dim):
            # a row's value reduced again over its kept dim of one: the value itself (or its magnitude),
            # as a node of its own, so that dropping the dim does not change how ``src`` broadcasts
            self.values[node.name] = result = self.add("abs" if kind == "norm" else "identity", [src], "row",
                                                       *self.rounding(node))
            if not keepdim:
                self.rowflat.add(result)
            self.ops.append(kind)
            return
        if self.level(src) != "elem":
            raise CannotCover(f"`{node.name}` reduces something that is not per element")
        self.require_span(dim, f"`{kind}` over dim {dim}")
        self.ops.append(kind)
        meta = self.meta(node)
        out_dtype, low = self.rounding(node) if meta else ("float32", None)
        cols = N_COLS
        if kind in ("sum", "amax", "amin", "argmax", "argmin"):
            op = {"amax": "max", "amin": "min"}.get(kind, kind)
            result = self.add(op, [src], "row", out_dtype, low if op not in ("argmax", "argmin") else None)
        elif kind == "mean":
            total = self.add("sum", [src], "row")
            result = self.add("mean_of", [total, cols], "row", out_dtype, low)
        elif kind in ("var", "std"):
            correction = extra.get("correction")
            if correction is None:
                correction = 1.0 if extra.get("unbiased", True) else 0.0
            mean = self.add("mean_of", [self.add("sum", [src], "row"), cols], "row")
            centred = self.add("sub", [src, mean], "elem")
            squares = self.add("sum", [self.add("mul", [centred, centred], "elem")], "row")
            correction = _number(correction, "the correction")
            if kind == "var":
                result = self.add("div", [squares, f"(n_cols - {correction!r})"], "row", out_dtype, low)
            else:
                result = self.add("sqrt", [self.add("div", [squares, f"(n_cols - {correction!r})"], "row")], "row",
                                  out_dtype, low)
        elif kind == "norm":
            magnitude = self.add("abs", [src], "elem")
            if extra["p"] == 2.0:
                result = self.add("sqrt", [self.add("sum", [self.add("mul", [src, src], "elem")], "row")], "row",
                                  out_dtype, low)
            elif extra["p"] == 1.0:
                result = self.add("sum", [magnitude], "row", out_dtype, low)
            else:
                result = self.add("max", [magnitude], "row", out_dtype, low)
        elif kind == "logsumexp":
            # max + log(sum(exp(x - max))): no exp overflows; an infinite max is taken as 0, as torch
            # does, so that a row of -inf gives -inf rather than NaN
            top = self.add("inf_to_zero", [self.add("max", [src], "row")], "row")
            total = self.add("sum", [self.add("exp", [self.add("sub", [src, top], "elem")], "elem")], "row")
            result = self.add("add", [self.add("log", [total], "row"), top], "row", out_dtype, low)
        elif kind in ("max", "min"):
            # torch.max(x, dim) -> (values, indices)
            values = self.add(kind, [src], "row", out_dtype, low)
            indices = self.add("arg" + kind, [src], "row", "int64")
            self.values[node.name] = (values, indices)
            if not keepdim:
                self.rowflat.update((values, indices))
            return
        else:
            raise CannotCover(f"no template for the reduction `{kind}`")
        self.values[node.name] = result
        if not keepdim and self.rows_shape:  # (over every dimension the result is one value: no broadcast)
            self.rowflat.add(result)

    def composite(self, node: torch.fx.Node, kind: str, x: Any, extra: dict[str, Any]) -> None:
        src = self.whole(self.arg(x), node)
        if self.level(src) != "elem":
            raise CannotCover(f"`{kind}` of something that is not per element")
        self.ops.append(kind)
        dtype, low = self.rounding(node)
        cols = N_COLS
        if kind in ("softmax", "log_softmax"):
            self.require_span(extra.get("dim"), f"{kind} over dim {extra.get('dim')}")
            if extra.get("dtype") is not None:
                raise CannotCover(f"{kind} with a dtype argument is not covered")
            m = self.add("max", [src], "row")
            z = self.add("sub", [src, m], "elem")
            e = self.add("exp", [z], "elem")
            s = self.add("sum", [e], "row")
            if kind == "softmax":
                out = self.add("div", [e, s], "elem", dtype, low)
            else:
                out = self.add("sub", [z, self.add("log", [s], "row")], "elem", dtype, low)
        else:  # layer_norm, rms_norm
            shape = extra.get("normalized_shape")
            if shape is not None:
                shape = tuple(shape) if isinstance(shape, (list, tuple, torch.Size)) else (shape,)
                full = self.main_shape or ()
                if not 0 < len(shape) <= len(full) or shape != tuple(full[len(full) - len(shape):]):
                    raise CannotCover(f"{kind} over {list(shape)}, which are not the input's last dimensions")
                self.require_span(list(range(-len(shape), 0)), f"{kind} over {list(shape)}")
            elif self.span is not None:
                raise CannotCover(f"{kind} without a normalized shape in a program over other dimensions")
            eps = extra.get("eps")
            if eps is None:
                eps = torch.finfo(torch.float32).eps if kind == "rms_norm" else 1e-5
            if kind == "layer_norm":
                mean = self.add("div", [self.add("sum", [src], "row"), cols], "row")
                centred = self.add("sub", [src, mean], "elem")
                var = self.add("div", [self.add("sum", [self.add("mul", [centred, centred], "elem")], "row"), cols],
                               "row")
            else:
                centred = src
                var = self.add("div", [self.add("sum", [self.add("mul", [src, src], "elem")], "row"), cols], "row")
            scale = self.add("rsqrt", [self.add("add", [var, _number(eps, 'eps')], "row")], "row")
            out = self.add("mul", [centred, scale], "elem")
            for what, op in (("weight", "mul"), ("bias", "add")):
                param = extra.get(what)
                if param is None:
                    continue
                value = param.name if isinstance(param, _Lowered) else self.arg(param)
                if self.level(value) != "col":
                    raise CannotCover(f"{kind}'s {what} is not one value per column")
                out = self.add(op, [out, value], "elem")
            self.nodes[-1].round_to = low
            self.nodes[-1].dtype = dtype
        self.values[node.name] = out

    def batch_norm(self, node: torch.fx.Node, sub: nn.Module, x: Any) -> None:
        """BatchNorm at inference (the judge runs the reference in eval mode): pointwise, with the
        running statistics and the affine parameters read per channel (dimension 1)."""
        src = self.whole(self.arg(x), node)
        rank = len(self.elem_shape())
        if self.level(src) != "elem" or rank < 2 or self.span is not None:
            raise CannotCover(f"`{node.name}`: BatchNorm of something that is not per element")
        if sub.training or sub.running_mean is None:
            raise CannotCover("BatchNorm with batch statistics (training mode or no running statistics)")
        self.ops.append("batch_norm")
        dtype, low = self.rounding(node)

        def per_channel(what: str) -> str:
            value = getattr(sub, what)
            source = f"self.{node.target}.{what}"
            if rank == 2:  # [N, C]: the channel is the last dimension
                operand = Operand(name=f"p{len(self.operands)}", source=source, kind="col")
            else:
                operand = Operand(name=f"p{len(self.operands)}", source=source, kind="channel",
                                  channel_dim=1 - rank)
            self.operands.append(operand)
            return self.add("load", [operand.name, 0], "col" if rank == 2 else "row", *self.rounding_of(value))

        # eager normalises in fp32 and rounds once, at the end
        level = "col" if rank == 2 else "row"
        scale = self.add("rsqrt", [self.add("add", [per_channel("running_var"), float(sub.eps)], level)], level)
        out = self.add("mul", [self.add("sub", [src, per_channel("running_mean")], "elem"), scale], "elem")
        if sub.weight is not None:
            out = self.add("mul", [out, per_channel("weight")], "elem")
            out = self.add("add", [out, per_channel("bias")], "elem")
        self.nodes[-1].round_to, self.nodes[-1].dtype = low, dtype
        self.values[node.name] = out

    def prelu(self, node: torch.fx.Node, sub: nn.PReLU, x: Any) -> None:
        """``nn.PReLU``: ``x`` where it is above zero, else its slope times ``x``; one slope for every
        element, or one per channel (dimension 1, the last of a 2-D input)."""
        src = self.whole(self.arg(x), node)
        rank = len(self.elem_shape())
        if self.level(src) != "elem":
            raise CannotCover(f"`{node.name}`: PReLU of something that is not per element")
        slopes = sub.weight.detach()
        source = f"self.{node.target}.weight"
        if slopes.numel() > 1 and rank > 2:  # [C] read along dimension 1: seen as [C, 1, ..., 1]
            slopes = slopes.reshape(-1, *([1] * (rank - 2)))
            source += f".view(-1, {', '.join(['1'] * (rank - 2))})"
        self.attribute(f"{node.name}_slope", slopes, source)
        self.ops.append("prelu")
        dtype, low = self.rounding(node)
        sloped = self.add("mul", [self.values[f"{node.name}_slope"], src], "elem")
        out = self.add("where", [self.add("gt", [src, 0.0], "elem"), src, sloped], "elem")
        self.nodes[-1].round_to, self.nodes[-1].dtype = low, dtype
        self.values[node.name] = out

    def lower(self) -> Program:
        self.rowflat: set[str] = set()
        self.unsqueezed: set[str] = set()
        """Inputs read per row whose ``unsqueeze(-1)`` views are the same per-row value."""
        # The largest input first: its shape is the one the others broadcast against (a norm computed
        # before may come first in the graph and hold one value).
        given = [(n, v) for n, v in zip([n for n in self.gm.graph.nodes if n.op == "placeholder"], self.inputs,
                                        strict=False)]
        sizes = [v.numel() if isinstance(v, torch.Tensor) else -1 for _, v in given]
        if given and sizes[0] < max(sizes):
            given.insert(0, given.pop(sizes.index(max(sizes))))
        self.virtual = self._broadcast_output(max(sizes, default=-1),
                                              tuple(given[0][1].shape) if given and sizes[0] >= 0 else None,
                                              viewed=bool(given) and sizes[0] >= 0 and only_viewed(given[0][0]))
        for node, value in given:
            self.placeholder(node, value)
        output = None
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                continue
            elif node.op == "get_attr":
                self.get_attr(node)
            elif node.op == "output":
                output = node.args[0]
            else:
                try:
                    self.call(node)
                except SpanNeeded:
                    raise
                except CannotCover:
                    if not self.partial or not self.keep_in_torch(node):
                        raise
        if not isinstance(output, torch.fx.Node) or not isinstance(self.values.get(output.name), str):
            raise CannotCover("the reference returns something other than one tensor")
        out = self.values[output.name]
        if out in self.positional:
            raise CannotCover("the reference returns positions made with arange, smaller than its input")
        out_node = self.node(out)
        if out_node.level not in ("elem", "row"):
            raise CannotCover("the reference's output is not computed per element or per row")
        if out_node.op == "load":
            raise CannotCover("the reference returns an input unchanged")
        shape = getattr(output.meta.get("tensor_meta"), "shape", None)
        self.refuse_layouts_not_followed(shape)
        if out_node.level == "elem" and shape is not None and self.main_shape is not None and \
                math.prod(shape) * max(self.main_chunks, 1) != math.prod(self.main_shape):
            # an input larger than the output, read for its dtype or size alone, would set the kernel's extent
            raise CannotCover(f"the output ({list(shape)}) is not of the shape the kernel walks "
                              f"({list(self.main_shape)}, its largest input's)")
        assert self.main is not None
        keepdim = out not in self.rowflat
        if not self.rows_shape and shape is not None:
            keepdim = len(shape) > 0  # every dimension reduced: kept as ones, or none, as the reference's output
        return Program(operands=self.operands, nodes=self.nodes, output=out, out_level=out_node.level,
                       out_dtype=out_node.dtype, out_keepdim=keepdim, main=self.main,
                       main_chunks=self.main_chunks, chunk_dim=self.chunk_dim, one_value=self.main_shape == (),
                       inputs=[n.name for n in self.gm.graph.nodes if n.op == "placeholder"], ops=self.ops,
                       torch_prefix=self.torch_prefix, span=self.span,
                       broadcast_from=[o.source for o in self.operands if o.kind != "value"] if self.virtual else [])

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def keep_in_torch(self, node: torch.fx.Node) -> bool:
        """Partial replacement: leave a module the templates cannot generate (a convolution, say) in
        torch, if it reads only forward inputs or other such modules; the kernel then reads its result."""
        if node.op != "call_module" or node.kwargs:
            return False
        sources = {o.source for o in self.operands if o.kind == "row"}
        names = []
        for a in node.args:
            if not isinstance(a, torch.fx.Node):
                return False
            source = self.torch_sources.get(a.name, a.name)
            if source not in sources:
                return False
            names.append(source)
        meta = self.meta(node)
        if meta is None or meta[0] != self.elem_shape() or not meta[1].is_floating_point:
            return False
        name = f"t{len(self.torch_prefix)}"
        self.torch_prefix.append((name, f"self.{node.target}({', '.join(names)})"))
        self.torch_sources[node.name] = name
        operand = Operand(name=f"in{len(self.operands)}", source=name, kind="row")
        self.operands.append(operand)
        dtype = str(meta[1]).removeprefix("torch.")
        self.values[node.name] = self.add("load", [operand.name, 0], "elem", dtype, LOW_PRECISION.get(meta[1]))
        self.ops.append(f"{node.target} (torch)")
        return True


def lower(model: nn.Module, inputs: list[Any], partial: bool = False,
          full_shapes: list[tuple[int, ...]] | None = None) -> Program:
    """The row program of ``model`` on ``inputs`` (small inputs are enough: only shapes matter).
    With ``partial`` (the task allows it), modules the templates cannot generate may stay in torch.
    ``full_shapes``: the tensor inputs' shapes at the size being optimised, where known (sizes read
    in ``forward`` may be used as numbers only where they are the same there)."""
    gm = trace(model, inputs)
    full = full_sizes(gm, inputs, full_shapes)
    try:
        return _Lowering(gm, inputs, partial, full=full).lower()
    except SpanNeeded as needed:  # laid out again with rows across the reduced dimensions
        try:
            return _Lowering(gm, inputs, partial, span=needed.span, full=full).lower()
        except SpanNeeded as again:
            raise CannotCover(str(again)) from None
