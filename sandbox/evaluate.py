"""Judge one candidate against one task: static checks, the cached clean reference, the sandboxed
candidate run, then the verdict. The optimizer process never imports candidate code."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from kernelevo.sandbox import cache
from kernelevo.sandbox.cuda_gate import compile_gate
from kernelevo.sandbox.isolation import scrubbed_env
from kernelevo.sandbox.judge import judge, process_failure
from kernelevo.sandbox.models import Ceilings, Check, Job, KernelMetrics, ReferenceResult, TimingPolicy, Verdict
from kernelevo.sandbox.process import ProcessSandbox, RunSpec
from kernelevo.sandbox.protocol import Sandbox
from kernelevo.sandbox.static_checks import check_candidate
from kernelevo.tasks.task import Task


class EvalError(Exception):
    """Evaluation could not happen at all; ``exit_code`` follows the CLI contract (2 input, 3 environment)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class EvalConfig(BaseModel):
    """How to judge: limits of the sandboxed process and what to measure."""

    timeout_s: float = 300.0
    """Wall-clock limit of the candidate's process (compile included)."""
    reference_timeout_s: float = 1200.0
    memory: str | None = None
    """Memory limit of the candidate's process, e.g. ``8g`` (None: no limit)."""
    pids_limit: int = 512
    seeds: int = Field(default=5, ge=1, le=50)
    seed_offset: int = 0
    """Input sets use seeds offset+1 .. offset+seeds: a final re-judge uses fresh ones."""
    compile_cache: Path | None = None
    """Triton/extension/inductor caches (default: inside the workspace). A run shares one across resumes."""
    gpu: int = 0
    workdir: Path | None = None
    """Keep job folders here; default: a temporary folder removed afterwards."""
    cache_dir: Path = Field(default_factory=cache.default_cache_dir)
    measure_compile: bool = True
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
    """Evaluates candidates for tasks; keeps one workspace (and compile cache) per instance."""

    def __init__(self, config: EvalConfig | None = None, sandbox: Sandbox | None = None) -> None:
        self.config = config or EvalConfig()
        self.sandbox = sandbox or ProcessSandbox()
        self.device = detect_device()
        self._own_workspace = self.config.workdir is None
        root = self.config.workdir or Path(tempfile.mkdtemp(prefix="kernelevo-eval-"))
        self.workspace = root.resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.compile_cache = (self.config.compile_cache or self.workspace / "cache").resolve()
        self.compile_cache.mkdir(parents=True, exist_ok=True)
        self._jobs = 0

    def close(self) -> None:
        if self._own_workspace:
            shutil.rmtree(self.workspace, ignore_errors=True)

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # jobs -------------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        compile_cache = self.compile_cache
        extra = {
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TRITON_CACHE_DIR": str(compile_cache / "triton"),
            "TORCH_EXTENSIONS_DIR": str(compile_cache / "torch_extensions"),
            "TORCHINDUCTOR_CACHE_DIR": str(compile_cache / "inductor"),
            "XDG_CACHE_HOME": str(compile_cache / "xdg"),
        }
        if self.device == "cuda":
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = [v.strip() for v in visible.split(",")] if visible else None
            extra["CUDA_VISIBLE_DEVICES"] = ids[self.config.gpu] if ids else str(self.config.gpu)
        else:
            extra["TRITON_INTERPRET"] = "1"
            extra["CUDA_VISIBLE_DEVICES"] = ""
        return scrubbed_env(extra)

    def _memory_bytes(self) -> int | None:
        """The configured memory limit of a candidate's process, in bytes (None: no limit)."""
        if not self.config.memory:
            return None
        from kernelevo.sandbox.isolation import parse_size

        return parse_size(self.config.memory)

    def _job(self, task: Task, mode: str, candidate: Path | None, **extra: object) -> tuple[Job, RunSpec]:
        self._jobs += 1
        job_dir = self.workspace / "jobs" / f"{self._jobs:04d}-{mode}"
        job_dir.mkdir(parents=True, exist_ok=True)
        task_copy = job_dir / "task.py"
        shutil.copyfile(task.path, task_copy)
        job = Job(
            mode=mode, task_path=task_copy, size=task.size, dtype=task.dtype, atol=task.atol, rtol=task.rtol,
            allow_partial=task.allow_partial, declared_flops=task.declared_flops,
            declared_bytes=task.declared_bytes,
            seeds=[self.config.seed_offset + i for i in range(1, self.config.seeds + 1)],
            device=self.device, timing=self.config.timing, measure_compile=self.config.measure_compile,
            result_path=job_dir / "result.json", **extra,
        )
        if candidate is not None:
            job.candidate_path = job_dir / "candidate.py"
            shutil.copyfile(candidate, job.candidate_path)
        (job_dir / "job.json").write_text(job.model_dump_json(indent=1))
        memory = self._memory_bytes() if mode == "candidate" else None
        spec = RunSpec(
            cmd=[sys.executable, "-m", "kernelevo.sandbox.harness", str(job_dir / "job.json")],
            job_dir=job_dir, result_path=job.result_path,
            timeout_s=self.config.timeout_s if mode == "candidate" else self.config.reference_timeout_s,
            memory_bytes=memory, memory_text=self.config.memory if memory else None,
            pids_limit=self.config.pids_limit, env=self._env(),
            writable=[self.compile_cache], hidden=[self.config.cache_dir.resolve(), self.workspace],
            device_lock=self.device_lock_path(),
        )
        return job, spec

    # the clean reference ------------------------------------------------------------------------
    def _device_label(self) -> str:
        return gpu_name(self.config.gpu) if self.device == "cuda" else "cpu"

    def device_lock_path(self) -> Path | None:
        """The lock shared by every job on this evaluator's GPU (None on the CPU: interpreter times mean
        nothing, so CPU jobs need not wait for each other)."""
        if self.device != "cuda":
            return None
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [v.strip() for v in visible.split(",")] if visible else None
        physical = ids[self.config.gpu] if ids else str(self.config.gpu)
        return self.config.cache_dir / "locks" / f"gpu-{cache.slug(physical)}.lock"

    def ceilings_path(self) -> Path:
        import torch

        return self.config.cache_dir / "ceilings" / f"{cache.slug(self._device_label())}-torch{torch.__version__}.json"

    def reference(self, task: Task) -> tuple[ReferenceResult, Ceilings | None]:
        """The task's clean reference measurements, from the cache or from a fresh reference job."""
        import torch

        key = cache.key_of(task.sha256, task.size, self.config.seeds, self.config.seed_offset,
                           self._device_label(), torch.__version__,
                           task.dtype, self.config.measure_compile, self.config.timing.model_dump(), 3)
        path = self.config.cache_dir / "references" / f"{cache.slug(task.name)}-{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # One reference job per task at a time, across evaluators and processes: the others wait for
        # its result instead of measuring the same thing again.
        with open(path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            return self._reference(task, path)

    def _reference(self, task: Task, path: Path) -> tuple[ReferenceResult, Ceilings | None]:
        ceilings = cache.load(self.ceilings_path(), Ceilings) if self.device == "cuda" else None
        cached = cache.load(path, ReferenceResult)
        if cached is not None and (self.device == "cpu" or ceilings is not None):
            return cached, ceilings
        _, spec = self._job(task, "reference", None, measure_ceilings=self.device == "cuda" and ceilings is None)
        outcome = self.sandbox.run(spec)
        failure = process_failure(outcome, None)
        if failure is None and outcome.result is not None and outcome.result.error:
            failure = outcome.result.error
        if failure is not None or outcome.result is None or outcome.result.reference is None:
            raise EvalError(f"the task's reference could not be measured: {failure or 'no result'}", exit_code=2)
        result = outcome.result.reference
        if result.ceilings is not None:
            cache.store(self.ceilings_path(), result.ceilings)
            ceilings = result.ceilings
            result.ceilings = None
        cache.store(path, result)
        return result, ceilings

    # candidates ---------------------------------------------------------------------------------
    def evaluate(self, task: Task, candidate: Path) -> tuple[Verdict, int]:
        """Judge ``candidate``; returns the verdict and the CLI exit code (0 accepted, 1 rejected, 3 no GPU)."""
        began = time.monotonic()
        try:
            source = candidate.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalError(f"cannot read the candidate {candidate}: {exc}") from None
        static = check_candidate(source, strict=not task.allow_partial)
        base = dict(task=task.name, candidate=str(candidate), size=task.size, isolation={},
                    device=self._device_label())
        if not static.passed:
            return Verdict(compiled=False, correct=False, reason=static.first_failure(), checks=static.checks,
                           **base), 1
        if self.device == "cpu" and "cuda" in static.kinds:
            gate = compile_gate(static.cuda_sources, self.workspace / "cuda-gate")
            checks = [*static.checks, gate]
            reason = ("CUDA candidates need a GPU to be judged; the compile gate "
                      + ("passed: " if gate.passed else "failed: ") + gate.detail)
            return Verdict(compiled=gate.passed, correct=False, reason=reason, checks=checks, **base), (
                3 if gate.passed else 1)
        verdict = self.run_in_sandbox(task, candidate, static.checks)
        verdict.wall_s = round(time.monotonic() - began, 3)
        return verdict, 0 if verdict.correct else 1

    def _side_job(self, task: Task, candidate: Path, label: str, result: str, **fields: object) -> Path:
        """A job folder for a pass that advises rather than judges (the compile gate, ncu): copies of
        the task and the candidate, and ``job.json`` with ``fields`` and where to write ``result``."""
        self._jobs += 1
        job_dir = self.workspace / "jobs" / f"{self._jobs:04d}-{label}"
        job_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.path, job_dir / "task.py")
        shutil.copyfile(candidate, job_dir / "candidate.py")
        job = {"task": str(job_dir / "task.py"), "candidate": str(job_dir / "candidate.py"), "size": task.size,
               "dtype": task.dtype, "result": str(job_dir / result), **fields}
        (job_dir / "job.json").write_text(json.dumps(job))
        return job_dir

    def side_spec(self, cmd: list[str], job_dir: Path, result_path: Path, timeout_s: float, *, gpu: bool = False,
                  env: dict[str, str] | None = None) -> RunSpec:
        """A sandboxed job beside the judging ones (the compile gate, the ncu pass, a model's end-to-end
        check): this evaluator's limits and environment, its compile cache writable, the reference cache
        and other jobs hidden; ``gpu`` jobs run under the GPU's lock."""
        memory = self._memory_bytes()
        return RunSpec(cmd=cmd, job_dir=job_dir, result_path=result_path, timeout_s=timeout_s, memory_bytes=memory,
                       memory_text=self.config.memory if memory else None, pids_limit=self.config.pids_limit,
                       env=self._env() if env is None else env, writable=[self.compile_cache],
                       hidden=[self.config.cache_dir.resolve(), self.workspace],
                       device_lock=self.device_lock_path() if gpu else None)

    def triton_gate(self, task: Task, candidate: Path, capability: int = 90) -> dict:
        """Compile the candidate's Triton kernels for a GPU target, in the sandbox, without running them
        (``sandbox/triton_gate.py``): ``{"ok", "kernels": [{kernel, ok, resources | error}], "error"}``."""
        job_dir = self._side_job(task, candidate, "triton-gate", "gate.json", capability=capability)
        env = self._env()
        env.pop("TRITON_INTERPRET", None)  # real JITFunctions: the gate compiles them, never runs them
        outcome = self.sandbox.run(self.side_spec(
            [sys.executable, "-m", "kernelevo.sandbox.triton_gate", str(job_dir / "job.json")], job_dir,
            job_dir / "gate.json", min(self.config.timeout_s, 300), env=env))
        try:
            return json.loads((job_dir / "gate.json").read_text())
        except (OSError, ValueError):
            failure = process_failure(outcome, None) or "no result"
            return {"ok": False, "kernels": [], "error": f"the gate process failed: {failure}",
                    "log": outcome.log_tail[-1500:]}

    def ncu_pass(self, task: Task, candidate: Path) -> tuple[list[KernelMetrics], str | None, float]:
        """Nsight Compute over one call of the candidate's forward, in the sandbox and under the GPU lock
        (``sandbox/profile_target.py``): ``(kernels, why not, seconds)``. A separate pass from the
        timing one, so that ncu's replays never touch the timed numbers."""
        from kernelevo.sandbox import ncu

        if self.device != "cuda":
            return [], "no GPU (the CPU interpreter runs no GPU kernels)", 0.0
        binary = ncu.find_ncu()
        if binary is None:
            return [], "ncu not found (install Nsight Compute, or set KERNELEVO_NCU to its path)", 0.0
        job_dir = self._side_job(task, candidate, "ncu", "target.json", seed=self.config.seed_offset + 1)
        log = job_dir / "ncu.csv"
        cmd = [binary, "--csv", "--log-file", str(log), "--profile-from-start", "off", "--clock-control", "none",
               "--target-processes", "all", "--launch-count", str(ncu.LAUNCH_LIMIT),
               "--metrics", ",".join(ncu.METRICS),
               sys.executable, "-m", "kernelevo.sandbox.profile_target", str(job_dir / "job.json")]
        spec = self.side_spec(cmd, job_dir, job_dir / "target.json", self.config.timeout_s * 2, gpu=True)
        began = time.monotonic()
        outcome = self.sandbox.run(spec)
        seconds = round(time.monotonic() - began, 1)
        text = log.read_text(errors="replace") if log.exists() else ""
        kernels = ncu.parse(text)
        if kernels:
            return kernels, None, seconds
        why = ncu.refusal(text + "\n" + outcome.log_tail)
        if why is None:
            try:
                target = json.loads((job_dir / "target.json").read_text())
            except (OSError, ValueError):
                target = {}
            if target.get("error"):
                why = f"the candidate failed under ncu: {target['error'][:300]}"
            else:
                why = f"ncu gave no metrics ({process_failure(outcome, None) or 'no kernel was profiled'})"
        return [], why, seconds

    def run_in_sandbox(self, task: Task, candidate: Path, static_checks: list[Check]) -> Verdict:
        """The runtime half of :meth:`evaluate`: the sandboxed harness and the judge.

        Tests call it directly to prove that the runtime defences hold without the static ones.
        """
        reference, ceilings = self.reference(task)
        excess = [[p.excess for p in prints] if prints else [] for prints in reference.output_prints]
        _, spec = self._job(task, "candidate", candidate, excess=excess)
        outcome = self.sandbox.run(spec)
        return judge(task, str(candidate), static_checks, reference, ceilings, outcome, self.config.memory)


def static_only_checks(source: str, strict: bool) -> list[Check]:
    """The static checks alone (for tools that want a cheap first opinion)."""
    return check_candidate(source, strict=strict).checks
