"""The population: a MAP-Elites-style archive so that diverse strategies survive (pure logic).

Each correct candidate falls into a cell keyed by its strategy and a coarse behaviour descriptor
(its launch configuration, for instance); a cell keeps its fastest candidate. Parents are chosen
from the elites of all cells, mostly the fastest but sometimes another cell, so that a strategy
that is behind today can still be improved tomorrow. Everything here is plain data (dicts), fit
for LangGraph state and checkpoints.
"""

from __future__ import annotations

import random
from typing import TypedDict

from kernelevo.sandbox.judge.timing import faster_beyond_tie


class Entry(TypedDict):
    """One judged candidate as the archive sees it."""

    id: str
    strategy: str
    cell: str
    parent: str | None
    correct: bool
    runtime_ms: float | None
    speedup: float | None


def cell_key(strategy: str, descriptor: str) -> str:
    return f"{strategy}|{descriptor}"


def insert(archive: dict[str, Entry], entry: Entry) -> bool:
    """Put a correct entry into its cell if it is the cell's fastest beyond the tie band (a gain
    within the run-to-run spread is not shown to be one); True if it became the elite."""
    if not entry["correct"] or entry["runtime_ms"] is None:
        return False
    current = archive.get(entry["cell"])
    if current is None or faster_beyond_tie(entry["runtime_ms"], current["runtime_ms"] or float("inf")):
        archive[entry["cell"]] = entry
        return True
    return False


def best(archive: dict[str, Entry]) -> Entry | None:
    """The fastest elite."""
    elites = [e for e in archive.values() if e["runtime_ms"] is not None]
    return min(elites, key=lambda e: e["runtime_ms"]) if elites else None


def select_parents(archive: dict[str, Entry], count: int, rng: random.Random, explore: float = 0.3) -> list[Entry]:
    """``count`` parents: the best elite most of the time, a random other elite with ``explore``."""
    elites = sorted((e for e in archive.values() if e["runtime_ms"] is not None), key=lambda e: e["runtime_ms"])
    if not elites:
        return []
    chosen = []
    for _ in range(count):
        if len(elites) > 1 and rng.random() < explore:
            chosen.append(rng.choice(elites[1:]))
        else:
            chosen.append(elites[0])
    return chosen


def strategy_stats(entries: list[Entry]) -> dict[str, dict[str, float | int | None]]:
    """Per strategy: how often tried, how often correct, and the best speedup or time."""
    stats: dict[str, dict[str, float | int | None]] = {}
    for e in entries:
        s = stats.setdefault(e["strategy"], {"tried": 0, "correct": 0, "best_speedup": None, "best_ms": None})
        s["tried"] += 1
        if e["correct"]:
            s["correct"] += 1
            if e["speedup"] is not None and (s["best_speedup"] is None or e["speedup"] > s["best_speedup"]):
                s["best_speedup"] = e["speedup"]
            if e["runtime_ms"] is not None and (s["best_ms"] is None or e["runtime_ms"] < s["best_ms"]):
                s["best_ms"] = e["runtime_ms"]
    return stats
