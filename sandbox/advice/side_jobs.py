"""Sandboxed passes that advise rather than judge: the Triton compile gate and the Nsight Compute
profile. They run candidate code, in the sandbox, and write their findings to a file the candidate
could overwrite: nothing here ever decides a verdict."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from kernelevo.sandbox.advice import ncu
from kernelevo.sandbox.isolation.namespaces import read_no_follow, write_into
from kernelevo.sandbox.judge.verdict import process_failure
from kernelevo.sandbox.models import KernelMetrics
from kernelevo.tasks.task import Task


def _job(evaluator: Any, task: Task, candidate: Path, label: str, result: str, **fields: object) -> Path:
    """A job folder: copies of the task and the candidate, and ``job.json`` naming where ``result`` goes."""
    job_dir = evaluator.job_dir(label)
    write_into(job_dir, "task.py", task.path.read_bytes())
    write_into(job_dir, "candidate.py", candidate.read_bytes())
    job = {"task": str(job_dir / "task.py"), "candidate": str(job_dir / "candidate.py"), "size": task.size,
           "dtype": task.dtype, "result": str(job_dir / result), **fields}
    write_into(job_dir, "job.json", json.dumps(job).encode())
    return job_dir


def _own_cache(evaluator: Any, candidate: Path) -> contextlib.AbstractContextManager[Path]:
    """A side job's own compile cache, holding what the candidate's earlier processes compiled while
    the job runs, kept for its later ones afterwards."""
    return evaluator.caches.lent(evaluator.caches.name_for(candidate.read_bytes()), evaluator.caches.scratch())


def triton_gate(evaluator: Any, task: Task, candidate: Path, capability: int = 90) -> dict:
    """Compile the candidate's Triton kernels for a GPU target without running them
    (``child/triton_gate.py``): ``{"ok", "kernels": [{kernel, ok, resources | error}], "error"}``."""
    job_dir = _job(evaluator, task, candidate, "triton-gate", "gate.json", capability=capability)
    env = evaluator.env()
    env.pop("TRITON_INTERPRET", None)  # real JITFunctions: the gate compiles them, never runs them
    with _own_cache(evaluator, candidate) as cache:
        spec = evaluator.spec("kernelevo.sandbox.child.triton_gate", job_dir, min(evaluator.config.timeout_s, 300),
                              trusted=False, channel=False, env=env, compile_cache=cache,
                              cmd=[sys.executable, "-m", "kernelevo.sandbox.child.triton_gate",
                                   str(job_dir / "job.json")])
        spec.gpu = False
        outcome = evaluator.sandbox.run(spec)
    try:
        return json.loads(read_no_follow(job_dir / "gate.json"))
    except (OSError, ValueError):
        failure = process_failure(outcome, None) or f"no result (exit code {outcome.returncode})"
        return {"ok": False, "kernels": [], "error": f"the gate process failed: {failure}",
                "log": outcome.log_tail[-1500:]}


def ncu_pass(evaluator: Any, task: Task, candidate: Path) -> tuple[list[KernelMetrics], str | None, float]:
    """Nsight Compute over one call of the candidate's forward, in the sandbox and under the GPU lock
    (``child/profile_target.py``): ``(kernels, why not, seconds)``. A separate pass from the timing one,
    so that ncu's replays never touch the timed numbers."""
    if evaluator.device != "cuda":
        return [], "no GPU (the CPU interpreter runs no GPU kernels)", 0.0
    binary = ncu.find_ncu()
    if binary is None:
        return [], "ncu not found (install Nsight Compute, or set KERNELEVO_NCU to its path)", 0.0
    job_dir = _job(evaluator, task, candidate, "ncu", "target.json", seed=evaluator.config.seed_offset + 1)
    log = job_dir / "ncu.csv"
    cmd = [binary, "--csv", "--log-file", str(log), "--profile-from-start", "off", "--clock-control", "none",
           "--target-processes", "all", "--launch-count", str(ncu.LAUNCH_LIMIT), "--metrics", ",".join(ncu.METRICS),
           sys.executable, "-m", "kernelevo.sandbox.child.profile_target", str(job_dir / "job.json")]
    began = time.monotonic()
    with _own_cache(evaluator, candidate) as cache:
        spec = evaluator.spec("", job_dir, evaluator.config.timeout_s * 2, trusted=False, channel=False,
                              gpu_lock=True, cmd=cmd, readable=ncu.install_folders(binary), proc_children=True,
                              compile_cache=cache)
        outcome = evaluator.sandbox.run(spec)
    seconds = round(time.monotonic() - began, 1)
    text = read_no_follow(log)
    kernels = ncu.parse(text)
    if kernels:
        return kernels, None, seconds
    why = ncu.refusal(text + "\n" + outcome.log_tail)
    if why is None:
        try:
            target = json.loads(read_no_follow(job_dir / "target.json"))
        except (OSError, ValueError):
            target = {}
        if target.get("error"):
            why = f"the candidate failed under ncu: {target['error'][:300]}"
        else:
            why = f"ncu gave no metrics ({process_failure(outcome, None) or 'no kernel was profiled'})"
    return [], why, seconds


def inductor_code(evaluator: Any, task: Task) -> str:
    """The code torch.compile generates for the task's reference (``advice/inductor_dump.py``), in a
    trusted job: it runs the reference only. Raises RuntimeError, saying why, where it cannot be had."""
    job_dir = evaluator.job_dir("inductor")
    write_into(job_dir, "task.py", task.path.read_bytes())
    cache = job_dir / "inductor-cache"
    job = {"task": str(job_dir / "task.py"), "size": task.size, "dtype": task.dtype, "device": evaluator.device,
           "cache": str(cache), "result": str(job_dir / "generated.py")}
    write_into(job_dir, "job.json", json.dumps(job).encode())
    spec = evaluator.spec("", job_dir, max(evaluator.config.timeout_s, 300), trusted=True, channel=False,
                          gpu_lock=True, cmd=[sys.executable, "-m", "kernelevo.sandbox.advice.inductor_dump",
                                              str(job_dir / "job.json")])
    outcome = evaluator.sandbox.run(spec)
    try:
        text = read_no_follow(job_dir / "generated.py")
    except OSError:
        text = ""
    if not text.strip():
        failure = process_failure(outcome, None) or f"exit code {outcome.returncode}"
        tail = " | ".join(outcome.log_tail.strip().splitlines()[-3:])
        raise RuntimeError(f"torch.compile of the reference gave no code ({failure}): {tail[-400:]}")
    return text
