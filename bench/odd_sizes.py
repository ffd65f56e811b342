"""A task file's copy at small sizes that are neither powers of two nor multiples of a tile.

KernelBench's sizes are nearly all powers of two, and the automatic small size halves them, so a sweep
at either never exercises a kernel's masks, its last partial tile or a row that does not fill a
block: exactly what a problem nobody here wrote will have. Each size literal of the file's small size
is moved down to an odd number (``v - v // 8 - 1``: 64 -> 55, 128 -> 111, 1024 -> 895) where the
reference still builds and runs at the new sizes (on the meta device), one literal at a time, so a
size that must divide another (heads into a width) keeps its value. (Not a test; used by
``bench/kernelbench.py --odd``.)
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelevo.tasks import shrink


def odd(value: int) -> int:
    moved = value - value // 8 - 1
    return moved if moved % 2 else moved - 1


def odd_values(path: Path) -> dict[str, int]:
    """The file's size literals at odd small values, each moved only where the file still runs."""
    sizes = shrink.size_literals(ast.parse(path.read_text(), filename=str(path)))
    chosen = {**sizes, **shrink.automatic_small(path)}
    for name in sorted(chosen, key=lambda n: -chosen[n]):
        trial = {**chosen, name: odd(chosen[name])}
        if trial[name] >= 3 and shrink.count_values(path, trial) is not None:
            chosen = trial
    return {k: v for k, v in chosen.items() if v != sizes.get(k)}


def write_odd_copy(path: Path, folder: Path) -> tuple[Path, dict[str, int]]:
    """The file rewritten at :func:`odd_values` into ``folder`` (same name), and the values moved."""
    values = odd_values(path)
    copy = folder / path.name
    source = ast.unparse(shrink.rewritten(path, values))
    copy.write_text(f"# {path.name} at odd small sizes: {values}\n{source}\n")
    return copy, values
