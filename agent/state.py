"""The optimizer graph's state: ids, metrics and counters only (sources and verdicts live on disk)."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from kernelevo.agent.archive import Entry


class State(TypedDict, total=False):
    generation: int
    """Generations planned so far."""
    pending: list[str]
    """Candidate ids to judge in this generation (replaced by each plan)."""
    results: Annotated[list[Entry], operator.add]
    """Every judged candidate, in order (appended by the evaluate branches)."""
    processed: int
    """How many of ``results`` the select step has filed into the archive."""
    archive: dict[str, Entry]
    """Elites: the fastest correct candidate per (strategy, behaviour) cell."""
    best: Entry | None
    stop_reason: str | None
    idle_rounds: int
    """Plans in a row whose proposals all repeated judged candidates."""
    final: dict | None
    """The final re-judge of the best candidate with fresh seeds."""


class EvaluateInput(TypedDict):
    id: str
