"""Start, resume and stop optimizer runs. One process works on a run at a time (the run's lock);
SIGINT and SIGTERM stop cleanly and leave a resumable run; the final state and its reason are
stored in the run folder."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel, Field

from kernelevo.agent.budget import Budget
from kernelevo.agent.builtin.policy import BuiltinPolicy
from kernelevo.agent.builtin.recognize import CannotCover
from kernelevo.agent.cli_output import (
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    printable,
)
from kernelevo.agent.crash import exit_code_of, hint, keep_crash
from kernelevo.agent.graph import Runtime, Stopped, build_graph
from kernelevo.agent.policy import PolicyRefused, PolicyUnavailable
from kernelevo.agent.store import RunStore
from kernelevo.sandbox.judge.evaluate import EvalConfig, EvalError, Evaluator
from kernelevo.sandbox.judge.rules import CHECKED_SETS
from kernelevo.sandbox.models import TimingPolicy, Verdict
from kernelevo.tasks import load_task
from kernelevo.tasks.task import Task

EXIT_NONE_CORRECT = EXIT_REJECTED


class RunConfig(BaseModel):
    """Everything needed to start or resume a run; stored in the run folder (no secrets)."""

    task: str
    size: str
    policy: str = "builtin"
    budget: Budget = Field(default_factory=Budget)
    timeout_s: float = 300.0
    memory: str | None = None
    seeds: int = CHECKED_SETS
    batch: int = 3
    seed: int = 0
    timing: TimingPolicy = Field(default_factory=TimingPolicy)
    measure_compile: bool = True
    strict_layout: bool = False
    """Outputs must also have the reference output's strides (``--strict-layout``)."""
    forensic: bool = True
    """On a GPU, trace the kernels of candidates about to be accepted (``--no-forensic`` turns it off)."""
    cuda_graph: bool = False
    """On a GPU, also time candidates replayed as CUDA graphs (``--cuda-graph``), beside the plain time."""
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    """The name of the environment variable holding the key: the key itself is never stored."""
    model_timeout_s: float = 120.0
    model_retries: int = 2
    """Quick retries of one request inside the OpenAI client (it honours Retry-After)."""
    model_retry_minutes: float = 15.0
    """How long to keep retrying an endpoint that is down or overloaded, with growing pauses, before the
    run stops resumably: long enough to ride out a server restart during an overnight run."""
    temperature: float = 0.2
    steps_per_turn: int = 16
    sandbox: str = "process"
    """auto, docker or process (runs made before this field existed used the process sandbox)."""
    report: bool = False
    """Keep RUN_DIR/report.html up to date while the run goes (``--report``)."""
    islands: int | None = None
    """Conversations with the model at once, each its own island (``--islands``); by default one per
    evaluation slot."""
    experience: bool = True
    builtin_seed: bool = True
    """With a model: start the population from the built-in strategist's first kernel, where it covers the task."""
    """Read verified kernels of similar earlier tasks into the model's prompt and keep this run's
    verified best for later runs (``--no-experience`` turns both off)."""
    experience_path: Path | None = None
    """The experience file (``--experience PATH``); the cache folder's ``experience.sqlite`` by default."""

    def experience_file(self) -> Path | None:
        """The experience library this run reads and adds to, or None with ``--no-experience``."""
        from kernelevo.agent.experience import default_path

        return (self.experience_path or default_path()) if self.experience else None


def _keep_experience(config: RunConfig, task: Any, store: RunStore, evaluator: Evaluator,
                     result: dict[str, Any]) -> None:
    library = config.experience_file()
    if library is None:
        return
    from kernelevo.agent.experience import keep_final

    try:
        reference, _ = evaluator.baseline(task)  # cached: the inputs as the oracle described them
        entry = keep_final(library, task, store, evaluator.device_label(), reference.inputs, result)
    except (OSError, sqlite3.Error, ValueError) as exc:  # the library is a help: never the run's failure
        _log(f"warning: the experience library could not be updated: {type(exc).__name__}: {exc}")
        return
    if entry is not None:
        store.event("decision", result["id"], action="remember",
                    reason=f"kept in the experience library as {entry.id[:10]} for later runs on similar tasks")


REPORT_EVERY_S = 20.0
"""With --report, the page is rewritten after a verdict at most this often (and always at the end)."""


class ReportRefresher:
    """Progress that also rewrites the run's HTML report as verdicts come in (``optimize --report``)."""

    def __init__(self, run_dir: Path, inner: Callable[..., Any] | None, every_s: float = REPORT_EVERY_S) -> None:
        self.run_dir, self.inner, self.every_s = run_dir, inner, every_s
        self.last = float("-inf")

    def __call__(self, rt: Any, cid: str, verdict: Verdict) -> None:
        if self.inner:
            self.inner(rt, cid, verdict)
        if time.monotonic() - self.last >= self.every_s:
            self.write()

    def write(self) -> Path | None:
        from kernelevo.agent.report.html import write_report

        try:
            path = write_report(self.run_dir)
        except Exception as exc:  # the report is a view: never let it stop the search
            _log(f"warning: the report could not be written: {type(exc).__name__}: {exc}")
            return None
        self.last = time.monotonic()
        return path


def _log(message: str) -> None:
    """A line for the person running the search: its words may be a candidate's or a model's, so no
    terminal control in them reaches the terminal."""
    print(printable(message), file=sys.stderr, flush=True)


def summary(rt: Runtime) -> str:
    """The run in one line: generation, evaluations of budget, best so far, tokens and cost."""
    spent = rt.spent()
    limit = rt.budget.max_evals
    rows = rt.store.candidates()
    correct = [c for c in rows if c["correct"] and c["runtime_ms"] is not None]
    parts = [f"gen {max((c['generation'] for c in rows), default=0)}",
             f"{spent.evaluations}/{limit if limit is not None else '-'} evaluations"]
    if correct:
        top = min(correct, key=lambda c: c["runtime_ms"])
        verdict = rt.store.evaluation(top["id"])
        cpu = verdict is not None and verdict.timing == "cpu-interpreter"
        parts.append(f"best {top['runtime_ms']:.4g} ms" + (f" ({top['speedup']:.2f}x)" if top["speedup"] else "")
                     + (" (CPU interpreter)" if cpu else ""))
    else:
        parts.append("no correct candidate yet")
    if spent.tokens_in or spent.tokens_out:
        parts.append(f"tokens {spent.tokens_in + spent.tokens_out}")
        if rt.budget.price_in or rt.budget.price_out:
            parts.append(f"${spent.cost_usd(rt.budget):.2f}")
    return " · ".join(parts)


def result_words(cid: str, verdict: Verdict) -> str:
    """A judged candidate in a few words: its time and speedup, or why it was rejected."""
    if verdict.correct:
        what = f"correct {verdict.runtime_ms:.4g} ms" + (f" ({verdict.speedup:.2f}x)" if verdict.speedup else "")
    else:
        what = f"rejected: {(verdict.reason or '')[:90]}"
    return f"{cid[:10]} {what}"


def progress_line(rt: Runtime, cid: str, verdict: Verdict) -> None:
    """One line per judged candidate (log-friendly): its result, then the run's summary."""
    _log(f"{result_words(cid, verdict)} | {summary(rt)}")


class LiveProgress:
    """On a terminal: the per-candidate lines above a status line that updates in place."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.status = self.console.status("measuring the reference and judging the first candidates", spinner="dots")

    def __call__(self, rt: Runtime, cid: str, verdict: Verdict) -> None:
        self.console.print(printable(result_words(cid, verdict)), markup=False, highlight=False)
        self.status.update(summary(rt))


JOBS_PER_GPU = 2
"""Evaluations in flight per GPU: while one holds the GPU (its lock), the next starts its process
(Python, torch and triton imports), so the GPU waits less between evaluations."""


def device_count() -> int:
    """Visible GPUs (``KERNELEVO_PARALLEL`` overrides, which also lets tests simulate several
    devices on the CPU)."""
    forced = os.environ.get("KERNELEVO_PARALLEL")
    if forced:
        return max(int(forced), 1)
    from kernelevo.sandbox.judge.evaluate import detect_device

    if detect_device() != "cuda":
        return 1
    import torch

    return max(torch.cuda.device_count(), 1)


def evaluator_slots() -> list[int]:
    """The GPU of each evaluator in the pool: ``JOBS_PER_GPU`` per GPU (``KERNELEVO_JOBS_PER_GPU``
    overrides); one per simulated device on the CPU."""
    count = device_count()
    from kernelevo.sandbox.judge.evaluate import detect_device

    per_gpu = int(os.environ.get("KERNELEVO_JOBS_PER_GPU", JOBS_PER_GPU)) if detect_device() == "cuda" else 1
    return [gpu for gpu in range(count) for _ in range(max(per_gpu, 1))]


def create(config: RunConfig, run_dir: Path) -> RunStore:
    if (run_dir / "run.sqlite").exists():
        raise FileExistsError(f"{run_dir} already holds a run: use `kernelevo resume {run_dir}`")
    store = RunStore(run_dir)
    store.set_meta("config", config.model_dump(mode="json"))
    store.set_meta("created", time.strftime("%Y-%m-%dT%H:%M:%S"))
    store.set_meta("elapsed_s", 0.0)
    store.set_state("interrupted", "created")
    return store


def default_progress() -> Callable[..., Any]:
    return LiveProgress() if sys.stderr.isatty() else progress_line


PARENT_ENV = "KERNELEVO_PARENT_PID"
"""Set by a process that starts runs as children (``optimize-model``): the child stops like on SIGTERM
(cleanly, resumable) when that parent is gone, even after ``kill -9`` of the parent."""


def watch_parent() -> None:
    """If started by a parent that asked for it, send ourselves SIGTERM once the parent has died."""
    expected = os.environ.get(PARENT_ENV)
    if not expected:
        return

    def watch() -> None:
        while os.getppid() == int(expected):
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="kernelevo-parent-watch", daemon=True).start()


def _make_policy(config: RunConfig, task: Task) -> Any:
    """The run's policy, prepared for ``task`` (raises CannotCover where the strategist cannot)."""
    policy: Any
    if config.policy == "llm":
        from kernelevo.agent.llm_policy import LLMPolicy

        policy = LLMPolicy(config.model or "", config.base_url,
                           os.environ.get(config.api_key_env) or "no-key-set",
                           timeout_s=config.model_timeout_s, max_retries=config.model_retries,
                           retry_minutes=config.model_retry_minutes, temperature=config.temperature,
                           max_steps=config.steps_per_turn, islands=config.islands or len(evaluator_slots()),
                           experience=config.experience_file(), builtin_seed=config.builtin_seed)
    else:
        policy = BuiltinPolicy()
    policy.prepare(task)
    return policy


def _task_and_policy(store: RunStore, config: RunConfig, run_dir: Path) -> tuple[Task, Any] | int:
    """The task and its policy, or the exit code of a run that cannot start (said and recorded): a task
    file that cannot be used is the input's fault; a policy that fails while planning a task it loaded
    is kernelevo's (its traceback kept in the run's ``crash.log``, the run left to resume)."""
    try:
        task = load_task(config.task, config.size)  # type: ignore[arg-type]
    except Exception as exc:  # the task file itself is unusable
        store.set_state("failed", str(exc))
        _log(f"error: {exc}")
        return EXIT_USAGE
    try:
        return task, _make_policy(config, task)
    except CannotCover as exc:
        reason = f"the built-in policy cannot cover this task: {exc}"
        store.set_state("failed", reason)
        store.event("decision", None, action="stop", reason=reason)
        _log(f"error: {reason}")
        return EXIT_NONE_CORRECT
    except Exception as exc:  # noqa: BLE001 - a planner's own fault, not the task file's
        return _crashed(store, run_dir, exc)


def _evaluator_pool(store: RunStore, config: RunConfig, run_dir: Path) -> list[Evaluator] | int:
    """One evaluator per slot, sharing one sandbox (a stop kills every job in flight), or the exit code
    of a sandbox that cannot be had (said and recorded)."""
    from kernelevo.sandbox.isolation.choose import make_sandbox
    from kernelevo.sandbox.isolation.docker import DockerUnavailable

    try:
        sandbox, warning = make_sandbox(config.sandbox)
    except DockerUnavailable as exc:
        store.set_state("interrupted", str(exc))
        _log(f"error: {exc}")
        return EXIT_ENVIRONMENT
    if warning:
        _log(warning)
    common = dict(timeout_s=config.timeout_s, memory=config.memory, seeds=config.seeds, timing=config.timing,
                  measure_compile=config.measure_compile, compile_cache=run_dir / "cache",
                  strict_layout=config.strict_layout, forensic=config.forensic, cuda_graph=config.cuda_graph)
    stamp = f"{int(time.time())}"
    try:
        return [Evaluator(EvalConfig(workdir=run_dir / "work" / f"{stamp}-slot{n}-gpu{gpu}", gpu=gpu, **common),
                          sandbox=sandbox) for n, gpu in enumerate(evaluator_slots())]
    except EvalError as exc:
        store.set_state("interrupted", str(exc))
        _log(f"error: {exc}")
        return exc.exit_code


def _search(app: Any, cfg: dict[str, Any], first: bool, rt: Runtime, config: RunConfig, live: Any) -> int:
    """Measure the baseline, run the graph to its end, record and say the result."""
    task, store = rt.task, rt.store
    rt.evaluator.baseline(task)  # measured once, before any candidate, and cached for the pool
    snapshot = app.get_state(cfg)
    if isinstance(rt.progress, ReportRefresher):
        rt.progress.write()
    with live:
        if first or not snapshot.values:
            app.invoke({"generation": 0, "results": [], "processed": 0, "archive": {}, "best": None}, cfg)
        elif snapshot.next:
            app.invoke(None, cfg)
    values = app.get_state(cfg).values
    result = values.get("final")
    store.set_meta("best", result)
    reason = values.get("stop_reason") or "finished"
    store.set_state("finished", reason)
    if result:
        _keep_experience(config, task, store, rt.evaluator, result)
        speed = f", {result['speedup']:.2f}x over eager" if result.get("speedup") else ""
        _log(f"finished ({reason}): best {result['id'][:10]} {result['runtime_ms']:.4g} ms{speed}, "
             "re-judged with fresh seeds")
        return EXIT_OK
    _log(f"finished ({reason}) without a correct candidate")
    return EXIT_NONE_CORRECT


def _stopped(store: RunStore, run_dir: Path, exc: BaseException) -> int:
    """Record and say why a search stopped before its end; the exit code. A signal, an endpoint that
    stays down or a machine that cannot judge (exit 3) leave it resumable; the rest fail it."""
    if isinstance(exc, (KeyboardInterrupt, Stopped)):
        store.set_state("interrupted", "stopped by a signal; `kernelevo resume` continues")
        store.event("decision", None, action="interrupted", reason="stopped by a signal")
        _log(f"interrupted: resume with `kernelevo resume {run_dir}`")
        return EXIT_INTERRUPTED
    if isinstance(exc, PolicyUnavailable):
        store.set_state("interrupted", f"{exc}; `kernelevo resume` continues")
        store.event("decision", None, action="interrupted", reason=str(exc))
        _log(f"interrupted: {exc}\nresume with `kernelevo resume {run_dir}`")
        return EXIT_INTERRUPTED
    if isinstance(exc, PolicyRefused):
        store.set_state("failed", str(exc))
        store.event("decision", None, action="stop", reason=str(exc))
        _log(f"error: {exc}")
        return EXIT_USAGE
    assert isinstance(exc, EvalError)
    if exc.exit_code == EXIT_ENVIRONMENT:  # the machine, not the run: resumable once it is fixed
        store.set_state("interrupted", f"{exc}; once that is fixed, `kernelevo resume` continues")
        store.event("decision", None, action="interrupted", reason=str(exc))
        _log(f"interrupted: {exc}\nonce that is fixed, resume with `kernelevo resume {run_dir}`")
    else:
        store.set_state("failed", str(exc))
        _log(f"error: {exc}")
    return exc.exit_code


def _crashed(store: RunStore, run_dir: Path, exc: Exception) -> int:
    """An unplanned error stopped the search (kernelevo's bug, exit 5, or the machine's, exit 3): the run
    stays interrupted (everything judged is kept), the error is said in one line and its traceback kept
    in the run's ``crash.log``."""
    reason = f"stopped by {keep_crash(run_dir, exc)}"
    try:
        store.set_state("interrupted", f"{reason}; once that is fixed, `kernelevo resume` continues")
        store.event("decision", None, action="interrupted", reason=reason)
    except sqlite3.Error as err:  # the store may be what failed (a full disk)
        reason += f" (the run's state could not be written: {err})"
    _log(f"error: {reason}\n{hint(exc)}")
    return exit_code_of(exc)


def drive(run_dir: Path, first: bool, progress: Callable[..., Any] | None = None) -> int:
    """Run (or resume) the optimizer on ``run_dir`` until it finishes, fails or is stopped."""
    watch_parent()
    if progress is None:
        progress = default_progress()
    store = RunStore(run_dir)
    if not store.acquire():
        store.close()
        _log(f"error: another process is working on {run_dir}")
        return EXIT_USAGE
    config = RunConfig.model_validate(store.meta("config"))
    if not first and store.meta("state") == "finished":
        _log(f"{run_dir} has finished: {store.meta('state_reason')}")
        found = bool(store.meta("best"))
        store.close()
        return EXIT_OK if found else EXIT_NONE_CORRECT
    opened = _task_and_policy(store, config, run_dir)
    pool = opened if isinstance(opened, int) else _evaluator_pool(store, config, run_dir)
    if isinstance(opened, int) or isinstance(pool, int):
        store.close()
        return opened if isinstance(opened, int) else pool  # type: ignore[return-value]
    task, policy = opened
    # The final re-judge draws fresh secret seeds like every evaluation and runs in a fresh candidate
    # process; it shares the first slot's kept oracle (the search is over by then) rather than start one.
    rt = Runtime(task=task, store=store, policy=policy, budget=config.budget, evaluator=pool[0],
                 final_evaluator=pool[0], batch=max(config.batch, len(pool)), seed=config.seed,
                 elapsed_before=float(store.meta("elapsed_s", 0.0)), progress=progress, pool=pool)
    if hasattr(policy, "attach"):
        policy.attach(rt)
    live = progress.status if isinstance(progress, LiveProgress) else contextlib.nullcontext()
    refresher = ReportRefresher(run_dir, progress) if config.report else None
    if refresher is not None:
        rt.progress = refresher

    def on_signal(signum: int, frame: Any) -> None:
        rt.stopping = True
        rt.evaluator.sandbox.kill_all()  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    connection = sqlite3.connect(store.db_path, check_same_thread=False)
    app = build_graph(rt).compile(checkpointer=SqliteSaver(connection))
    cfg = {"configurable": {"thread_id": "run"}, "recursion_limit": 100_000,
           "max_concurrency": rt.parallelism}
    store.set_state("running")
    store.event("decision", None, action="start" if first else "resume", policy=policy.name,
                family=policy.describe(), budget=config.budget.model_dump())
    _log(f"{'optimizing' if first else 'resuming'} {task.name} ({task.size}) with the {policy.name} policy: "
         f"{policy.describe()}; {rt.parallelism} evaluation(s) at once; run folder {run_dir}")
    try:
        return _search(app, cfg, first, rt, config, live)
    except (KeyboardInterrupt, Stopped, PolicyUnavailable, PolicyRefused, EvalError) as exc:
        return _stopped(store, run_dir, exc)
    except Exception as exc:  # noqa: BLE001 - unplanned (a bug, a full disk): said in one line, the run kept
        return _crashed(store, run_dir, exc)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        store.set_meta("elapsed_s", rt.spent().seconds)
        for member in pool:
            member.close()
        connection.close()
        store.close()
        if refresher is not None and (path := refresher.write()) is not None:
            _log(f"report: {path}")
