"""The optimizer as a LangGraph StateGraph: plan -> evaluate (one Send per candidate) -> select,
looping until the budget is spent or the search converges, then finalize (re-judge the best with
fresh seeds). Nodes are safe to re-run after a crash: they reuse what the run store recorded."""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from typing import Any

from langgraph.graph import END, START, StateGraph

from kernelevo.agent.budget import Budget, Spent
from kernelevo.agent.policy import Policy
from kernelevo.agent.search_nodes import FINAL_CONTENDERS, SearchNodes, forensic_bar
from kernelevo.agent.state import State
from kernelevo.agent.store import RunStore
from kernelevo.sandbox.advice.profiling import HarnessProfiler
from kernelevo.sandbox.judge.evaluate import Evaluator
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

    def judge(self, evaluator: Evaluator, cid: str, trace_below_ms: float | None = None,
              compile_afresh: bool = False) -> Verdict:
        """Judge candidate ``cid`` (``trace_below_ms``: the forensic pass's bar, :func:`forensic_bar`;
        ``compile_afresh``: in an empty compile cache, as the final re-judge does); raises Stopped if
        the run began stopping before or during it."""
        if self.stopping:
            raise Stopped()
        verdict, _ = evaluator.evaluate(self.task, self.store.source_path(cid), trace_below_ms=trace_below_ms,
                                        compile_afresh=compile_afresh)
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

    def inductor_code(self) -> str:
        """The code torch.compile generates for the reference, made once and kept in the run store (as
        is why it could not be made: a compile that failed once is not paid for again)."""
        kept, failed = self.store.meta("inductor_code"), self.store.meta("inductor_code_error")
        if kept:
            return str(kept)
        if failed:
            raise RuntimeError(str(failed))
        evaluator = self._free.get()
        try:
            text = evaluator.inductor_code(self.task)
        except RuntimeError as exc:
            self.store.set_meta("inductor_code_error", str(exc))
            raise
        finally:
            self._free.put(evaluator)
        self.store.set_meta("inductor_code", text)
        return text

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
            verdict = self.judge(evaluator, cid, forensic_bar(self.store.fastest_runtimes(FINAL_CONTENDERS)))
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


def build_graph(rt: Runtime) -> StateGraph:
    """The uncompiled StateGraph over ``rt``: plan -> evaluate (one Send per candidate) -> select ->
    plan, until plan finds a reason to stop; then finalize."""
    nodes = SearchNodes(rt)
    graph = StateGraph(State)
    graph.add_node("plan", nodes.plan)
    graph.add_node("evaluate", nodes.evaluate)
    graph.add_node("select", nodes.select)
    graph.add_node("finalize", nodes.finalize)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", nodes.route, ["evaluate", "plan", "finalize"])
    graph.add_edge("evaluate", "select")
    graph.add_edge("select", "plan")
    graph.add_edge("finalize", END)
    return graph
