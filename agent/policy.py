"""The seam between search and decision: a Policy proposes candidates from what the run knows."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from kernelevo.agent.archive import Entry
from kernelevo.tasks.task import Task


class Proposal(TypedDict):
    """A candidate to judge, and why the policy wrote it."""

    source: str
    strategy: str
    descriptor: str
    """Coarse behaviour (e.g. the launch shape): with the strategy it picks the archive cell."""
    params: dict[str, Any]
    parent: str | None
    why: str


@dataclass
class SearchView:
    """What a policy may read: the task, the archive of elites, every judged entry so far."""

    task: Task
    generation: int
    archive: dict[str, Entry]
    entries: list[Entry]
    tried: set[str]
    """Keys of parameter sets already proposed (``Policy.key``), to avoid repeating them."""
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Parameters of each candidate id, for policies that mutate their parents."""
    rng: random.Random = field(default_factory=random.Random)

    def archive_strategy(self, cid: str) -> str:
        """The strategy of an archived candidate."""
        return next(e["strategy"] for e in self.archive.values() if e["id"] == cid)


class PolicyUnavailable(Exception):
    """The model cannot be reached or keeps failing: the run stops, resumable."""


class PolicyRefused(Exception):
    """The endpoint refuses the request itself (a bad request, an unknown model, a key it does not
    accept): asking again gives the same answer, so the run stops with the reason, not resumably."""


class Policy(Protocol):
    name: str

    def prepare(self, task: Task) -> None:
        """Look at the task once; raise CannotCover (with the reason) if this policy cannot handle it."""
        ...

    def propose(self, view: SearchView, count: int) -> list[Proposal]:
        """Up to ``count`` new candidates; an empty list means the search has converged."""
        ...
