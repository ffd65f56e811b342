"""Positions made in ``forward`` with ``torch.arange``: computed in the kernel, never read from memory.

Real code builds position-dependent values from sizes read in ``forward``: an ALiBi bias
``pos[None, :] - pos[:, None]``, a causal mask ``pos[None, :] > pos[:, None]``, a ramp ``pos / t``.
Such a tensor depends on no input, only on where an element lies, so the kernel computes it from
the element's index along one dimension (the column offsets, or a row's index in a dimension
before the last) and nothing is allocated or read.

An ``arange`` is carried as :class:`Positions` through views that only add dimensions of one and
through casts, until arithmetic uses it; it is then placed along the dimension of the program's
shape its one non-unit dimension lands on, and must span that dimension exactly. Integer positions
are computed as fp32 values, exact while every value stays below 2**24; arithmetic that could leave
that range or that differs in integers (products of positions, floor division) is refused.
Mixed into the lowering (``lower._Lowering``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.lower_operands import index_text
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.shape_reads import Varying
from kernelevo.agent.builtin.vocabulary import LOW_PRECISION

EXACT = 2 ** 24
"""Integers of at most this magnitude are exact in fp32."""
INTEGER_SAFE_OPS = {"add", "sub", "neg", "abs", "maximum", "minimum", "clamp", "where", "identity"}
"""Integer arithmetic on positions that fp32 computes exactly while the values stay below ``EXACT``."""
ADDING_OPS = {"add", "sub"}
VIEW_METHODS = {"unsqueeze", "view", "reshape", "float", "to", "type", "contiguous", "clone", "detach"}


@dataclass(frozen=True)
class Positions:
    """``start + step * k`` for k in ``range(length)``, viewed as ``shape`` (one non-unit dimension)."""

    length: int
    start: float
    step: float
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def ends(self) -> tuple[float, float]:
        """The smallest and the largest position."""
        last = self.start + self.step * (self.length - 1)
        return min(self.start, last), max(self.start, last)

    @property
    def bound(self) -> float:
        """A bound on the positions' magnitude (one step past the last)."""
        return abs(self.start) + abs(self.step) * self.length


def _meta(node: torch.fx.Node) -> tuple[tuple[int, ...], torch.dtype] | None:
    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        return None
    return tuple(int(s) for s in tm.shape), tm.dtype


class PositionLowering:
    """``torch.arange`` and its views to :class:`Positions`; placed as program nodes where used
    (methods of ``lower._Lowering``)."""

    def position_call(self, node: torch.fx.Node, target: Any, name: str, method: bool, args: list[Any],
                      kwargs: dict[str, Any]) -> bool:
        """``node`` as positions (an ``arange``, or a view or cast of positions); False for any other call."""
        if not method and target is torch.arange:
            self.values[node.name] = self._arange(node, args, kwargs)
            return True
        source = args[0] if args else None
        value = self.values.get(source.name) if isinstance(source, torch.fx.Node) else None
        if not isinstance(value, Positions):
            return False
        view = (target is operator.getitem and index_text(args[1]) is not None) or (method and name in VIEW_METHODS)
        meta = _meta(node)
        if not view or meta is None:
            return False  # arithmetic on positions: placed by ``arg`` where it is used
        shape, dtype = meta
        if sorted(s for s in shape if s != 1) != sorted(s for s in value.shape if s != 1):
            raise CannotCover(f"`{node.name}` reshapes positions made with arange ({list(value.shape)} to "
                              f"{list(shape)})")
        lowest, highest = value.ends
        if not holds(dtype, lowest, highest):
            raise CannotCover(f"`{node.name}` casts positions from {lowest:.0f} to {highest:.0f} to {dtype}, "
                              "which does not hold them as they are")
        self.values[node.name] = replace(value, shape=shape, dtype=dtype)
        return True

    def _arange(self, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any]) -> Positions:
        meta = _meta(node)
        if meta is None or len(meta[0]) != 1:
            raise CannotCover(f"`{node.name}` (arange) has no traced shape")
        names = ("start", "end", "step") if len(args) >= 2 else ("end",)
        bound = dict(zip(names, args, strict=False))
        bound.update({k: kwargs[k] for k in ("start", "end", "step") if k in kwargs})
        if "end" not in bound:
            raise CannotCover(f"`{node.name}` (arange) has no end")
        self._position_number(bound["end"], node, end=True)  # the length is the traced shape's
        start = self._position_number(bound.get("start", 0), node)
        step = self._position_number(bound.get("step", 1), node)
        positions = Positions(length=meta[0][0], start=start, step=step, shape=meta[0], dtype=meta[1])
        if positions.bound > EXACT / 4 and not meta[1].is_floating_point:
            raise CannotCover(f"`{node.name}` makes positions up to {positions.bound:.0f}; integers are computed "
                              "exactly in fp32 only below 2**22")
        return positions

    def _position_number(self, value: Any, node: torch.fx.Node, end: bool = False) -> float:
        """A number ``arange`` takes. Its end may be a size read in ``forward`` that differs at the
        size being optimised: only the length follows from it, and the placement checks that."""
        if isinstance(value, torch.fx.Node):
            value = self.values.get(value.name)
        if isinstance(value, Varying) and end:
            return float(value.value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CannotCover(f"`{node.name}` (arange) takes {value!r}, not a number known when the kernel is written")
        return float(value)

    def place(self, positions: Positions, name: str) -> Any:
        """The program node of ``positions`` where arithmetic uses them: the element's index along the
        dimension the positions span, times ``step`` plus ``start``."""
        if positions.length == 1:
            return positions.start
        self._rows_along_the_last_dim(name)
        rank = len(self.main_shape)
        if len(positions.shape) > rank:
            raise CannotCover(f"`{name}` (positions made with arange) has more dimensions than the input")
        aligned = (1,) * (rank - len(positions.shape)) + positions.shape
        spans = [d for d, s in enumerate(aligned) if s != 1]
        if len(spans) != 1 or self.main_shape[spans[0]] != positions.length:
            raise CannotCover(f"`{name}` (positions made with arange, shape {list(positions.shape)}) does not "
                              f"span one dimension of the input's shape {list(self.main_shape)}")
        dim = spans[0]
        dtype = str(positions.dtype).removeprefix("torch.")
        low = LOW_PRECISION.get(positions.dtype)
        level = "col" if dim == rank - 1 else "row"
        value = self.add("position", [dim, rank], level, dtype, None)
        if positions.step != 1:
            value = self.add("mul", [value, positions.step], level, dtype, None)
        if positions.start != 0:
            value = self.add("add", [value, positions.start], level, dtype, None)
        if low is not None:
            value = self.add("identity", [value], level, dtype, low)
        self.position_bounds[value] = positions.bound
        self.positional.add(value)
        return value

    def _rows_along_the_last_dim(self, name: str) -> None:
        """Refuses positions where the kernel's rows are not whole runs of the main input's last
        dimension (rows across a span, an output larger than the input, chunks): there an element's
        index along a dimension is not what ``codegen.position`` computes."""
        if self.span is not None or self.virtual is not None or self.main_chunks > 1 or not self.main_shape:
            raise CannotCover(f"`{name}` (positions made with arange) is used where the kernel's rows are not "
                              "laid out along the last dimension of the first input")

    def position_lookup(self, node: torch.fx.Node, table: torch.nn.Embedding, positions: Positions) -> None:
        """``emb(torch.arange(t))`` (a learned position embedding): the table's first ``t`` rows, read in
        place as a view broadcast to the program's shape, row ``p`` where the position is ``p``."""
        shape = (*positions.shape, table.embedding_dim)
        rank = len(self.main_shape or ())
        if table.max_norm is not None or positions.start != 0 or positions.step != 1 or \
                positions.dtype.is_floating_point or positions.shape[-1] != positions.length:
            raise CannotCover(f"`{node.name}` looks up positions other than 0, 1, ..., t-1 along their last dim")
        self._rows_along_the_last_dim(node.name)
        if rank < 2 or len(shape) > rank or tuple(self.main_shape[-2:]) != (positions.length, table.embedding_dim):
            raise CannotCover(f"`{node.name}` (an embedding of positions, {list(shape)}) does not broadcast along "
                              f"the last two dims of the input's shape {list(self.main_shape or ())}")
        source = f"self.{node.target}.weight[:{self.main}.shape[-2]]"
        self.view_operand(f"p{len(self.operands)}", source, node.name, table.weight)
        self.ops.append(f"{node.target} (positions)")

    def positional_elementwise(self, node: torch.fx.Node, op: str, values: list[Any], level: str) -> bool:
        """Arithmetic on placed positions, computed per element whatever its shape (it broadcasts to the
        program's); False where no argument comes from positions. Every result is bounded, and
        integer arithmetic fp32 might not do exactly is refused; only a result of the program's shape
        can be reduced or normalised."""
        bounds = [self.position_bounds[v] for v in values if isinstance(v, str) and v in self.position_bounds]
        if not bounds:
            return False
        meta = _meta(node)
        if meta is None:
            raise CannotCover(f"`{node.name}` has no tensor shape")
        shape, dtype = meta
        bound = _integer_bound(node, op, values, bounds) if not dtype.is_floating_point and dtype != torch.bool \
            else (1 if dtype == torch.bool else EXACT)
        try:
            fits = torch.broadcast_shapes(shape, tuple(self.main_shape)) == tuple(self.main_shape)
        except RuntimeError:
            fits = False
        smaller = shape != tuple(self.main_shape)
        flat = any(v in self.rowflat for v in values if isinstance(v, str))
        if not fits or (not smaller and level != "elem") or flat:
            raise CannotCover(f"`{node.name}` (computed from positions made with arange, shape {list(shape)}) "
                              f"does not broadcast to the input's {list(self.main_shape)} as the templates follow")
        dtype_name, low = self.rounding(node)
        self.values[node.name] = result = self.add(op, values, level, dtype_name, low)
        self.position_bounds[result] = bound
        if smaller:
            self.positional.add(result)
        self.ops.append(op)
        return True

    def whole(self, src: Any, node: torch.fx.Node) -> Any:
        """``src``, refused where it is positions smaller than the program's shape: a reduction or a
        norm of them would run over the program's rows, not over the tensor torch reduces."""
        if isinstance(src, str) and src in self.positional:
            raise CannotCover(f"`{node.name}` reduces or normalises positions made with arange")
        return src

    def cast_of_positions(self, src: str, result: str, dtype: str) -> None:
        """``result``, a cast of ``src`` to ``dtype``: bounded and shaped as ``src`` where that comes from
        positions; refused where an integer dtype would not hold its values (torch wraps them)."""
        if src not in self.position_bounds:
            return
        target = getattr(torch, dtype, None)
        bound = self.position_bounds[src]
        if not isinstance(target, torch.dtype) or not holds(target, -bound, bound):
            raise CannotCover(f"a cast to {dtype} of values from positions made with arange that it may not hold")
        self.position_bounds[result] = bound
        if src in self.positional:
            self.positional.add(result)


def holds(dtype: torch.dtype, lowest: float, highest: float) -> bool:
    """Does ``dtype`` hold the integers from ``lowest`` to ``highest`` as they are (float64 is not
    computed here)?"""
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return True  # rounded as torch rounds them (``place`` rounds to bf16 or fp16)
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        return False
    info = torch.iinfo(dtype)
    return info.min <= lowest and highest <= info.max


def _integer_bound(node: torch.fx.Node, op: str, values: list[Any], bounds: list[float]) -> float:
    """The largest magnitude an integer op on positions can give; refused where fp32 might not compute
    it exactly (a product of positions, floor division, values past 2**24)."""
    numbers = [abs(v) for v in values if isinstance(v, (int, float))]
    scaled = op == "mul" and len(bounds) == 1 and len(numbers) == len(values) - 1  # positions times a number
    if op in ADDING_OPS:
        bound = sum(bounds) + sum(numbers)
    else:
        bound = bounds[0] * math.prod(numbers) if scaled else max([*bounds, *numbers])
    if (op not in INTEGER_SAFE_OPS and not scaled) or bound >= EXACT:
        raise CannotCover(f"`{node.name}` ({op}) is integer arithmetic on positions made with arange "
                          "that fp32 might not compute exactly")
    return bound
