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


class PolicyRuntime(Protocol):
    """What a policy that works through tools (the LLM policy) may use of the run it is attached to
    (``graph.Runtime`` satisfies it): the store, the budget, the evaluator for baselines and gates,
    judging, profiles and torch.compile's code; nothing of the graph or its checkpoints."""

    store: Any
    """The run's ``RunStore``."""
    budget: Any
    """The run's ``Budget``."""
    evaluator: Any
    """An ``Evaluator``: the task's baselines, the device's name, the Triton compile gate."""
    stopping: bool

    def spent(self) -> Any: ...

    def judge_and_record(self, cid: str) -> Any: ...

    def profile(self, cid: str) -> Any: ...

    def inductor_code(self) -> str: ...


class Policy(Protocol):
    name: str

    def prepare(self, task: Task) -> None:
        """Look at the task once; raise CannotCover (with the reason) if this policy cannot handle it."""
        ...

    def propose(self, view: SearchView, count: int) -> list[Proposal]:
        """Up to ``count`` new candidates; an empty list means the search has converged."""
        ...
