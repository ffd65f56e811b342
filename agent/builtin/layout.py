"""How a row program lays its values out as rows and columns, beyond "rows are every dimension but
the last": reductions over another run of dimensions (``Program.span``), an output larger than every
input (``Program.broadcast_from``), and the shapes each tensor takes in that layout. Mixed into the
lowering (``lower._Lowering``), which holds ``main_shape``, ``rows_shape``, ``cols``, ``span`` and
``virtual``."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.program import CannotCover


class SpanNeeded(CannotCover):
    """A reduction over other dimensions than the last: the lowering starts again with rows and
    columns laid out for them (``Program.span``)."""

    def __init__(self, first: int, count: int, rank: int) -> None:
        super().__init__(f"reductions over dims {first}-{first + count - 1} and over other dims in one program")
        self.span = (first, count, rank)


def reduced_span(dim: Any, rank: int) -> tuple[int, int] | None:
    """``dim`` (an int or a list of them) as (first, count) of adjacent dimensions, else None."""
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and -rank <= d < rank for d in dims):
        return None
    found = sorted({d % rank for d in dims})
    if len(found) != len(dims) or found != list(range(found[0], found[0] + len(found))):
        return None
    return found[0], len(found)


class Layout:
    """Rows, columns and spans (methods of ``lower._Lowering``)."""

    def logical(self, shape: tuple[int, ...], result: bool = True) -> tuple[int, ...]:
        """A tensor's shape in the program's layout. Without a span, the shape itself. With one
        (``Program.span``): the main input's shape is ``(*rows, cols)``, with the span's dimensions
        kept as ones it is ``(*rows, 1)``, without them (a reduction's ``result`` only: an operand of
        that shape broadcasts against the main input right-aligned, as torch reads it) ``rows``, and
        varying along the span alone ``(cols,)``; one value is itself; any other shape is marked so
        that it matches none of these."""
        shape = tuple(shape)
        if self.span is None or self.main_shape is None or self.rows_shape is None:
            return shape
        first, count, rank = self.span
        full = self.main_shape
        if not result and len(shape) < rank and math.prod(shape) != 1:
            shape = (1,) * (rank - len(shape)) + shape  # as torch broadcasts it against the main input
        if shape == full:
            return self.elem_shape()
        if shape == (*full[:first], *(1,) * count, *full[first + count:]):
            return (*self.rows_shape, 1)
        if result and shape == (*full[:first], *full[first + count:]) and shape:
            return tuple(self.rows_shape)
        if math.prod(shape) == 1:
            return shape
        if len(shape) <= rank:
            aligned = (1,) * (rank - len(shape)) + shape
            if aligned[first:first + count] == full[first:first + count] and all(
                    a == 1 for i, a in enumerate(aligned) if not first <= i < first + count):
                return (self.cols,)
        return (-1, *shape)  # no size is -1: matches no layout above

    def channel_span(self, shape: tuple[int, ...]) -> tuple[int, int] | None:
        if self.span is not None:  # rows are not whole runs of the last dimension: no channel operands
            return None
        return self._channel_span(shape)

    def _channel_span(self, shape: tuple[int, ...]) -> tuple[int, int] | None:
        """The first and last of the neighbouring dimensions a tensor varies along where it is constant
        along the last ones (``[C, 1, 1]`` on ``[N, C, H, W]``: (1, 1); a mean kept over the spatial
        dimensions, ``[N, C, 1, 1, 1]`` on ``[N, C, D, H, W]``: (0, 1)), or None. Every row of the
        ``[rows, cols]`` view then reads one of its values."""
        full = self.elem_shape()
        if not shape or len(shape) > len(full) or shape[-1] != 1 or len(full) < 2:
            return None
        aligned = (1,) * (len(full) - len(shape)) + tuple(shape)
        varying = [i for i, a in enumerate(aligned) if a != 1]
        if not varying or varying[-1] >= len(full) - 1:
            return None
        first, last = varying[0], varying[-1]
        # between them only dimensions of full size (size-1 ones of the input among them change nothing)
        if any(aligned[i] != full[i] for i in range(first, last + 1)):
            return None
        return first, last

    def require_span(self, dim: Any, what: str) -> None:
        """A reduction of a per-element value over ``dim``: the program's span (the last dimension when
        none is set), else :class:`SpanNeeded` to lay the program out for ``dim``, else CannotCover."""
        rank = len(self.main_shape or ())
        found = None
        if rank:
            found = (0, rank) if dim is None else reduced_span(dim, rank)  # (None: the whole tensor)
        if found is None:
            raise CannotCover(f"{what}; the templates reduce over one run of adjacent dimensions")
        if self.span is None:
            if found != (rank - 1, 1):
                raise SpanNeeded(*found, rank)
        elif found != self.span[:2]:
            first, count, _ = self.span
            raise CannotCover(f"{what} beside reductions over dims {first}-{first + count - 1}: a program "
                              "reduces one set of dimensions")

    def _broadcast_output(self, largest: int, first: tuple[int, ...] | None, viewed: bool = False
                          ) -> tuple[int, ...] | None:
        """The output's shape where it holds more values than every input, or as many in another shape
        than the largest input's (a transposed view): the program then runs over it, every tensor read
        as broadcast to it. The same where the largest input is ``viewed`` only (``x[:, 1:] - x[:, :-1]``):
        the program runs over what its views compute, maybe reduced over the last dimension on the way
        out. Else None."""
        output = next((n for n in self.gm.graph.nodes if n.op == "output"), None)
        result = output.args[0] if output is not None else None
        tm = result.meta.get("tensor_meta") if isinstance(result, torch.fx.Node) else None
        if self.span is not None or tm is None or not hasattr(tm, "shape"):
            return None
        shape = tuple(tm.shape)
        inner = max((tuple(n.meta["tensor_meta"].shape) for n in self.gm.graph.nodes
                     if n.op in ("call_function", "call_method") and hasattr(n.meta.get("tensor_meta"), "shape")),
                    key=math.prod, default=())
        if viewed and len(inner) >= 2 and inner != first and shape in (inner, inner[:-1], (*inner[:-1], 1)):
            return inner
        if len(shape) < 2:
            return None
        # a value larger than the output and every input, reduced over its last dimension on the way out
        # (the distances of every row of one input to every row of another): the program runs over it
        if math.prod(inner) > max(largest, math.prod(shape)) and inner[:-1] == shape:
            return inner
        return shape if math.prod(shape) > largest or (math.prod(shape) == largest and shape != first) else None
