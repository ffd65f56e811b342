"""The optimizer as a LangGraph StateGraph: plan -> evaluate (one Send per candidate) -> select,
looping until the budget is spent or the search converges, then finalize (re-judge the best with
fresh seeds). Nodes are safe to re-run after a crash: they reuse what the run store recorded."""

from __future__ import annotations

import json
import queue
import random
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from kernelevo.agent import archive as arch
from kernelevo.agent.behaviour import MEASURED, behaviour_cell
from kernelevo.agent.budget import Budget, Spent, evaluations_left, exhausted
from kernelevo.agent.policy import Policy, SearchView
from kernelevo.agent.state import EvaluateInput, State
from kernelevo.agent.store import RunStore
from kernelevo.sandbox.advice.profiling import HarnessProfiler
from kernelevo.sandbox.judge.evaluate import Evaluator
from kernelevo.sandbox.judge.timing import TIE_BAND, faster_beyond_tie
from kernelevo.sandbox.models import Profile, Verdict
from kernelevo.tasks.task import Task


class Stopped(Exception):
    """The run is stopping (a signal): the evaluation in flight is not a verdict on its candidate."""


@dataclass
class Runtime:
    """What the nodes use but the checkpoint does not hold: the run store, policy and evaluators."""

    task: Task
    store: RunStore
    policy: Policy
    budget: Budget
    evaluator: Evaluator
    final_evaluator: Evaluator
    batch: int = 3
    seed: int = 0
    started: float = field(default_factory=time.monotonic)
    elapsed_before: float = 0.0
    progress: Any = None
    stopping: bool = False
    pool: list[Evaluator] = field(default_factory=list)
    """Evaluators pinned to GPUs (JOBS_PER_GPU each): several candidates in evaluation at once, never two
    on one GPU at the same moment (the GPU lock)."""

    def __post_init__(self) -> None:
        self._free: queue.Queue[Evaluator] = queue.Queue()
        for evaluator in self.pool or [self.evaluator]:
            self._free.put(evaluator)

    @property
    def parallelism(self) -> int:
        return max(len(self.pool), 1)

    def judge(self, evaluator: Evaluator, cid: str) -> Verdict:
        """Judge candidate ``cid``; raises Stopped if the run began stopping before or during it."""
        if self.stopping:
            raise Stopped()
        verdict, _ = evaluator.evaluate(self.task, self.store.source_path(cid))
        if self.stopping:
            raise Stopped()
        return verdict

    def profile(self, cid: str) -> Profile:
        """Profile a judged candidate (compiler report, Nsight Compute where there is a GPU and ncu),
        once: the profile is kept in the run store and traced with its diagnosis."""
        kept = self.store.meta(f"profile:{cid}")
        if kept:
            return Profile.model_validate(kept)
        verdict = self.store.evaluation(cid, "final") or self.store.evaluation(cid)
        evaluator = self._free.get()
        try:
            profile = HarnessProfiler(evaluator).profile(self.task, self.store.source_path(cid), verdict)
        finally:
            self._free.put(evaluator)
        self.store.set_meta(f"profile:{cid}", profile.model_dump(mode="json"))
        self.store.event("profile", cid, diagnosis=profile.diagnosis, kernels=len(profile.kernels),
                         unavailable=profile.unavailable)
        return profile

    def spent(self) -> Spent:
        return Spent(evaluations=self.store.count_evaluations("search"),
                     seconds=self.elapsed_before + time.monotonic() - self.started,
                     tokens_in=int(self.store.meta("tokens_in", 0)), tokens_out=int(self.store.meta("tokens_out", 0)))

    def judge_and_record(self, cid: str) -> Verdict:
        """Judge a candidate for the search (once: a recorded verdict is reused) and trace it."""
        verdict = self.store.evaluation(cid)
        if verdict is not None:
            return verdict
        evaluator = self._free.get()  # blocks until a GPU (an evaluator) is free
        started = time.time()
        try:
            verdict = self.judge(evaluator, cid)
        finally:
            self._free.put(evaluator)
        self.store.record_evaluation(cid, "search", verdict)
        self.store.event("verdict", cid, kind="search", correct=verdict.correct, reason=verdict.reason,
                         runtime_ms=verdict.runtime_ms, speedup=verdict.speedup, timing=verdict.timing,
                         roofline=verdict.roofline_fraction, bound=verdict.bound,
                         vs_compile=verdict.speedup_vs_compile, started=started, device=verdict.device,
                         checks_failed=[c.name for c in verdict.checks if not c.passed])
        if self.progress:
            self.progress(self, cid, verdict)
        return verdict


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


IDLE_ROUNDS = 3
"""Rounds in a row in which every proposal repeats a judged candidate before the search counts as
converged: one repeat (a model that wrote the same kernel twice) must not end a run."""

FINAL_CONTENDERS = 3
"""Elites re-judged at the end of a run on a GPU (not counted as evaluations)."""


def build_graph(rt: Runtime):
    """The uncompiled StateGraph over ``rt``."""

    def adopt(state: State) -> dict[str, Any]:
        """Candidates judged in a turn that never finished (the endpoint went down mid-turn, the run was
        killed) are in the store but not in the search: file them, so a kernel already verified is
        never lost to a resume."""
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

    def plan(state: State) -> dict[str, Any]:
        adopted = adopt(state)
        if adopted:
            state = {**state, "archive": adopted["archive"], "results": [*state.get("results", []),
                                                                        *adopted["results"]]}
        update = _plan(state)
        return {**adopted, **update}

    def _plan(state: State) -> dict[str, Any]:
        generation = state.get("generation", 0)
        reason = exhausted(rt.budget, rt.spent())
        if reason:
            rt.store.event("decision", None, action="stop", reason=reason)
            return {"pending": [], "stop_reason": reason}
        left = evaluations_left(rt.budget, rt.spent())
        count = rt.batch if left is None else min(rt.batch, left)
        params: dict[str, dict[str, Any]] = {}
        tried: set[str] = set()
        for c in rt.store.candidates():
            note = json.loads(rt.store.candidate(c["id"])["note"] or "{}")
            params[c["id"]] = note.get("params", {})
            tried.add(c["strategy"] + json.dumps(note.get("params", {}), sort_keys=True))
        view = SearchView(task=rt.task, generation=generation, archive=state.get("archive", {}),
                          entries=state.get("results", []), tried=tried, params=params,
                          rng=random.Random(rt.seed * 1000 + generation))
        proposals = rt.policy.propose(view, count)
        # Candidates a policy judged during its turn cost nothing more; the others may take only what the
        # budget has left now (a model may write more kernels in one reply than it was asked for).
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
        if not pending:
            idle = state.get("idle_rounds", 0) + 1
            if idle < IDLE_ROUNDS:
                rt.store.event("decision", None, action="ask again", generation=generation,
                               reason=f"every proposal repeated a judged candidate ({idle} of {IDLE_ROUNDS} such "
                               "rounds before the search counts as converged)")
                return {"pending": [], "generation": generation + 1, "idle_rounds": idle}
            reason = f"search converged: the policy proposed nothing new in {IDLE_ROUNDS} rounds in a row"
            rt.store.event("decision", None, action="stop", reason=reason)
            return {"pending": [], "stop_reason": reason}
        return {"pending": pending, "generation": generation + 1, "idle_rounds": 0}

    def route(state: State) -> list[Send] | Literal["plan", "finalize"]:
        if state.get("pending"):
            return [Send("evaluate", {"id": cid}) for cid in state["pending"]]
        return "finalize" if state.get("stop_reason") else "plan"

    def evaluate(payload: EvaluateInput) -> dict[str, Any]:
        cid = payload["id"]
        candidate = rt.store.candidate(cid)
        assert candidate is not None
        verdict = rt.judge_and_record(cid)
        return {"results": [entry_of(cid, candidate, verdict, rt.store)]}

    def select(state: State) -> dict[str, Any]:
        archive = dict(state.get("archive", {}))
        results = state.get("results", [])
        for entry in results[state.get("processed", 0):]:
            if arch.insert(archive, entry):
                rt.store.event("decision", entry["id"], action="elite", cell=entry["cell"],
                               runtime_ms=entry["runtime_ms"], reason="fastest correct candidate in its cell")
            elif entry["correct"]:
                rt.store.event("decision", entry["id"], action="not kept", cell=entry["cell"],
                               runtime_ms=entry["runtime_ms"], reason="not faster than its cell's elite beyond the "
                               f"{100 * TIE_BAND:.0f}% tie band")
        best = arch.best(archive)
        return {"archive": archive, "best": best, "processed": len(results)}

    def finalize(state: State) -> dict[str, Any]:
        """Re-judge the fastest elites with fresh seeds; the fastest re-judged one is the best. On a GPU
        up to FINAL_CONTENDERS are re-judged, because the search's fastest is partly the luckiest draw
        of its own noise; under the interpreter, whose times rank nothing, the first correct one wins."""
        elites = sorted((e for e in state.get("archive", {}).values()), key=lambda e: e["runtime_ms"])
        contenders: list[tuple[str, Verdict]] = []
        for entry in elites[:FINAL_CONTENDERS]:
            cid = entry["id"]
            verdict = rt.store.evaluation(cid, "final")
            if verdict is None:
                verdict = rt.judge(rt.final_evaluator, cid)
                rt.store.record_evaluation(cid, "final", verdict)
                rt.store.event("verdict", cid, kind="final", correct=verdict.correct, reason=verdict.reason,
                               runtime_ms=verdict.runtime_ms, speedup=verdict.speedup, timing=verdict.timing,
                               roofline=verdict.roofline_fraction, bound=verdict.bound,
                               vs_compile=verdict.speedup_vs_compile)
            if not verdict.correct:
                rt.store.event("decision", cid, action="demoted",
                               reason=f"failed the fresh-seed re-judge: {verdict.reason}")
                continue
            contenders.append((cid, verdict))
            if verdict.timing != "cuda-events":
                break
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
        rt.store.event("decision", cid, action="best", reason=reason, runtime_ms=verdict.runtime_ms,
                       speedup=verdict.speedup)
        if verdict.timing == "cuda-events":
            # What the reader of the run (and a model that resumes it) wants to know about the winner.
            try:
                rt.profile(cid)
            except Exception as exc:  # advice only: a failed profile never costs the run its result
                rt.store.event("profile", cid, diagnosis=None, error=f"{type(exc).__name__}: {exc}")
        return {"final": {"id": cid, "runtime_ms": verdict.runtime_ms, "speedup": verdict.speedup,
                          "timing": verdict.timing}}

    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("evaluate", evaluate)
    graph.add_node("select", select)
    graph.add_node("finalize", finalize)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", route, ["evaluate", "plan", "finalize"])
    graph.add_edge("evaluate", "select")
    graph.add_edge("select", "plan")
    graph.add_edge("finalize", END)
    return graph
