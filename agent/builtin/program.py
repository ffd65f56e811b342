"""The row program: the IR the built-in templates compile (``lower`` builds it from a reference).

A row program computes one output from tensors viewed as ``[rows, cols]`` (``cols`` is the last
dimension): every value is per element (``elem``), per row (``row``: a reduction over the last
dimension), per column (``col``: a parameter of shape ``[cols]``) or a constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class CannotCover(Exception):
    """The built-in templates cannot cover this task; the message says why."""


@dataclass
class Operand:
    """A tensor the kernel reads: a forward input (``row``), a parameter of shape ``[cols]`` (``col``),
    one per channel (``channel``), an input with one value per row (``per_row``, ``[..., 1]``, read
    contiguous), a single value (``scalar``) or any other broadcast (``view``); or a number passed to
    forward (``value``), which the kernel takes as an argument."""

    name: str
    source: str
    """The Python expression that gives the tensor inside ``ModelNew.forward``."""
    kind: str
    chunks: int = 1
    """For an input split with ``chunk(n, -1)``: ``n``; the kernel reads columns ``[k*cols, (k+1)*cols)``."""
    channel_dim: int | None = None
    """For a ``channel`` operand (a parameter such as ``[C, 1, 1]`` on ``[N, C, H, W]``): the input
    dimension it varies along, counted from the end (-3 here); row r of the ``[rows, cols]`` view
    reads element ``(r // prod(shape[channel_dim+1:-1])) % shape[channel_dim]``."""
    view_rank: int | None = None
    """For a ``view`` operand (any other tensor that broadcasts to the main input's shape, ``[N, 1, H, 1]``
    on ``[N, C, H, W]``): the main input's rank. The kernel reads it through its strides as expanded to
    that shape (0 along a broadcast dimension): no copy is made."""
    channel_from: int | None = None
    """For a ``channel`` operand that varies along several neighbouring dimensions (a per-sample,
    per-channel statistic such as ``[N, C, 1, 1, 1]`` on ``[N, C, D, H, W]``): the first of them,
    counted from the end (-5 here; None: only ``channel_dim``). Row r reads element
    ``(r // prod(shape[channel_dim+1:-1])) % prod(shape[channel_from:channel_dim+1])``."""


@dataclass
class Node:
    """One SSA value. ``op`` is a primitive (see ``expressions.elementwise``), ``load``, a reduction,
    ``const`` or ``position`` (args ``[dim, rank]``: the element's index along ``dim`` of the program's
    rank-``rank`` shape, computed, not read)."""

    name: str
    op: str
    args: list[Any]
    level: str
    """elem, row, col or const."""
    dtype: str = "float32"
    round_to: str | None = None
    """bfloat16 or float16: round the fp32 result like eager does for that dtype."""


@dataclass
class Program:
    """What the kernel computes: operands, nodes in order, and the output node."""

    operands: list[Operand]
    nodes: list[Node]
    output: str
    out_level: str
    """elem (same shape as the inputs' rows x cols) or row (one value per row)."""
    out_dtype: str
    out_keepdim: bool
    main: str
    """The forward input whose shape gives rows and (with ``chunks``) cols."""
    main_chunks: int
    inputs: list[str]
    """The forward's parameter names, in order."""
    ops: list[str] = field(default_factory=list)
    """The reference's ops as written (for the description)."""
    torch_prefix: list[tuple[str, str]] = field(default_factory=list)
    """Partial replacement: ``(name, expression)`` computed in torch in ``forward`` before the kernel
    (e.g. ``("t0", "self.conv(x)")``); the kernel reads each as an input."""
    span: tuple[int, int, int] | None = None
    """Where the reductions are not over the last dimension alone: ``(first, count, rank)``, the
    adjacent dimensions of the main input they reduce (an RMSNorm over the channels of
    ``[N, C, H, W]``: (1, 1, 4); a LayerNorm over its last three: (1, 3, 4)). A row is then one
    position of the other dimensions, and its columns are the reduced ones; where dimensions follow
    the span (``strided``), a row's values lie ``inner`` (their product) apart and neighbouring rows
    are neighbouring in memory."""

    one_value: bool = False
    """The main input has no dimension (a reduction's result, scaled): one element, computed flat."""
    chunk_dim: int | None = None
    """Where the main input is split with ``chunk(n, dim)`` along a dimension before the last (GLU over
    the channels of ``[N, 2C, L]``): that dimension, counted from the end; the program's rows are one
    chunk's, and chunk k of row r is the input's row ``(r // chunk_rows) * n * chunk_rows + k * chunk_rows
    + r % chunk_rows``, ``chunk_rows`` the rows of one chunk within one position of the dimensions
    before it (a kernel argument). None: split along the last dimension, or not at all."""

    broadcast_from: list[str] = field(default_factory=list)
    """Where the output is larger than every input (``x[:, None] + y``, a ``[B, 1]`` column plus a
    ``[1, C, 1, 1]`` parameter): the tensors whose shapes broadcast to the program's shape. The main
    input is then read through its strides like the others, as expanded to that shape."""

    @property
    def view_rank(self) -> int:
        """The rank ``view`` operands are read at (0: there are none)."""
        views = max((o.view_rank or 0 for o in self.operands if o.kind == "view"), default=0)
        return max(views, self.position_rank)

    @property
    def position_rank(self) -> int:
        """The rank ``position`` nodes (an element's index along a dimension) index; 0: there are none."""
        return max((n.args[1] for n in self.nodes if n.op == "position"), default=0)

    def sizes_after(self, main: str) -> str:
        """The kernel arguments after ``n_cols`` that say where rows lie, as a launch writes them."""
        return ("inner, " if self.strided else "") + (f"*{main}.shape[:-1], " if self.view_rank else "") + \
            ("chunk_rows, " if self.chunk_dim is not None else "")

    @property
    def strided(self) -> bool:
        return self.span is not None and self.span[0] + self.span[1] < self.span[2]

    @property
    def reductions(self) -> list[Node]:
        return [n for n in self.nodes if n.op in REDUCTIONS]

    @property
    def kind(self) -> str:
        return "row" if self.reductions else "pointwise"

    @property
    def flat(self) -> bool:
        """Nothing broadcasts per column and the input is not chunked: the tensor can be treated as
        one long row (for the tiled strategy)."""
        if self.one_value:
            return True  # one element: every operand is one value too
        return self.main_chunks == 1 and all(o.kind == "row" for o in self.operands) and not self.position_rank

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


REDUCTIONS = {"sum", "max", "min", "argmax", "argmin"}
READ_ONCE = {"load", "position"}
"""Ops a row-level node is read or computed with before the passes over the row, never inside them."""
N_COLS = "n_cols"
"""The row length as the kernel sees it at run time (an argument of every generated kernel)."""
