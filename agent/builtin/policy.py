"""The built-in policy (no LLM): a parameter search over Triton templates for the families that
:mod:`recognize` covers. Generation 0 tries heuristic seeds; later generations mutate the archive's
elites one parameter at a time, or switch strategy, never repeating a parameter set."""

from __future__ import annotations

import json
from typing import Any

from kernelevo.agent.archive import best, select_parents
from kernelevo.agent.builtin.recognize import Family, recognise
from kernelevo.agent.builtin.templates import STRATEGIES, render
from kernelevo.agent.policy import Proposal, SearchView
from kernelevo.tasks.task import Task

BLOCKS = [256, 512, 1024, 2048, 4096, 8192]
WARPS = [1, 2, 4, 8, 16]
PROGRAMS = [264, 528, 1056, 2112]  # multiples of the H200's 132 SMs

SEEDS: dict[str, list[tuple[str, dict[str, int]]]] = {
    "unary": [("blocked", {"BLOCK": 1024, "num_warps": 4}), ("blocked", {"BLOCK": 4096, "num_warps": 8}),
              ("persistent", {"BLOCK": 2048, "num_warps": 8, "programs": 1056})],
    "softmax": [("online", {"BLOCK": 2048, "num_warps": 8}), ("registers", {"num_warps": 16}),
                ("online", {"BLOCK": 4096, "num_warps": 16})],
    "sum": [("blocked-reduce", {"BLOCK": 1024, "num_warps": 4}), ("blocked-reduce", {"BLOCK": 4096, "num_warps": 8})],
}
SEEDS["log_softmax"] = SEEDS["softmax"]
SEEDS["max"] = SEEDS["sum"]

WHY_STRATEGY = {
    "blocked": "one program per block of elements: the simplest coalesced pass, 16-byte loads when BLOCK allows",
    "persistent": "a fixed grid of a few programs per SM that strides over the tensor: fewer launches of "
                  "programs, better for very large tensors",
    "online": "online softmax over column blocks: two reads and one write per element, any row length",
    "registers": "the whole row in registers: one read and one write, for rows up to 16384",
    "blocked-reduce": "one program per row with a vector accumulator: one read per element",
}


def key(strategy: str, params: dict[str, Any]) -> str:
    return strategy + json.dumps(params, sort_keys=True)


class BuiltinPolicy:
    """Template search for a few op families (the built-in strategist issue widens it)."""

    name = "builtin"

    def __init__(self) -> None:
        self.family: Family | None = None

    def prepare(self, task: Task) -> None:
        self.family = recognise(task)

    def describe(self) -> str:
        assert self.family is not None
        f = self.family
        what = f"unary {f.op}" if f.kind == "unary" else f"{f.kind} over the last dimension"
        return f"{what}, {f.dtype}, rank {f.rank}"

    def _proposal(self, strategy: str, params: dict[str, Any], parent: str | None, why: str) -> Proposal:
        assert self.family is not None
        descriptor = f"w{params.get('num_warps')}"
        return Proposal(source=render(self.family, strategy, params, why), strategy=strategy, descriptor=descriptor,
                        params=params, parent=parent, why=why)

    def propose(self, view: SearchView, count: int) -> list[Proposal]:
        assert self.family is not None, "prepare() first"
        proposals: list[Proposal] = []
        seen = set(view.tried)

        def add(strategy: str, params: dict[str, Any], parent: str | None, why: str) -> None:
            k = key(strategy, params)
            if k not in seen and len(proposals) < count:
                seen.add(k)
                proposals.append(self._proposal(strategy, params, parent, why))

        if view.generation == 0 or not view.archive:
            for strategy, params in SEEDS[self.family.kind]:
                add(strategy, dict(params), None, f"seed: {WHY_STRATEGY[strategy]}")
        # The best elite first (exploit), then parents drawn with exploration; one neighbour each,
        # round robin, so that no single parent takes the whole generation.
        parents: list[str] = []
        top = best(view.archive)
        # ... and every other elite, fastest first, before the search may be called converged.
        others = sorted(view.archive.values(), key=lambda e: e["runtime_ms"] or float("inf"))
        for parent in ([top] if top else []) + select_parents(view.archive, count * 2, view.rng) + others:
            if parent["id"] not in parents and parent["id"] in view.params:
                parents.append(parent["id"])
        queues = [(pid, iter(self._neighbours(view.archive_strategy(pid), view.params[pid]))) for pid in parents]
        while queues and len(proposals) < count:
            for pid, queue in list(queues):
                for strategy, params, why in queue:
                    if key(strategy, params) not in seen:
                        add(strategy, params, pid, why)
                        break
                else:
                    queues.remove((pid, queue))
                if len(proposals) >= count:
                    break
        return proposals

    def _neighbours(self, strategy: str, params: dict[str, Any]):
        """Parameter sets one step away from ``params``, most promising first."""
        steps = {"BLOCK": BLOCKS, "num_warps": WARPS, "programs": PROGRAMS}
        for name, values in steps.items():
            if name not in params:
                continue
            i = values.index(params[name]) if params[name] in values else 0
            for j in (i + 1, i - 1):
                if 0 <= j < len(values):
                    changed = dict(params, **{name: values[j]})
                    direction = "more" if j > i else "fewer"
                    why = f"mutation: {name} {params[name]} -> {values[j]} ({direction}) from the elite"
                    yield strategy, changed, why
        assert self.family is not None
        for other in STRATEGIES[self.family.kind]:
            if other != strategy:
                seed = next(p for s, p in SEEDS[self.family.kind] if s == other)
                yield other, dict(seed, num_warps=params.get("num_warps", seed["num_warps"])), (
                    f"switch strategy to {other}: {WHY_STRATEGY[other]}")
