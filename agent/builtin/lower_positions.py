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


def _meta(node: torch.fx.Node) -> tuple[tuple[int, ...], torch.dtype] | None:
    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "shape"):
        return None
    return tuple(int(s) for s in tm.shape), tm.dtype


def _plain_index(index: Any) -> bool:
    """An index that only adds dimensions of one or keeps whole ones (``[None, :]``, ``[..., None]``)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or i == slice(None) for i in items)


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
        view = (target is operator.getitem and _plain_index(args[1])) or (method and name in VIEW_METHODS)
        meta = _meta(node)
        if not view or meta is None:
            return False  # arithmetic on positions: placed by ``arg`` where it is used
        shape, dtype = meta
        if sorted(s for s in shape if s != 1) != sorted(s for s in value.shape if s != 1):
            raise CannotCover(f"`{node.name}` reshapes positions made with arange ({list(value.shape)} to "
                              f"{list(shape)})")
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
        length = meta[0][0]
        if abs(start) + abs(step) * length > EXACT / 4 and not meta[1].is_floating_point:
            raise CannotCover(f"`{node.name}` makes positions up to {abs(start) + abs(step) * length:.0f}; "
                              "integers are computed exactly in fp32 only below 2**22")
        return Positions(length=length, start=start, step=step, shape=meta[0], dtype=meta[1])

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
        if self.span is not None or self.virtual is not None or self.main_chunks > 1 or not self.main_shape:
            raise CannotCover(f"`{name}` (positions made with arange) is used where the kernel's rows are not "
                              "laid out along the last dimension of the first input")
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
        self.positional[value] = abs(positions.start) + abs(positions.step) * positions.length
        return value

    def position_lookup(self, node: torch.fx.Node, table: torch.nn.Embedding, positions: Positions) -> None:
        """``emb(torch.arange(t))`` (a learned position embedding): the table's first ``t`` rows, read in
        place as a view broadcast to the program's shape, row ``p`` where the position is ``p``."""
        shape = (*positions.shape, table.embedding_dim)
        rank = len(self.main_shape or ())
        if table.max_norm is not None or positions.start != 0 or positions.step != 1 or \
                positions.dtype.is_floating_point or positions.shape[-1] != positions.length:
            raise CannotCover(f"`{node.name}` looks up positions other than 0, 1, ..., t-1 along their last dim")
        if self.span is not None or self.virtual is not None or self.main_chunks > 1 or rank < 2 or \
                len(shape) > rank or tuple(self.main_shape[-2:]) != (positions.length, table.embedding_dim):
            raise CannotCover(f"`{node.name}` (an embedding of positions, {list(shape)}) does not broadcast along "
                              f"the last two dims of the input's shape {list(self.main_shape or ())}")
        source = f"self.{node.target}.weight[:{self.main}.shape[-2]]"
        self.view_operand(f"p{len(self.operands)}", source, node.name, table.weight)
        self.ops.append(f"{node.target} (positions)")

    def positional_result(self, node: torch.fx.Node, op: str, values: list[Any]) -> str | None:
        """For arithmetic on placed positions: "elem" where ``node`` has the program's shape, else
        "positional" (a smaller tensor that broadcasts to it, computed per element all the same);
        None where no argument is positional. Refuses integer arithmetic fp32 might not do exactly."""
        bounds = [self.positional[v] for v in values if isinstance(v, str) and v in self.positional]
        if not bounds:
            return None
        meta = _meta(node)
        if meta is None:
            raise CannotCover(f"`{node.name}` has no tensor shape")
        shape, dtype = meta
        if not dtype.is_floating_point and dtype != torch.bool:
            numbers = [abs(v) for v in values if isinstance(v, (int, float))]
            scaled = op == "mul" and len(bounds) == 1 and len(numbers) == len(values) - 1  # positions times a number
            if op in ADDING_OPS:
                bound = sum(bounds) + sum(numbers)
            else:
                bound = bounds[0] * math.prod(numbers) if scaled else max([*bounds, *numbers])
            if (op not in INTEGER_SAFE_OPS and not scaled) or bound >= EXACT:
                raise CannotCover(f"`{node.name}` ({op}) is integer arithmetic on positions made with arange "
                                  "that fp32 might not compute exactly")
            self._bound = bound
        else:
            self._bound = EXACT if dtype != torch.bool else 1
        try:
            fits = torch.broadcast_shapes(shape, tuple(self.main_shape)) == tuple(self.main_shape)
        except RuntimeError:
            fits = False
        if not fits:
            raise CannotCover(f"`{node.name}` (computed from positions made with arange) has shape {list(shape)}, "
                              f"which does not broadcast to the input's {list(self.main_shape)}")
        return "elem" if shape == tuple(self.main_shape) else "positional"

    def mark_positional(self, name: str) -> None:
        self.positional[name] = self._bound

