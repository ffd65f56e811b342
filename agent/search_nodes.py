"""The search's nodes (plan, evaluate, select, finalize) over one run's ``Runtime``: what each step
reads from the graph's state and the run store, and what it records. ``graph.py`` wires them."""

from __future__ import annotations

import json
import random
from typing import Any, Literal, Protocol

from langgraph.types import Send

from kernelevo.agent import archive as arch
from kernelevo.agent.behaviour import MEASURED, behaviour_cell
from kernelevo.agent.budget import Budget, Spent, evaluations_left, exhausted
from kernelevo.agent.policy import Policy, Proposal, SearchView
from kernelevo.agent.state import EvaluateInput, State
from kernelevo.agent.store import RunStore
from kernelevo.sandbox.judge.timing import TIE_BAND, faster_beyond_tie
from kernelevo.sandbox.models import Verdict
from kernelevo.tasks.task import Task

IDLE_ROUNDS = 3
"""Rounds in a row in which every proposal repeats a judged candidate before the search counts as
converged: one repeat (a model that wrote the same kernel twice) must not end a run."""

FINAL_CONTENDERS = 3
MAX_DEMOTED = 2 * FINAL_CONTENDERS
"""The final re-judge stops after demoting this many elites (a task whose fresh seeds fail every
candidate would otherwise re-judge the whole archive, outside the budget)."""
"""Elites re-judged at the end of a run on a GPU (not counted as evaluations)."""


def forensic_bar(fastest: list[float]) -> float | None:
    """The time a search verdict must beat to get the forensic pass on a GPU: the tie band above the
    FINAL_CONTENDERS-th fastest correct time so far (``fastest``, fastest first); None, trace every
    one, until there are that many. The pass costs seconds a verdict; a candidate slower than the bar
    changes nothing the run hands back, and whatever is handed back is re-judged with the pass."""
    if len(fastest) < FINAL_CONTENDERS:
        return None
    return fastest[FINAL_CONTENDERS - 1] * (1 + TIE_BAND)


def entry_of(cid: str, candidate: dict[str, Any], verdict: Verdict, store: RunStore) -> arch.Entry:
    """A judged candidate as the archive sees it. A policy that gives no descriptor of its own (a
    model's candidates) gets a behavioural cell, measured from the kernel and its verdict."""
    cell = candidate["cell"]
    if cell.endswith(f"|{MEASURED}") and verdict.correct:
        path = store.source_path(cid)
        cell = behaviour_cell(path.read_text() if path.exists() else "", verdict)
    return arch.Entry(id=cid, strategy=candidate["strategy"], cell=cell, parent=candidate["parent"],
                      correct=verdict.correct, runtime_ms=verdict.runtime_ms if verdict.correct else None,
                      speedup=verdict.speedup if verdict.correct else None)


class SearchRuntime(Protocol):
    """What the nodes use of a run's ``Runtime`` (``graph.py``): nothing the checkpoint holds."""

    task: Task
    store: RunStore
    policy: Policy
    budget: Budget
    batch: int
    seed: int
    final_evaluator: Any

    def spent(self) -> Spent: ...

    def judge(self, evaluator: Any, cid: str, trace_below_ms: float | None = None,
              compile_afresh: bool = False) -> Verdict: ...

    def judge_and_record(self, cid: str) -> Verdict: ...

    def profile(self, cid: str) -> Any: ...


class SearchNodes:
    """The graph's nodes, bound to one run's ``Runtime`` (the store, the policy, the evaluators)."""

    def __init__(self, rt: SearchRuntime) -> None:
        self.rt = rt

    def adopt(self, state: State) -> dict[str, Any]:
        """Candidates judged in a turn that never finished (the endpoint went down mid-turn, the run was
        killed) are in the store but not in the search: file them, so a kernel already verified is
        never lost to a resume."""
        rt = self.rt
        known = {e["id"] for e in state.get("results", [])}
        found = []
        for c in rt.store.candidates():
            verdict = rt.store.evaluation(c["id"]) if c["id"] not in known else None
            if verdict is not None:
                found.append(entry_of(c["id"], rt.store.candidate(c["id"]) or c, verdict, rt.store))
        if not found:
            return {}
        archive = dict(state.get("archive", {}))
        for entry in found:
            kept = arch.insert(archive, entry)
            rt.store.event("decision", entry["id"], action="adopted", reason="judged in a turn that did not finish"
                           + ("; the fastest correct candidate in its cell" if kept else ""))
        return {"results": found, "archive": archive, "best": arch.best(archive),
                "processed": state.get("processed", 0) + len(found)}

    def plan(self, state: State) -> dict[str, Any]:
        adopted = self.adopt(state)
        if adopted:
            state = {**state, "archive": adopted["archive"], "results": [*state.get("results", []),
                                                                        *adopted["results"]]}
        return {**adopted, **self._plan(state)}

    def _plan(self, state: State) -> dict[str, Any]:
        rt = self.rt
        generation = state.get("generation", 0)
        reason = exhausted(rt.budget, rt.spent())
        if reason:
            rt.store.event("decision", None, action="stop", reason=reason)
            return {"pending": [], "stop_reason": reason}
        left = evaluations_left(rt.budget, rt.spent())
        proposals = rt.policy.propose(self._view(state, generation), rt.batch if left is None else min(rt.batch, left))
        pending = self._file(proposals, state, generation)
        if not pending:
            return self._nothing_new(state, generation)
        return {"pending": pending, "generation": generation + 1, "idle_rounds": 0}

    def _view(self, state: State, generation: int) -> SearchView:
        """What the policy may read: the archive, the judged entries, what was tried with which parameters."""
        rt = self.rt
        params: dict[str, dict[str, Any]] = {}
        tried: set[str] = set()
        for c in rt.store.candidates():
            note = json.loads(rt.store.candidate(c["id"])["note"] or "{}")
            params[c["id"]] = note.get("params", {})
            tried.add(c["strategy"] + json.dumps(note.get("params", {}), sort_keys=True))
        return SearchView(task=rt.task, generation=generation, archive=state.get("archive", {}),
                          entries=state.get("results", []), tried=tried, params=params,
                          rng=random.Random(rt.seed * 1000 + generation))

    def _file(self, proposals: list[Proposal], state: State, generation: int) -> list[str]:
        """Store each proposal; return the ids to judge. Candidates a policy judged during its turn cost
        nothing more; the others may take only what the budget has left now (a model may write more
        kernels in one reply than it was asked for)."""
        rt = self.rt
        left = evaluations_left(rt.budget, rt.spent())
        room = rt.batch if left is None else min(rt.batch, left)
        pending = []
        in_search = {e["id"] for e in state.get("results", [])}
        for p in proposals:
            cell = arch.cell_key(p["strategy"], p["descriptor"])
            note = json.dumps({"why": p["why"], "params": p["params"]})
            cid, new = rt.store.add_candidate(p["source"], p["parent"], p["strategy"], cell, note, generation)
            written_now = (rt.store.candidate(cid) or {}).get("generation") == generation
            judged = rt.store.evaluation(cid) is not None
            if judged and (not written_now or cid in in_search):
                rt.store.event("decision", cid, action="duplicate", generation=generation,
                               reason="same source as a candidate already judged")
                continue
            if not judged:
                if room <= 0:
                    rt.store.event("decision", cid, action="over budget", generation=generation,
                                   reason="not judged: the evaluation budget or the batch has no room left")
                    continue
                room -= 1
            if new:
                rt.store.event("decision", cid, action="propose", generation=generation, strategy=p["strategy"],
                               params=p["params"], parent=p["parent"], why=p["why"])
            pending.append(cid)
        return pending

    def _nothing_new(self, state: State, generation: int) -> dict[str, Any]:
        """A round whose every proposal repeated a judged candidate: ask again, up to ``IDLE_ROUNDS``."""
        idle = state.get("idle_rounds", 0) + 1
        if idle < IDLE_ROUNDS:
            self.rt.store.event("decision", None, action="ask again", generation=generation,
                                reason=f"every proposal repeated a judged candidate ({idle} of {IDLE_ROUNDS} such "
                                "rounds before the search counts as converged)")
            return {"pending": [], "generation": generation + 1, "idle_rounds": idle}
        reason = f"search converged: the policy proposed nothing new in {IDLE_ROUNDS} rounds in a row"
        self.rt.store.event("decision", None, action="stop", reason=reason)
        return {"pending": [], "stop_reason": reason}

    def route(self, state: State) -> list[Send] | Literal["plan", "finalize"]:
        if state.get("pending"):
            return [Send("evaluate", {"id": cid}) for cid in state["pending"]]
        return "finalize" if state.get("stop_reason") else "plan"

    def evaluate(self, payload: EvaluateInput) -> dict[str, Any]:
        cid = payload["id"]
        candidate = self.rt.store.candidate(cid)
        assert candidate is not None
        verdict = self.rt.judge_and_record(cid)
        return {"results": [entry_of(cid, candidate, verdict, self.rt.store)]}

    def select(self, state: State) -> dict[str, Any]:
        archive = dict(state.get("archive", {}))
        results = state.get("results", [])
        for entry in results[state.get("processed", 0):]:
            if arch.insert(archive, entry):
                self.rt.store.event("decision", entry["id"], action="elite", cell=entry["cell"],
                                    runtime_ms=entry["runtime_ms"], reason="fastest correct candidate in its cell")
            elif entry["correct"]:
                self.rt.store.event("decision", entry["id"], action="not kept", cell=entry["cell"],
                                    runtime_ms=entry["runtime_ms"], reason="not faster than its cell's elite "
                                    f"beyond the {100 * TIE_BAND:.0f}% tie band")
        return {"archive": archive, "best": arch.best(archive), "processed": len(results)}

    def finalize(self, state: State) -> dict[str, Any]:
        """Re-judge the fastest elites with fresh seeds; the fastest re-judged one is the best. On a GPU
        up to FINAL_CONTENDERS are re-judged, because the search's fastest is partly the luckiest draw
        of its own noise; under the interpreter, whose times rank nothing, the first correct one wins."""
        contenders = self._rejudge(state)
        if not contenders:
            return {"final": None}
        cid, verdict = min(contenders, key=lambda c: c[1].runtime_ms or float("inf"))
        reason = "re-judged with fresh seeds and accepted"
        if len(contenders) > 1:
            reason += f"; the fastest of {len(contenders)} elites re-judged"
            tied = [c for c, v in contenders if c != cid and v.runtime_ms is not None and verdict.runtime_ms
                    and not faster_beyond_tie(verdict.runtime_ms, v.runtime_ms)]
            if tied:
                reason += f" (a tie with {', '.join(tied)}: within {100 * TIE_BAND:.0f}%)"
        self.rt.store.event("decision", cid, action="best", reason=reason, runtime_ms=verdict.runtime_ms,
                            speedup=verdict.speedup)
        if verdict.timing == "cuda-events":
            # What the reader of the run (and a model that resumes it) wants to know about the winner.
            try:
                self.rt.profile(cid)
            except Exception as exc:  # advice only: a failed profile never costs the run its result
                self.rt.store.event("profile", cid, diagnosis=None, error=f"{type(exc).__name__}: {exc}")
        return {"final": {"id": cid, "runtime_ms": verdict.runtime_ms, "speedup": verdict.speedup,
                          "timing": verdict.timing}}

    def _rejudge(self, state: State) -> list[tuple[str, Verdict]]:
        """The fastest elites re-judged with fresh seeds (once: a recorded final verdict is reused),
        fastest first, until FINAL_CONTENDERS are still correct, the elites run out or MAX_DEMOTED
        were demoted (one demoted, a search verdict the forensic pass did not see among them, makes
        room for the next); under the interpreter, the first correct one only."""
        rt = self.rt
        elites = sorted((e for e in state.get("archive", {}).values()), key=lambda e: e["runtime_ms"])
        contenders: list[tuple[str, Verdict]] = []
        demoted = 0
        for entry in elites:
            if len(contenders) >= FINAL_CONTENDERS:
                break
            if demoted >= MAX_DEMOTED:
                rt.store.event("decision", None, action="re-judge stopped",
                               reason=f"{demoted} elites failed the fresh-seed re-judge; the rest are not re-judged")
                break
            cid = entry["id"]
            verdict = rt.store.evaluation(cid, "final")
            if verdict is None:
                # compiled from its source in an empty cache: the time handed back is that source's own
                verdict = rt.judge(rt.final_evaluator, cid, compile_afresh=True)
                rt.store.record_evaluation(cid, "final", verdict)
                rt.store.event("verdict", cid, kind="final", correct=verdict.correct, reason=verdict.reason,
                               runtime_ms=verdict.runtime_ms, speedup=verdict.speedup, timing=verdict.timing,
                               roofline=verdict.roofline_fraction, bound=verdict.bound,
                               vs_compile=verdict.speedup_vs_compile)
            if not verdict.correct:
                rt.store.event("decision", cid, action="demoted",
                               reason=f"failed the fresh-seed re-judge: {verdict.reason}")
                demoted += 1
                continue
            contenders.append((cid, verdict))
            if verdict.timing != "cuda-events":
                break
        return contenders
