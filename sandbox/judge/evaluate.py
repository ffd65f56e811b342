"""Judge one candidate against one task: static checks, the cached clean baselines, a session with
the oracle and the candidate's process, the forensic pass on a GPU, then the verdict. The optimizer
process never imports candidate code."""

from __future__ import annotations

import fcntl
import functools
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelevo.sandbox.advice import ncu
from kernelevo.sandbox.advice.cuda_gate import compile_gate
from kernelevo.sandbox.exit_codes import EXIT_ENVIRONMENT, EXIT_USAGE
from kernelevo.sandbox.isolation.namespaces import hand_over, keep_private, remove_tree, scrubbed_env, write_into
from kernelevo.sandbox.isolation.process import ProcessSandbox, RunSpec, meminfo_bytes, take_lock
from kernelevo.sandbox.isolation.protocol import Sandbox
from kernelevo.sandbox.judge import cache, device_memory, forensic, rules
from kernelevo.sandbox.judge.compile_caches import CandidateCaches, env_for
from kernelevo.sandbox.judge.forensic import FORENSIC_CALLS, forensic_launcher
from kernelevo.sandbox.judge.processes import Oracle, Processes
from kernelevo.sandbox.judge.record import HarnessFault, Record
from kernelevo.sandbox.judge.session import Plan, Session, Stop, oracle_asker
from kernelevo.sandbox.judge.static_checks import check_candidate
from kernelevo.sandbox.judge.verdict import ended_how, judge, process_failure
from kernelevo.sandbox.models import Ceilings, Check, ReferenceResult, TimingPolicy, Verdict
from kernelevo.tasks.task import Task

BASELINE_SEEDS = [1, 2, 3, 4, 5]
"""Baselines are times, not checks: fixed seeds keep the cache valid across evaluations."""
BASELINE_FORMAT = 8
"""Part of a cached baseline's key: raised when what a baseline measures changes (the GPU's total
memory beside the task's own footprint, here), so older ones are measured again."""


class EvalError(Exception):
    """Evaluation could not happen at all; ``exit_code`` follows the CLI contract (2 input, 3 environment)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


REFERENCE_FAILURES_BLAMED = 2
"""Sessions in a row whose reference failure is put down to the candidate beside it (the next one
stops the evaluation as the reference's failure)."""


def default_memory_bytes() -> int | None:
    """Half the host's memory (``MemTotal``), the candidate's limit where none is given; None where the
    host does not say."""
    total = meminfo_bytes("MemTotal")
    return total // 2 if total else None


class EvalConfig(BaseModel):
    """How to judge: limits of the sandboxed processes and what to measure."""

    timeout_s: float = 300.0
    """Wall-clock limit of the candidate's process (compile included)."""
    reference_timeout_s: float = 1200.0
    memory: str | None = None
    """Memory limit of the candidate's process, e.g. ``8g`` (None: half the host's memory, so that no
    candidate, its memory-backed /tmp included, can take the machine's memory from everything else)."""
    pids_limit: int = 512
    seeds: int = Field(default=rules.CHECKED_SETS, ge=1, le=50)
    """Input sets checked per evaluation, each from a seed drawn afresh (and kept from the candidate)."""
    seed_offset: int = 0
    """Kept for run folders and commands that name it; every evaluation draws its own secret seeds."""
    compile_cache: Path | None = None
    """Where candidates' processes compile, each in a folder of its own (``compile_caches.py``; default:
    inside the workspace)."""
    gpu: int = 0
    workdir: Path | None = None
    """Keep job folders here; default: a temporary folder removed afterwards."""
    cache_dir: Path = Field(default_factory=cache.default_cache_dir)
    lock_dir: Path = Field(default_factory=cache.default_lock_dir)
    """The GPU locks: shared by every kernelevo process of this user on the machine (``cache.py``)."""
    measure_compile: bool = True
    strict_layout: bool = False
    """Outputs must have the reference output's strides, not only its values."""
    forensic: bool = True
    """On a GPU, trace the kernels of every candidate about to be accepted (needs Nsight Compute)."""
    cuda_graph: bool = False
    """Also time the candidate and the reference replayed as CUDA graphs (reported beside the plain time)."""
    timing: TimingPolicy = Field(default_factory=TimingPolicy)


def detect_device() -> str:
    """``cuda`` where a GPU is usable, else ``cpu`` (``KERNELEVO_DEVICE`` overrides)."""
    forced = os.environ.get("KERNELEVO_DEVICE")
    if forced in {"cpu", "cuda"}:
        return forced
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


def gpu_name(index: int) -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
        return name.decode() if isinstance(name, bytes) else name
    except Exception:
        import torch

        return torch.cuda.get_device_name(index)


class Evaluator:
    """Evaluates candidates for tasks; keeps one workspace (and compile caches) per instance."""

    def __init__(self, config: EvalConfig | None = None, sandbox: Sandbox | None = None) -> None:
        self.config = config or EvalConfig()
        self.sandbox = sandbox or ProcessSandbox()
        self._reference_failures = 0
        self.device = detect_device()
        self._own_workspace = self.config.workdir is None
        root = self.config.workdir or Path(tempfile.mkdtemp(prefix="kernelevo-eval-"))
        self.workspace = root.resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workspace, 0o755)
        self.compile_cache = (self.config.compile_cache or self.workspace / "cache").resolve()
        why = getattr(self.sandbox, "why_unreachable", lambda _: None)
        # kernelevo's own sources too: a checkout under a closed folder (``mktemp -d``) cannot be imported
        for folder in (self.workspace, self.compile_cache, Path(__file__).resolve().parents[1]):
            if why(folder):
                raise EvalError(why(folder), exit_code=EXIT_ENVIRONMENT)
        self.caches = CandidateCaches(self.compile_cache)
        # The clean processes compile (torch.compile's baseline) in a cache no candidate can write:
        # a poisoned inductor cache would run a candidate's code in them.
        self.trusted_cache = self.workspace / "trusted-cache"
        if getattr(self.sandbox, "trusted_as_sandbox_user", True):
            hand_over(self.trusted_cache)
            hand_over(self.trusted_cache / "tmp")
        else:
            keep_private(self.trusted_cache)
            keep_private(self.trusted_cache / "tmp")
        self._jobs = 0
        self.readable: list[Path] = []
        self.processes = Processes(self)

    def close(self) -> None:
        self.processes.close()
        self.caches.close()
        if self._own_workspace:
            remove_tree(self.workspace)  # candidates' folders may be deeper than Python's walks go

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # jobs -------------------------------------------------------------------------------------
    def env(self, trusted: bool = False) -> dict[str, str]:
        caches = self.trusted_cache if trusted else self.compile_cache
        extra = {
            # No user site: without bubblewrap /tmp is shared, and a site folder planted under HOME
            # would run code in every later job.
            "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "HOME": "/tmp",
            **env_for(caches), "TRITON_CACHE_AUTOTUNING": "1",
        }
        if trusted:
            # Without bubblewrap /tmp is the host's: a compiler's temporary files (ptxas writes to a
            # name it derives from its input's) must not be where a candidate can plant a link.
            extra["TMPDIR"] = str(caches / "tmp")
        if self.device == "cuda":
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = [v.strip() for v in visible.split(",")] if visible else None
            extra["CUDA_VISIBLE_DEVICES"] = ids[self.config.gpu] if ids else str(self.config.gpu)
        else:
            extra["TRITON_INTERPRET"] = "1"
            extra["CUDA_VISIBLE_DEVICES"] = ""
        return scrubbed_env(extra)

    def memory_bytes(self) -> int | None:
        if not self.config.memory:
            return default_memory_bytes()
        from kernelevo.sandbox.isolation.cgroups import parse_size

        return parse_size(self.config.memory)

    def memory_text(self) -> str | None:
        """The candidate's memory limit in words (for verdicts)."""
        if self.config.memory:
            return self.config.memory
        limit = default_memory_bytes()
        return f"{limit / 2**30:.1f}g, half the host's memory" if limit else None

    def job_dir(self, label: str) -> Path:
        """A new job's folder. Where jobs share the host's file system (no bubblewrap), a candidate
        could walk to its neighbours: the folder of jobs can be entered but not listed, and each job's
        name holds a random part, so no candidate finds another job (the spare process's channel) by
        counting."""
        self._jobs += 1
        jobs = self.workspace / "jobs"
        if self._jobs == 1:
            keep_private(jobs, 0o711)
        folder = jobs / f"{self._jobs:04d}-{label}-{secrets.token_hex(8)}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def spec(self, module: str, job_dir: Path, timeout_s: float, *, trusted: bool, readable: list[Path] | None = None,
             channel: bool = True, gpu_lock: bool = False, cmd: list[str] | None = None,
             env: dict[str, str] | None = None, extra_writable: list[Path] | None = None,
             folder_writable: bool = True, proc_children: bool = False,
             compile_cache: Path | None = None) -> RunSpec:
        """A sandboxed job: this evaluator's limits (host memory for candidate jobs) and environment, the
        right compile cache writable, nothing else of the workspace visible. ``compile_cache``: a
        candidate's job's own folder (``caches.scratch``), required for one."""
        memory = None if trusted else self.memory_bytes()
        gpu = self.device == "cuda"
        if not trusted and compile_cache is None:
            raise ValueError("a candidate's job compiles into a folder of its own: pass compile_cache")
        env = {**(self.env(trusted) if env is None else env), **(env_for(compile_cache) if compile_cache else {})}
        return RunSpec(cmd=cmd or [sys.executable, "-m", module], job_dir=job_dir, timeout_s=timeout_s,
                       memory_bytes=memory, memory_text=self.memory_text() if memory else None,
                       pids_limit=self.config.pids_limit, env=env,
                       writable=[*([self.trusted_cache] if trusted else []), *(extra_writable or [])],
                       compile_cache=None if trusted else compile_cache,
                       readable=readable or [],
                       gpu=gpu, channel=channel, device_lock=self.device_lock_path() if gpu_lock else None,
                       trusted=trusted, folder_writable=folder_writable, proc_children=proc_children)

    def device_lock_path(self) -> Path | None:
        """The lock shared by every job on this evaluator's GPU, by every process of this user on this
        machine (None on the CPU: interpreter times mean nothing, so CPU jobs need not wait for each
        other)."""
        if self.device != "cuda":
            return None
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [v.strip() for v in visible.split(",")] if visible else None
        physical = ids[self.config.gpu] if ids else str(self.config.gpu)
        return self.config.lock_dir / f"gpu-{cache.slug(physical)}.lock"

    # the clean baselines -----------------------------------------------------------------------
    def device_label(self) -> str:
        return gpu_name(self.config.gpu) if self.device == "cuda" else "cpu"

    def ceilings_path(self) -> Path:
        import torch

        return self.config.cache_dir / "ceilings" / f"{cache.slug(self.device_label())}-torch{torch.__version__}.json"

    def baseline(self, task: Task) -> tuple[ReferenceResult, Ceilings | None]:
        """The task's clean baselines, from the cache or from a fresh oracle job. A task too large to be
        judged on this GPU is refused here, before any candidate runs."""
        result, ceilings = self._baseline(task)
        refusal = device_memory.refusal(result.eager_peak_bytes, result.device_total_bytes, self.device_label())
        if refusal:
            raise EvalError(refusal)
        return result, ceilings

    def _baseline(self, task: Task) -> tuple[ReferenceResult, Ceilings | None]:
        import torch

        key = cache.key_of(task.sha256, task.size, self.device_label(), torch.__version__, task.dtype,
                           self.config.measure_compile, self.config.timing.model_dump(exclude={"calls_per_request"}),
                           BASELINE_FORMAT)  # baselines are timed one call a request, whatever the policy
        path = self.config.cache_dir / "references" / f"{cache.slug(task.name)}-{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # One baseline job per task at a time, across evaluators and processes.
        with open(path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            ceilings = cache.load(self.ceilings_path(), Ceilings) if self.device == "cuda" else None
            if ceilings is not None and ceilings.sms is None:
                ceilings = None  # cached before the GPU's shape was recorded: measured again, once
            cached = cache.load(path, ReferenceResult)
            if cached is not None and (self.device == "cpu" or ceilings is not None):
                return cached, ceilings
            result = self._measure_baseline(task, measure_ceilings=self.device == "cuda" and ceilings is None)
            if result.ceilings is not None:
                cache.store(self.ceilings_path(), result.ceilings)
                ceilings, result.ceilings = result.ceilings, None
            cache.store(path, result)
            return result, ceilings

    def _measure_baseline(self, task: Task, measure_ceilings: bool) -> ReferenceResult:
        """The baselines, measured by the task's oracle while this evaluator holds the GPU."""
        oracle = self.processes.oracle(task, self.readable)
        lock = take_lock(self.device_lock_path())[0] if self.device == "cuda" else nullcontext()
        try:
            with lock:
                ask = oracle_asker(oracle, self.config.reference_timeout_s)
                ask({"op": "load", "task": str(oracle.folder / "task.py"), "size": task.size, "dtype": task.dtype,
                     "device": self.device, "init_seed": 42, "outbox": str(oracle.outbox)}, "loading the reference")
                reply = ask({"op": "baseline", "timing": self.config.timing.model_dump(), "seeds": BASELINE_SEEDS,
                             "measure_compile": self.config.measure_compile, "measure_ceilings": measure_ceilings,
                             "declared_flops": task.declared_flops, "declared_bytes": task.declared_bytes},
                            "measuring baselines")
        except Stop as stop:
            outcome = self.processes.drop_oracle(oracle)
            if stop.out_of_memory:
                raise EvalError(device_memory.reference_alone_refusal(stop.out_of_memory, self.device_label())
                                ) from None
            # the oracle is stopped either way; a task error is the reason, not the stop that follows it
            why = stop.detail if stop.task_error else (process_failure(outcome, None)
                                                       or f"{stop.detail} (during {stop.phase})")
            tail = "" if stop.task_error or outcome is None else " | ".join(outcome.log_tail.strip().splitlines()[-4:])
            raise EvalError(f"the task's reference could not be measured: {why}" + (f" ({tail})" if tail else "")
                            ) from None
        return ReferenceResult.model_validate(reply["result"])

    # candidates ---------------------------------------------------------------------------------
    def evaluate(self, task: Task, candidate: Path, trace_below_ms: float | None = None,
                 compile_afresh: bool = False) -> tuple[Verdict, int]:
        """Judge ``candidate``; returns the verdict and the CLI exit code (0 accepted, 1 rejected, 3 no GPU).
        ``trace_below_ms``: a search's bar for the forensic pass; a correct candidate no faster than it
        could not be handed back (its run re-judges its fastest with the pass), so it is not traced.
        ``compile_afresh``: compile into an empty cache (a final re-judge: the handed-back source's own
        kernels, whatever earlier processes left in its cache)."""
        began = time.monotonic()
        try:
            source = candidate.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalError(f"cannot read the candidate {candidate}: {exc}") from None
        static = check_candidate(source, strict=not task.allow_partial)
        static_s = time.monotonic() - began
        base = dict(task=task.name, candidate=str(candidate), size=task.size, isolation={},
                    device=self.device_label())
        if not static.passed:
            return Verdict(compiled=False, correct=False, reason=static.first_failure(), checks=static.checks,
                           **base), 1
        if self.device == "cpu" and "cuda" in static.kinds:
            gate = compile_gate(static.cuda_sources, self.workspace / "cuda-gate")
            reason = ("CUDA candidates need a GPU to be judged; the compile gate "
                      + ("passed: " if gate.passed else "failed: ") + gate.detail)
            return Verdict(compiled=gate.passed, correct=False, reason=reason, checks=[*static.checks, gate],
                           **base), (3 if gate.passed else 1)
        verdict = self.run_in_sandbox(task, candidate, static.checks, trace_below_ms=trace_below_ms,
                                      compile_afresh=compile_afresh)
        verdict.phases["static checks"] = round(static_s, 4)
        verdict.wall_s = round(time.monotonic() - began, 3)
        return verdict, 0 if verdict.correct else 1

    def run_in_sandbox(self, task: Task, candidate: Path, static_checks: list[Check],
                       readable: list[Path] | None = None, trace_below_ms: float | None = None,
                       compile_afresh: bool = False, owned_sources: Sequence[str] = ()) -> Verdict:
        """The runtime half of :meth:`evaluate`: the session with the oracle and the candidate's process,
        then the forensic pass for a candidate about to be accepted on a GPU. ``readable``: folders both
        processes may read (a model's own files, for a whole network judged end to end);
        ``owned_sources``: kernel sources the trusted side put into the candidate as text (a reassembled
        network's verified regions), whose kernels the forensic pass counts as the candidate's own.

        Tests call it directly to prove that the runtime defences hold without the static ones.
        """
        self.readable = list(readable or [])
        # the timed process and the forensic pass of one evaluation share the candidate's kept cache
        cache_name = self.caches.name_for(candidate.read_bytes(), afresh=compile_afresh)
        if not self.readable and self.device == "cpu":
            self.processes.warm()  # imports while the baselines are measured: CPU times mean nothing
        began = time.monotonic()
        baseline, ceilings = self.baseline(task)
        baseline_s = time.monotonic() - began
        record = self._session(task, candidate, cache_name, footprint=baseline.eager_peak_bytes,
                               eager_ms=baseline.eager.median_ms if baseline.eager else None)
        record.phases["the task's baselines (measured once, then cached)"] = round(baseline_s, 4)
        self._blame_beside(record)
        if record.reference_error:
            raise EvalError(record.reference_error)
        if record.harness_error:
            raise EvalError(record.harness_error, exit_code=EXIT_ENVIRONMENT)
        verdict = judge(task, str(candidate), static_checks, baseline, ceilings, record, self.memory_text())
        if verdict.correct and self.device == "cuda":
            if trace_below_ms is not None and (verdict.runtime_ms or 0.0) >= trace_below_ms:
                verdict.assurance = forensic.untraced_slower(trace_below_ms)
            else:
                try:
                    forensic.apply(verdict, self, task, candidate, cache_name, owned_sources)
                except HarnessFault as exc:
                    raise EvalError(str(exc), exit_code=EXIT_ENVIRONMENT) from None
        if compile_afresh:
            self.caches.drop(cache_name)  # no later process has this name
        if not self.readable:
            self.processes.warm()  # the next candidate's process imports now, while nothing is timed
            self._warm_forensic(task)
        return verdict

    def _blame_beside(self, record: Record) -> None:
        """A reference that had worked (its baselines, earlier sessions) and fails beside a candidate's
        process is taken as that candidate's doing, up to ``REFERENCE_FAILURES_BLAMED`` sessions in a
        row: one hostile candidate must not end a run (a failed reference fails it). Past that, the
        reference fails for every candidate alike, and the evaluation stops with its error."""
        if not record.reference_error:
            self._reference_failures = 0
            return
        if not record.reference_failed_beside or self._reference_failures >= REFERENCE_FAILURES_BLAMED:
            return
        self._reference_failures += 1
        record.failure = (f"{record.reference_error} (while the candidate's process ran; the reference had run "
                          "before, so this is taken as the candidate's doing)")
        record.reference_error = None

    def _warm_forensic(self, task: Task) -> None:
        """On a GPU, start the next forensic pass's process now, while nothing is timed: ncu and the
        process's imports (most of the pass's seconds) are then done before a candidate needs them."""
        binary = ncu.find_ncu() if self.device == "cuda" and self.config.forensic else None
        if binary is None:
            return
        try:
            self.processes.warm_traced(*self._traced_process(binary, self.processes.oracle(task, self.readable)))
        except (OSError, RuntimeError, ValueError):
            pass  # a head start only: the pass starts its own process when it comes

    def _traced_process(self, binary: str, oracle: Oracle) -> tuple[list[Path], Callable[[Path], list[str]]]:
        """What the forensic pass's process reads (the oracle's input files, ncu's install) and its
        launcher: one place, so that a process started ahead is the one the pass asks for."""
        return ([*self.readable, oracle.outbox, *ncu.install_folders(binary)],
                functools.partial(forensic_launcher, binary))

    def _session(self, task: Task, candidate: Path, cache_name: str, **how: Any) -> Record:
        """One session (:meth:`_one_session` says what ``how`` holds). Where CUDA did not start in the
        candidate's process, no candidate code had run: the session is tried once more in a fresh
        process (a machine's passing fault must not cost the candidate its verdict), and the verdict's
        isolation says so."""
        record = self._one_session(task, candidate, cache_name, **how)
        if not record.cuda_start_failed:
            return record
        first = f"CUDA did not start; the process: {record.worker_end}"
        again = self._one_session(task, candidate, cache_name, **how)
        if again.cuda_start_failed:
            again.harness_error = f"{again.harness_error} (twice, in two fresh processes; in the first, {first})"
        elif again.worker_isolation is not None:
            again.worker_isolation.warnings.append(f"judged in a second process: in the first, {first}")
        return again

    def _one_session(self, task: Task, candidate: Path, cache_name: str,  # noqa: ANN202 - Record
                     forensic: str | None = None, footprint: int | None = None, eager_ms: float | None = None,
                     forensic_calls: int = FORENSIC_CALLS):
        """One session (``cache_name``: the candidate's kept compile cache, ``caches.name_for``;
        ``forensic``: ncu's path, for the forensic pass, of ``forensic_calls`` calls; ``footprint``: one
        eager call's peak device memory; ``eager_ms``: the reference's cached time): its Record."""
        oracle = self.processes.oracle(task, self.readable)
        readable, launcher = (list(self.readable), None) if forensic is None else self._traced_process(forensic, oracle)
        worker = self.processes.worker(readable, launcher)
        write_into(worker.folder, "task.py", task.path.read_bytes())
        write_into(worker.folder, "candidate.py", candidate.read_bytes())
        plan = Plan(task=task, task_path=worker.folder / "task.py", candidate_path=worker.folder / "candidate.py",
                    device=self.device, timing=self.config.timing, checked_sets=self.config.seeds,
                    strict_layout=self.config.strict_layout, worker_outbox=worker.outbox,
                    oracle_task_path=oracle.folder / "task.py", forensic=forensic is not None,
                    oracle_outbox=oracle.outbox, oracle_timeout_s=self.config.reference_timeout_s,
                    cuda_graph=self.config.cuda_graph and forensic is None, eager_peak_bytes=footprint,
                    eager_ms=eager_ms)
        if forensic is not None:
            plan.checked_sets = forensic_calls
        session = Session(plan, oracle.job, worker.job, self.device_lock_path())
        with self.caches.lent(cache_name, worker.cache):
            try:
                record = session.run()
            finally:
                ending = time.monotonic()
                session.close()  # also gives the GPU's lock back, whatever happened
                outcome = worker.job.wait(10)  # the process and all it started have ended
                remove_tree(worker.outbox)  # the candidate's to fill: nothing it left outlives its session
        record.worker = outcome
        if record.cuda_start_failed:
            record.worker_end = ended_how(outcome, self.memory_text())
            record.harness_error = f"{record.harness_error}; the process: {record.worker_end}"
        record.phases["ending the processes"] = round(time.monotonic() - ending, 4)
        record.worker_isolation = worker.job.isolation
        record.worker_folder, record.worker_outbox, record.worker_trace = worker.folder, worker.outbox, worker.trace
        if record.reference_error or record.oracle_unfit:
            self.processes.drop_oracle(oracle)
        return record

    # advice (never a verdict) ------------------------------------------------------------------
    def triton_gate(self, task: Task, candidate: Path, capability: int = 90) -> dict:
        from kernelevo.sandbox.advice.side_jobs import triton_gate

        return triton_gate(self, task, candidate, capability)

    def inductor_code(self, task: Task) -> str:
        from kernelevo.sandbox.advice.side_jobs import inductor_code

        return inductor_code(self, task)

    def ncu_pass(self, task: Task, candidate: Path):  # noqa: ANN201 - (kernels, why not, seconds)
        from kernelevo.sandbox.advice.side_jobs import ncu_pass

        return ncu_pass(self, task, candidate)


def static_only_checks(source: str, strict: bool) -> list[Check]:
    """The static checks alone (for tools that want a cheap first opinion)."""
    return check_candidate(source, strict=strict).checks
