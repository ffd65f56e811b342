"""The values of an output grouped by the shift levels of the input rows they come from, on the shifted
set (``inputs.with_offset`` moves each input row by 0 to 4096 standard deviations): a value computed
from rows near zero has a rounding scale of its own, a thousand times finer than one from rows far up,
and the comparison holds each group to its own (``compare.GROUP_FACTOR``).

Which input rows a value comes from is read from the shapes alone. An input's rows (its dims but the
last) are found among the output's dims of their sizes, in order first (a norm's rows, a row's sum, a
linear layer's rows; the columns of ``A @ B.T`` are ``B``'s rows; attention scores ``q @ k.T`` take
``q``'s rows and ``k``'s), then in another order (a (B, S, D) input's rows come out (S, B, D) when
returned sequence-first), then as the leading dims flattened (the same rows reshaped), and where none
is found, in a view of the output with one dim split in two (attention's heads merged, (B, S, H*D)).
Sizes that match by coincidence only split groups further, which never raises a value's slack past
the whole output's (a finer split can spread a candidate's few bad rows thinner under
``compare.GROUP_SHARE``). Runs in the oracle; nothing here comes from the candidate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch

from kernelevo.sandbox.child.inputs import SHIFT_LEVELS

LEVELS = len(SHIFT_LEVELS)
MAX_MAPS = 6
"""Alignments kept per output (groups: ``LEVELS`` to this power at most)."""
ALIGNMENTS_PER_INPUT = 4
"""Alignments of one input's rows whose dims have the rows' sizes kept (dims of repeated sizes have
several); the rows flattened into the leading dims may come on top."""


class LevelMap(NamedTuple):
    """One input's row levels laid over the output: the dims of a view of the output that index its
    rows, in the rows' order."""

    levels: torch.Tensor
    """The level index of each input row, flat (int64)."""
    dims: tuple[int, ...]
    view: tuple[int, ...]
    """The output's shape, or the same with one dim split in two (heads merged: (B, S, H*D) as
    (B, S, H, D)), whose dims ``dims`` names."""


class LevelGroups(NamedTuple):
    """Groups of an output's values: one per combination of the levels its ``maps`` give a value."""

    maps: tuple[LevelMap, ...]
    shape: tuple[int, ...]
    count: int

    def of(self, flat: torch.Tensor) -> torch.Tensor:
        """The group of each value at the output's flat indices ``flat``."""
        key = torch.zeros_like(flat)
        for level_map in self.maps:
            key = key * LEVELS + level_map.levels.to(flat.device)[self._row(level_map, flat)]
        return key

    def rows(self, flat: torch.Tensor) -> torch.Tensor:
        """The row of the first input found that each value at ``flat`` comes from: the unit in which a
        group's share is counted (a precision lost on every row near zero, whatever the output's layout;
        a near tie, one row)."""
        return self._row(self.maps[0], flat)

    @property
    def row_count(self) -> int:
        return self.maps[0].levels.numel()

    def _row(self, level_map: LevelMap, flat: torch.Tensor) -> torch.Tensor:
        """The input row (flat, in the input's order) each value at ``flat`` comes from under ``level_map``."""
        view = level_map.view
        strides = _strides(view)
        index = torch.zeros_like(flat)
        for d in level_map.dims:
            index = index * view[d] + (flat // strides[d]) % view[d]
        return index


def _strides(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def level_groups(output: Any, row_levels: list[tuple[tuple[int, ...], torch.Tensor]]) -> LevelGroups | None:
    """``output``'s values grouped by the levels of the shifted inputs' rows they come from (``row_levels``:
    each shifted input's rows and each row's level index); None where no input's rows are found in the
    output's shape, or every value falls in one group."""
    if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.numel() == 0 \
            or output.dim() == 0:
        return None
    shape = tuple(output.shape)
    per_input: list[list[LevelMap]] = []
    for rows, index in row_levels:
        if int(index.min()) == int(index.max()):
            continue  # every row at one level: nothing to tell apart
        found = [(shape, dims) for dims in _alignments(rows, shape)]
        if not found:  # heads merged into one dim, say: the output's dims split where a row size divides one
            found = [(view, dims) for view in _splits(rows, shape) for dims in _alignments(rows, view)]
        levels = index.reshape(-1).to(torch.int64)
        per_input.append([LevelMap(levels, dims, view) for view, dims in found[:1 + ALIGNMENTS_PER_INPUT]])
    # every input's likeliest alignment before any input's others: one input's coincidences must not
    # crowd out another's real one
    ranked = [m for rank in range(1 + ALIGNMENTS_PER_INPUT) for found in per_input if rank < len(found)
              for m in (found[rank],)]
    maps = tuple(ranked[:MAX_MAPS])
    return LevelGroups(maps, shape, LEVELS ** len(maps)) if maps else None


def _splits(rows: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Views of ``shape`` with one dim split in two, the outer or the inner part a size of ``rows`` (a
    merged (H*D) dim as (H, D)): the same values in the same order."""
    views = []
    missing = [r for r in rows if r not in shape]  # the size merged away first (H of H*D), as the outer part
    for r in dict.fromkeys(missing + list(rows)):
        for d, size in enumerate(shape):
            if 1 < r < size and size % r == 0:
                views += [shape[:d] + (r, size // r) + shape[d + 1:], shape[:d] + (size // r, r) + shape[d + 1:]]
    return list(dict.fromkeys(views))


def _alignments(rows: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Where an input's ``rows`` lie among the output's dims ``shape``, likeliest first: up to
    ``ALIGNMENTS_PER_INPUT`` runs of output dims whose sizes are the rows' own, in order (a norm's rows, a
    linear layer's, B's rows as A @ B.T's columns), then in another order (a (B, S) norm's rows returned
    sequence-first), dims of size 1 left out on both sides; then the fewest leading dims whose sizes
    multiply to the rows' count (the rows flattened)."""
    sizes = [r for r in rows if r != 1]
    found = list(itertools.islice(_runs(sizes, shape), ALIGNMENTS_PER_INPUT)) if sizes else []
    count = math.prod(rows)
    for j in range(1, len(shape) + 1):
        if math.prod(shape[:j]) == count:
            if tuple(range(j)) not in found and [shape[d] for d in range(j) if shape[d] != 1] != sizes:
                found.append(tuple(range(j)))
            break
        if math.prod(shape[:j]) > count:
            break
    return found


def _runs(sizes: list[int], shape: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Distinct output dims of ``sizes``, one per row dim (each tuple: the output dim of each row dim), in
    order first, then in other orders; made one at a time, so that many dims of one size cost nothing
    past the first few taken."""
    choices = [[d for d in range(len(shape)) if shape[d] == size] for size in sizes]

    def picks(k: int, taken: tuple[int, ...], ordered: bool) -> Iterator[tuple[int, ...]]:
        if k == len(choices):
            if ordered or list(taken) != sorted(taken):
                yield taken
            return
        for d in choices[k]:
            if d not in taken and (not ordered or not taken or d > taken[-1]):
                yield from picks(k + 1, (*taken, d), ordered)

    yield from picks(0, (), True)
    yield from picks(0, (), False)
