"""The values of an output grouped by the shift levels of the input rows they come from, on the shifted
set (``inputs.with_offset`` moves each input row by 0 to 4096 standard deviations): a value computed
from rows near zero has a rounding scale of its own, a thousand times finer than one from rows far up,
and the comparison holds each group to its own (``compare.GROUP_FACTOR``).

Which input rows a value comes from is read from the shapes alone. An input's rows (its dims but the
last) are found in the output's dims: as its leading dims flattened (a norm's rows, a row's sum, a linear
layer's rows, the same rows reshaped), or as any dims of equal sizes in the same order (the columns of
``A @ B.T`` are ``B``'s rows; attention scores ``q @ k.T`` take ``q``'s rows and ``k``'s). Sizes that
match by coincidence only split groups further, which never loosens a check: a group's slack is capped
at the whole output's. Runs in the oracle; nothing here comes from the candidate.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import torch

from kernelevo.sandbox.child.inputs import SHIFT_LEVELS

LEVELS = len(SHIFT_LEVELS)
MAX_MAPS = 6
"""Alignments kept per output (groups: ``LEVELS`` to this power at most)."""
ALIGNMENTS_PER_INPUT = 3
"""Alignments of one input's rows tried beyond its leading one (dims of repeated sizes have several)."""


class LevelMap(NamedTuple):
    """One input's row levels laid over the output: the output dims (in order) that index its rows."""

    levels: torch.Tensor
    """The level index of each input row, flat (int64)."""
    dims: tuple[int, ...]


class LevelGroups(NamedTuple):
    """Groups of an output's values: one per combination of the levels its ``maps`` give a value."""

    maps: tuple[LevelMap, ...]
    shape: tuple[int, ...]
    count: int

    def of(self, flat: torch.Tensor) -> torch.Tensor:
        """The group of each value at the output's flat indices ``flat``."""
        key = torch.zeros_like(flat)
        strides = _strides(self.shape)
        for level_map in self.maps:
            index = torch.zeros_like(flat)
            for d in level_map.dims:
                index = index * self.shape[d] + (flat // strides[d]) % self.shape[d]
            key = key * LEVELS + level_map.levels.to(flat.device)[index]
        return key

    def rows(self, flat: torch.Tensor) -> torch.Tensor:
        """The output row (along its last dim) of each value at ``flat``; of a 1-D output, each value."""
        return flat // self.shape[-1] if len(self.shape) > 1 else flat

    @property
    def row_count(self) -> int:
        return math.prod(self.shape[:-1]) if len(self.shape) > 1 else math.prod(self.shape)


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
    maps: list[LevelMap] = []
    for rows, index in row_levels:
        if int(index.min()) == int(index.max()):
            continue  # every row at one level: nothing to tell apart
        for dims in _alignments(rows, shape):
            if len(maps) < MAX_MAPS:
                maps.append(LevelMap(index.reshape(-1).to(torch.int64), dims))
    if not maps:
        return None
    return LevelGroups(tuple(maps), shape, LEVELS ** len(maps))


def _alignments(rows: tuple[int, ...], shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Where an input's ``rows`` lie among the output's dims ``shape``: its leading dims, flattened (the
    fewest whose sizes multiply to the rows' count), then up to ``ALIGNMENTS_PER_INPUT`` runs of output
    dims in order whose sizes are the rows' own (dims of size 1 left out on both sides)."""
    found: list[tuple[int, ...]] = []
    count = math.prod(rows)
    for j in range(1, len(shape) + 1):
        if math.prod(shape[:j]) == count:
            found.append(tuple(range(j)))
            break
        if math.prod(shape[:j]) > count:
            break
    sizes = [r for r in rows if r != 1]
    candidates = [d for d in range(len(shape)) if shape[d] != 1 and shape[d] in sizes]
    extra = 0
    for dims in itertools.combinations(candidates, len(sizes)):
        if extra >= ALIGNMENTS_PER_INPUT:
            break
        if sizes and [shape[d] for d in dims] == sizes and dims not in found:
            found.append(dims)
            extra += 1
    return found
