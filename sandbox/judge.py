"""From a job's outcome to a verdict: what the kernel said about the process, what the harness
found inside it, and the checks that need no candidate process at all (agreement with the clean
reference process, reference drift, speed of light)."""

from __future__ import annotations

from kernelevo.sandbox.ceilings import speed_of_light_ms
from kernelevo.sandbox.compare import compare_prints
from kernelevo.sandbox.diagnosis import verdict_diagnosis
from kernelevo.sandbox.models import Ceilings, Check, JobOutcome, ReferenceResult, TensorPrint, Verdict
from kernelevo.tasks.task import Task

# A time below this fraction of the speed-of-light floor is rejected. The floor uses measured
# ceilings (a torch copy, a torch matmul), which good kernels can beat by a little, never by 25%.
SPEED_OF_LIGHT_MARGIN = 0.75
# The reference timed in the candidate's process may differ from the clean baseline by this much,
# and by at least this many milliseconds (launch jitter dominates calls of a few microseconds).
MIN_DRIFT_TOLERANCE = 0.10
MIN_DRIFT_MS = 0.05


def process_failure(outcome: JobOutcome, memory_text: str | None) -> str | None:
    """Why the job produced no usable result, in words; None if it did."""
    during = f" during {outcome.phase}" if outcome.phase and outcome.phase != "done" else ""
    if outcome.timed_out:
        return (f"timed out after {outcome.isolation.timeout_s:.0f} s{during}; "
                "the whole process group was killed")
    if outcome.out_of_memory:
        return f"ran out of memory{during} (limit {memory_text}); the process was killed"
    if outcome.too_many_processes:
        return f"started too many processes{during} (limit {outcome.isolation.pids_limit}); killed"
    if outcome.result is None:
        if outcome.signal:
            return f"crashed with {outcome.signal}{during}"
        tail = outcome.log_tail.strip().splitlines()[-6:]
        return f"{outcome.result_problem} (exit code {outcome.returncode}{during})" + (
            ": " + " | ".join(tail) if tail else "")
    return None


def _compare_sets(got: list[list[TensorPrint] | None], want: list[list[TensorPrint] | None],
                  task: Task) -> str | None:
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None:
            continue
        if g is None:
            return f"set {i}: no usable output"
        if len(g) != len(w):
            return f"set {i}: {len(g)} outputs, the reference has {len(w)}"
        for k, (a, b) in enumerate(zip(g, w)):
            atol, rtol = task.tolerances(b.dtype)
            problem = compare_prints(a, b, atol, rtol)
            if problem:
                return f"set {i}, output {k}: {problem}"
    return None


def judge(task: Task, candidate_name: str, static_checks: list[Check], reference: ReferenceResult,
          ceilings: Ceilings | None, outcome: JobOutcome, memory_text: str | None) -> Verdict:
    checks = list(static_checks)
    verdict = Verdict(task=task.name, candidate=candidate_name, size=task.size, compiled=False, correct=False,
                      reason=None, checks=checks, device=reference.device,
                      isolation=outcome.isolation.model_dump(), flops=reference.flops, bytes=reference.bytes,
                      wall_s=round(outcome.wall_s, 3))
    failure = process_failure(outcome, memory_text)
    if failure is None and outcome.result is not None and outcome.result.error:
        failure = outcome.result.error
    if failure is not None or outcome.result is None or outcome.result.candidate is None:
        checks.append(Check(name="sandboxed run", passed=False, detail=failure or "no result"))
        verdict.reason = failure
        verdict.checks = checks
        return verdict
    result = outcome.result.candidate
    checks.extend(result.checks)
    verdict.compiled = result.compiled
    verdict.first_call_ms = result.first_call_ms
    verdict.launches = result.launches
    verdict.phases = result.phases
    verdict.telemetry = result.telemetry
    verdict.device = result.device
    if result.compiled and result.output_prints:
        problem = _compare_sets(result.output_prints, reference.output_prints, task)
        checks.append(Check(name="agrees with the clean reference process", passed=problem is None,
                            detail=problem or "fingerprints (sums and sampled values) match, judged outside "
                            "the candidate's process"))
        problem = _compare_sets(result.reference_prints, reference.output_prints, task)
        checks.append(Check(name="reference untouched", passed=problem is None,
                            detail=problem or "the reference computed the same in the candidate's process"))
    if result.candidate is not None:
        verdict.timing = result.timing
        verdict.runtime_ms = result.candidate.median_ms
        if result.timing == "cuda-events":
            _judge_gpu_timing(verdict, task, reference, ceilings, result.candidate_blocks,
                              result.reference.median_ms if result.reference else None, checks)
        else:
            verdict.reference_runtime_ms = result.reference.median_ms if result.reference else None
    verdict.checks = checks
    failed = [c for c in checks if not c.passed]
    verdict.correct = not failed
    verdict.reason = f"{failed[0].name}: {failed[0].detail}" if failed else None
    if verdict.correct and outcome.result.candidate.started_at is not None:
        own = sum(result.phases.get(p, 0.0) for p in ("importing the candidate", "first call", "timing"))
        verdict.harness_overhead_s = round(max(outcome.wall_s - own, 0.0), 3)
    if verdict.correct:
        verdict.diagnosis = verdict_diagnosis(verdict)
    return verdict


def _judge_gpu_timing(verdict: Verdict, task: Task, reference: ReferenceResult, ceilings: Ceilings | None,
                      blocks: list[float], rerun_ms: float | None, checks: list[Check]) -> None:
    runtime = verdict.runtime_ms
    assert runtime is not None
    if len(blocks) == 2 and min(blocks) > 0:
        verdict.noise_pct = round(100 * abs(blocks[0] - blocks[1]) / min(blocks), 2)
    if reference.eager is not None:
        eager = reference.eager.median_ms
        verdict.reference_runtime_ms = eager
        verdict.speedup = eager / runtime
        if rerun_ms is not None:
            drift = rerun_ms / eager - 1
            allowed = max(MIN_DRIFT_TOLERANCE, 3 * (verdict.noise_pct or 0) / 100, reference.eager.iqr_fraction,
                          MIN_DRIFT_MS / eager)
            checks.append(Check(
                name="reference timing stable", passed=abs(drift) <= allowed,
                detail=f"reference took {rerun_ms:.4g} ms in the candidate's process vs {eager:.4g} ms in the "
                f"clean baseline ({100 * drift:+.1f}%, allowed ±{100 * allowed:.0f}%)"
                + ("" if abs(drift) <= allowed else ": the candidate changed global state or the GPU is unstable"),
            ))
    if reference.compiled is not None:
        verdict.compile_runtime_ms = reference.compiled.median_ms
        verdict.speedup_vs_compile = reference.compiled.median_ms / runtime
    if ceilings is None:
        return
    dtype = task.dtype or "float32"
    floor_ms, bound = speed_of_light_ms(reference.flops, reference.bytes, ceilings, dtype)
    verdict.bound = bound
    verdict.roofline_fraction = floor_ms / runtime if runtime > 0 else None
    verdict.achieved_gbps = reference.bytes / (runtime * 1e-3) / 1e9
    verdict.achieved_tflops = reference.flops / (runtime * 1e-3) / 1e12
    possible = runtime >= SPEED_OF_LIGHT_MARGIN * floor_ms
    checks.append(Check(
        name="speed of light", passed=possible,
        detail=f"{runtime:.4g} ms vs a {bound}-bound floor of {floor_ms:.4g} ms "
        f"({100 * floor_ms / runtime:.0f}% of the roofline)"
        + ("" if possible else ": faster than this GPU can move the bytes or do the FLOPs: a timing escape or a bug"),
    ))
