"""How a reference's inputs and parameters enter the row program: each forward input and each tensor
attribute becomes an operand (read per element, per row, per column, per channel or as one value) and
the load node that reads it. Mixed into the lowering (``lower._Lowering``), which holds the program
being built (``operands``, ``values``, ``add``) and the main input's shape (``elem_shape``)."""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.input_views import only_viewed, view_text
from kernelevo.agent.builtin.program import CannotCover, Operand
from kernelevo.agent.builtin.rowshapes import unsqueezed_per_row
from kernelevo.agent.builtin.vocabulary import LOW_PRECISION, TRACED_CONSTANT, plain_int, reads_metadata, view_method


class OperandIntake:
    """Placeholders and attributes to operands (methods of ``lower._Lowering``)."""

    def placeholder(self, node: torch.fx.Node, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and self.main is not None:
            # a number passed to forward: a kernel argument (a float, whatever the call passes)
            operand = Operand(name=f"in{len(self.operands)}", source=node.name, kind="value")
            self.operands.append(operand)
            self.values[node.name] = self.add("load", [operand.name, 0], "col", "float32", None)
            return
        if not isinstance(value, torch.Tensor):
            raise CannotCover(f"input `{node.name}` is not a tensor")
        if self.main is not None and node.users and all(reads_metadata(u) for u in node.users):
            self.values[node.name] = node  # read for its sizes alone (``b, t = idx.size()``): no operand
            return
        if not value.is_floating_point() and (why := _not_as_numbers(node, value)) is not None:
            raise CannotCover(f"input `{node.name}` is {value.dtype}, {why}")
        if self.main is None and self.virtual is not None:
            # the output is larger than every input: rows and columns are the output's, and every
            # tensor, this one too, is read as broadcast to it
            self.main, self.main_shape = node.name, self.virtual
            self.rows_shape, self.cols = self.virtual[:-1], self.virtual[-1]
        elif self.main is None and self.span is not None:
            # rows: every position of the dimensions outside the span; columns: the span's positions
            first, count, rank = self.span
            if value.dim() != rank:
                raise CannotCover(f"input `{node.name}` has {value.dim()} dimensions, not {rank}")
            self.main, self.main_shape = node.name, tuple(value.shape)
            self.rows_shape = (*value.shape[:first], *value.shape[first + count:])
            self.cols = math.prod(value.shape[first:first + count])
        elif self.main is None:
            self._main_input(node, value)
        if self.span is None and self.main_chunks == 1 and only_viewed(node):
            # used only through views that change its strides: each view is an operand of its own
            self.values[node.name] = node
            self.viewed_inputs[node.name] = value
            return
        shape = self.logical(tuple(value.shape), result=False)
        if self.main_shape == () and math.prod(shape) == 1:
            shape = self.elem_shape()  # a one-value program (a reduction's result scaled): every input is per element
        operand = Operand(name=f"in{len(self.operands)}", source=node.name, kind="row")
        if self.main_chunks > 1 and node.name == self.main:
            operand.chunks = self.main_chunks
            self.operands.append(operand)
            parts = tuple(self.add("load", [operand.name, k], "elem", *self.rounding_of(value))
                          for k in range(self.main_chunks))
            self.values[node.name] = parts
            return
        if shape != self.elem_shape() and self.span is None and \
                unsqueezed_per_row(node, value, tuple(self.elem_shape()[:-1])):
            operand = Operand(name=f"in{len(self.operands)}", source=node.name, kind="per_row")
            self.operands.append(operand)
            self.values[node.name] = self.add("load", [operand.name, 0], "row", *self.rounding_of(value))
            self.unsqueezed.add(node.name)
            return
        span = self.channel_span(shape) if shape != self.elem_shape() else None
        if span is not None and self.broadcast_kind(value) is None:
            # constant along the last dimensions (a statistic kept per sample and channel): one value a row
            operand = self.channel_operand(f"in{len(self.operands)}", node.name, span)
            self.operands.append(operand)
            self.values[node.name] = self.add("load", [operand.name, 0], "row", *self.rounding_of(value))
            return
        if shape != self.elem_shape():
            kind = self.broadcast_kind(value) or self.view_kind(tuple(value.shape))
            if kind is None:
                raise CannotCover(f"input `{node.name}` has shape {list(shape)}, unlike the first input "
                                  f"{list(self.elem_shape())}")
            if kind == "view":
                self.view_operand(f"in{len(self.operands)}", node.name, node.name, value)
                return
            # read like a parameter: one value for all (a 0-d or one-element tensor), one per column,
            # or one per row (a [..., 1] tensor)
            operand = Operand(name=f"in{len(self.operands)}", source=node.name, kind=kind)
            self.operands.append(operand)
            level = "row" if kind == "per_row" else "col"
            self.values[node.name] = self.add("load", [operand.name, 0], level, *self.rounding_of(value))
            return
        self.operands.append(operand)
        self.values[node.name] = self.add("load", [operand.name, 0], "elem", *self.rounding_of(value))

    def _main_input(self, node: torch.fx.Node, value: torch.Tensor) -> None:
        """The main input's rows and columns: its last dimension, one chunk of it where the input is
        used only through ``chunk(n, -1)``, or one chunk's rows where through ``chunk(n, dim)`` of a
        dimension before the last."""
        self.main, self.main_shape = node.name, tuple(value.shape)
        users = list(node.users)
        chunk = [u for u in users if _is_chunk(u)]
        if chunk and len(chunk) == len(users):
            n, dim = _chunk_count(chunk[0], value.dim())
            if any(_chunk_count(c, value.dim()) != (n, dim) for c in chunk) or value.shape[dim] % n:
                raise CannotCover("chunks that differ, or of a dimension that does not divide evenly")
            self.main_chunks = n
            self.chunk_dim = None if dim == value.dim() - 1 else dim - value.dim()
        rows = list(value.shape[:-1]) if value.dim() else []
        if self.chunk_dim is not None:
            rows[self.chunk_dim + 1] //= self.main_chunks  # one chunk's rows (counted from the end, less the last)
        self.rows_shape = tuple(rows)
        self.cols = value.shape[-1] // (self.main_chunks if self.chunk_dim is None else 1) if value.dim() else 1

    def refuse_layouts_not_followed(self, output_shape: Any) -> None:
        """Operands and outputs the launch does not lay out: a per-channel or broadcast operand beside a
        chunk of a dimension before the last (their sizes would be read from the whole input, not from
        one chunk), and a one-value program whose output has dimensions (it is allocated as one value)."""
        if self.chunk_dim is not None and any(o.kind in ("channel", "view") for o in self.operands):
            raise CannotCover("a per-channel or broadcast operand beside chunks of a dimension before the last")
        if self.main_shape == () and output_shape is not None and tuple(output_shape) != ():
            raise CannotCover(f"one value computed into a tensor of shape {list(output_shape)}")

    def broadcast_kind(self, value: torch.Tensor) -> str | None:
        """How a later input of another shape than the first broadcasts against it, if as a parameter
        does: ``scalar`` (one value), ``col`` (one per column), ``per_row`` (``[..., 1]``), else None."""
        full, shape = self.elem_shape(), self.logical(tuple(value.shape), result=False)
        if len(shape) > len(full):
            return None
        if value.numel() == 1:
            return "scalar"
        if full and shape[-1] == full[-1] and math.prod(shape) == full[-1]:
            return "col"
        if full and len(shape) == len(full) and shape == (*full[:-1], 1):
            return "per_row"
        return None

    def input_view(self, node: torch.fx.Node) -> bool:
        """``node``, a stride-changing view of an input used only so, as a ``view`` operand whose source
        is the view's expression; False where ``node`` is no such view."""
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node) or source.name not in self.viewed_inputs:
            return False
        text = view_text(node, source.name)
        tm = node.meta.get("tensor_meta")
        if text is None or tm is None or self.view_kind(tuple(tm.shape)) is None:
            raise CannotCover(f"`{node.name}`, a view of input `{source.name}`, does not broadcast to the "
                              f"shape {list(self.main_shape or ())} the kernel computes")
        self.view_operand(f"in{len(self.operands)}", text, node.name, self.viewed_inputs[source.name])
        return True

    def view_kind(self, shape: tuple[int, ...]) -> str | None:
        """``view`` where ``shape`` broadcasts to the main input's (with rows laid out along the last
        dimension only), else None."""
        if self.span is not None or self.main_chunks > 1 or self.main_shape is None or len(self.main_shape) < 2:
            return None
        try:
            return "view" if torch.broadcast_shapes(shape, self.main_shape) == self.main_shape else None
        except RuntimeError:
            return None

    def view_operand(self, name: str, source: str, value_name: str, value: torch.Tensor) -> None:
        operand = Operand(name=name, source=source, kind="view", view_rank=len(self.main_shape or ()))
        self.operands.append(operand)
        self.values[value_name] = self.add("load", [operand.name, 0], "elem", *self.rounding_of(value))

    def channel_operand(self, name: str, source: str, span: tuple[int, int]) -> Operand:
        """A tensor that varies along the input's dimensions ``span`` (first, last) only."""
        rank = len(self.elem_shape())
        first, last = span
        return Operand(name=name, source=source, kind="channel", channel_dim=last - rank,
                       channel_from=None if first == last else first - rank)

    def rounding_of(self, t: torch.Tensor) -> tuple[str, str | None]:
        return str(t.dtype).removeprefix("torch."), LOW_PRECISION.get(t.dtype)

    def get_attr(self, node: torch.fx.Node) -> None:
        value = _fetch_attr(self.gm, str(node.target))
        if not isinstance(value, torch.Tensor):
            raise CannotCover(f"attribute `{node.target}` is not a tensor")
        if str(node.target).startswith(TRACED_CONSTANT):
            self.values[node.name] = traced_constant(value)
            return
        if node.users and all(viewed_attribute(user) is not None for user in node.users):
            # read only through views (``self.bias.view(1, -1, 1, 1)``): each view is the operand
            self.values[node.name] = node
            return
        self.attribute(node.name, value, f"self.{node.target}")

    def attribute(self, name: str, value: torch.Tensor, source: str) -> None:
        """A tensor of the module (``source`` in ``forward``) as an operand, by how it broadcasts."""
        span = self.channel_span(tuple(value.shape))
        shape = self.logical(tuple(value.shape), result=False)
        if span is not None:
            operand = self.channel_operand(f"p{len(self.operands)}", source, span)
            self.operands.append(operand)
            self.values[name] = self.add("load", [operand.name, 0], "row", *self.rounding_of(value))
            return
        if value.numel() == 1:  # one value for every element, read once per program
            operand = Operand(name=f"p{len(self.operands)}", source=source, kind="scalar")
            self.operands.append(operand)
            self.values[name] = self.add("load", [operand.name, 0], "col", *self.rounding_of(value))
            return
        if self.view_kind(tuple(value.shape)) and not (value.numel() == self.cols and shape[-1] == self.cols):
            self.view_operand(f"p{len(self.operands)}", source, name, value)
            return
        if value.dim() == 0 or value.numel() != self.cols or shape[-1] != self.cols:
            raise CannotCover(f"parameter `{source}` has shape {list(value.shape)}; the templates read "
                              f"parameters with one value per column ({self.cols}) or per channel")
        operand = Operand(name=f"p{len(self.operands)}", source=source, kind="col")
        self.operands.append(operand)
        self.values[name] = self.add("load", [operand.name, 0], "col", *self.rounding_of(value))


def traced_constant(value: torch.Tensor) -> float:
    """A tensor made in ``forward`` as the number it holds, where that number acts exactly as the
    tensor does: one value with no dims (a 0-d tensor does not widen a dimensioned tensor's dtype, as a
    Python number does not), of the dtype a Python number of its kind would be (float32 or int64). Each
    node's dtype is the traced reference's, so where two 0-d values meet the result's is kept too."""
    if value.dim() != 0 or value.dtype not in (torch.float32, torch.int64):
        raise CannotCover(f"a tensor made in forward of shape {list(value.shape)} and dtype "
                          f"{str(value.dtype).removeprefix('torch.')} (only one float32 or int64 value is read "
                          "as a number)")
    return float(value.item())


def _is_chunk(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "chunk") or (
        node.op == "call_function" and node.target is torch.chunk)


def _chunk_count(node: torch.fx.Node, rank: int) -> tuple[int, int]:
    """(chunks, dim) of a ``chunk`` call, the dim counted from the start."""
    n = node.kwargs.get("chunks", node.args[1] if len(node.args) > 1 else None)
    dim = node.kwargs.get("dim", node.args[2] if len(node.args) > 2 else 0)
    if not isinstance(n, int) or not isinstance(dim, int) or rank == 0 or not -rank <= dim < rank:
        raise CannotCover("a chunk the templates do not follow")
    return n, dim % rank


def viewed_attribute(node: torch.fx.Node) -> tuple[str, list[Any]] | None:
    """``node`` as a view of a module's tensor with plain-number arguments: (the method, its
    arguments); else None."""
    if not node.args or not isinstance(node.args[0], torch.fx.Node) or node.args[0].op != "get_attr":
        return None
    if node.op == "call_function" and node.target is operator.getitem and not node.kwargs:
        # ``self.slopes[:, None, None]``: dimensions of one added, none sliced
        return ("getitem", [node.args[1]]) if index_text(node.args[1]) is not None else None
    method = view_method(node)
    if method is None:
        return None
    rest = list(node.args[1:])
    if node.kwargs or not all(plain_int(a) or (isinstance(a, (tuple, list)) and all(map(plain_int, a)))
                              for a in rest):
        return None
    return str(method), rest


def index_text(index: Any) -> str | None:
    """``index`` as written in Python, where it only adds dimensions of one or keeps whole ones
    (``[:, None]``, ``[None, ...]``); None for any other index."""
    items = index if isinstance(index, tuple) else (index,)
    if not items or not all(i is None or i is Ellipsis or i == slice(None) for i in items):
        return None
    return ", ".join("None" if i is None else "..." if i is Ellipsis else ":" for i in items)


def view_of_attribute(gm: torch.nn.Module, node: torch.fx.Node) -> tuple[torch.Tensor, str]:
    """The tensor a :func:`viewed_attribute` node gives, and its expression in ``forward``."""
    method, rest = viewed_attribute(node) or ("", [])
    target = str(node.args[0].target)
    if method == "getitem":
        return _fetch_attr(gm, target)[rest[0]], f"self.{target}[{index_text(rest[0])}]"
    words = ", ".join(repr(tuple(a)) if isinstance(a, list) else repr(a) for a in rest)
    return getattr(_fetch_attr(gm, target), method)(*rest), f"self.{target}.{method}({words})"


def _fetch_attr(gm: torch.nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


INDEX_MAX = 1 << 24
"""Integers up to this magnitude are exact in fp32, the type every loaded value is computed in."""


def _not_as_numbers(node: torch.fx.Node, value: torch.Tensor) -> str | None:
    """Why a bool or integer input cannot be read as fp32 numbers, or None where it can: every use
    makes a floating or boolean tensor (a cast to float, a mask, a comparison, an integer times a
    float) and its values are exact in fp32. Integer arithmetic (``x // 3``, a sum of integers) is not
    what fp32 computes. (The values are those of the traced inputs: an index range that grows with
    the size is checked at this size only.)"""
    if value.dtype not in (torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        return "which the templates do not read"
    if value.dtype != torch.bool and value.numel() and int(value.abs().max()) >= INDEX_MAX:
        return "with values past 2^24, which fp32 does not hold exactly"
    return _integer_arithmetic(node) if node.users else "not used"


EXACT_INTEGER_FUNCTIONS = {torch.clamp, torch.clip, torch.clamp_min, torch.clamp_max, torch.abs, torch.neg,
                           operator.neg, abs}
EXACT_INTEGER_METHODS = {"clamp", "clip", "clamp_min", "clamp_max", "abs", "neg"}
"""Integer ops whose result fp32 computes exactly when the input and the bounds are below 2^24 (a count
clamped to at least 1 before it divides)."""


def _exact_in_fp32(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Whether ``user`` is one of :data:`EXACT_INTEGER_FUNCTIONS` on ``node`` with integer bounds below
    2^24 (its values then stay integers fp32 holds)."""
    takes = (user.op == "call_function" and user.target in EXACT_INTEGER_FUNCTIONS) or (
        user.op == "call_method" and user.target in EXACT_INTEGER_METHODS)
    if not takes or not user.args or user.args[0] is not node:
        return False
    bounds = [*user.args[1:], *user.kwargs.values()]
    return all(b is None or (plain_int(b) and abs(b) < INDEX_MAX) for b in bounds)


def _integer_arithmetic(node: torch.fx.Node) -> str | None:
    """Why a use of ``node`` (or of a view of it: ``mask.unsqueeze(-1).float()``, or of an integer op
    fp32 computes exactly: ``count.clamp(min=1).float()``) computes in integers."""
    for user in node.users:
        if reads_metadata(user):
            continue
        if (view_method(user) is not None and user.args and user.args[0] is node) or _exact_in_fp32(user, node):
            why = _integer_arithmetic(user)
            if why is not None:
                return why
            continue
        dtype = getattr(user.meta.get("tensor_meta"), "dtype", None)
        if dtype is None or not (dtype.is_floating_point or dtype == torch.bool):
            return "used in integer arithmetic (read as fp32 only where every use makes a float or a mask)"
    return None

