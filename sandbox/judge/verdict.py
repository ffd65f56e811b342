"""From what a session recorded to a verdict (pure logic): how the candidate's process ended, the
checks the session ran, the times it held to its own clock, the clean baselines, the speed of light
and, on a GPU, the forensic pass."""

from __future__ import annotations

import statistics

from kernelevo.sandbox.advice.diagnosis import verdict_diagnosis
from kernelevo.sandbox.isolation import file_watch
from kernelevo.sandbox.judge import rules
from kernelevo.sandbox.judge.ceilings import speed_of_light_ms
from kernelevo.sandbox.judge.record import Record
from kernelevo.sandbox.judge.timing import (
    clock_figures,
    clock_problem,
    drift_allowance,
    fastest_pace,
    host_bound,
    impossible_calls,
    stats,
    unexplained_problem,
)
from kernelevo.sandbox.models import Ceilings, Check, JobOutcome, ReferenceResult, Verdict
from kernelevo.tasks.task import Task

# A time below this fraction of the speed-of-light floor is rejected. The floor uses measured
# ceilings (a torch copy, a torch matmul), which good kernels can beat by a little, never by 25%.
SPEED_OF_LIGHT_MARGIN = 0.75
INTERPRETER = ("interpreter: not forensic (the CPU interpreter runs no GPU kernels: what ran in torch is known "
               "only from inside the candidate's process)")


def process_failure(outcome: JobOutcome | None, memory_text: str | None) -> str | None:
    """Why a process ended early, in words; None where the kernel reports nothing unusual."""
    if outcome is None:
        return None
    during = f" during {outcome.phase}" if outcome.phase else ""
    if outcome.timed_out:
        return f"timed out after {outcome.isolation.timeout_s:.0f} s{during}; the whole process group was killed"
    if outcome.out_of_memory:
        return f"ran out of memory{during} (limit {memory_text}); the process was killed"
    if outcome.too_many_processes:
        return f"started too many processes{during} (limit {outcome.isolation.pids_limit}); killed"
    if outcome.too_many_files:
        return (f"created more than {file_watch.FILES_LIMIT:,} files in its folders, or folders the judge cannot "
                f"count{during}; killed")
    if outcome.signal and not (outcome.killed_by_judge and outcome.signal.startswith("SIGKILL")):
        return f"crashed with {outcome.signal}{during}"
    return None


def ended_how(outcome: JobOutcome | None, memory_text: str | None) -> str:
    """How a process ended, in words, with the last lines of its log: why it ended early where the
    kernel says, else its exit code."""
    if outcome is None:
        return "its end could not be read"
    said = process_failure(outcome, memory_text) or (
        "still running when the judge killed it" if outcome.killed_by_judge else f"exit code {outcome.returncode}")
    tail = outcome.log_tail.strip().splitlines()[-3:] if outcome.log_tail else []
    return said + (": " + " | ".join(line[:200] for line in tail) if tail else "")


def _failure_reason(record: Record, memory_text: str | None) -> str:
    killed = process_failure(record.worker, memory_text)
    if killed:
        return killed
    tail = (record.worker.log_tail.strip().splitlines()[-6:] if record.worker else [])
    code = f" (exit code {record.worker.returncode})" if record.worker and record.worker.returncode else ""
    return f"the candidate's process stopped answering during {record.failure}{code}" + (
        ": " + " | ".join(tail) if tail else "")


def judge(task: Task, candidate: str, static_checks: list[Check], baseline: ReferenceResult,
          ceilings: Ceilings | None, record: Record, memory_text: str | None) -> Verdict:
    checks = [*static_checks, *record.checks]
    iso = record.worker_isolation.model_dump() if record.worker_isolation else {}
    verdict = Verdict(task=task.name, candidate=candidate, size=task.size, compiled=record.compiled, correct=False,
                      reason=None, checks=checks, device=baseline.device, isolation=iso, flops=baseline.flops,
                      bytes=baseline.bytes, first_call_ms=record.first_call_ms, launches=record.launches,
                      max_abs_error=record.max_abs_error if record.compiled else None,
                      precision_ratio=rules.precision_ratio(record.precision, task.dtype or "float32"),
                      phases=record.phases, telemetry=record.telemetry,
                      log=str(record.worker_folder / "process.log") if record.worker_folder else None,
                      assurance=INTERPRETER if record.device != "cuda" else "gpu: not forensic (no forensic pass ran)")
    if record.failure is not None:
        checks.append(Check(name="sandboxed run", passed=False, detail=_failure_reason(record, memory_text)))
    if record.peak_bytes or baseline.eager_peak_bytes:
        verdict.memory = {**({"eager": baseline.eager_peak_bytes} if baseline.eager_peak_bytes else {}),
                          **record.peak_bytes}
    if record.blocks and record.ok:
        try:
            _judge_times(verdict, task, baseline, ceilings, record, checks)
        except (ArithmeticError, ValueError) as exc:  # figures from the candidate's process no ratio takes
            checks.append(Check(name="timed runs correct", passed=False,
                                detail=f"the reported times could not be judged ({type(exc).__name__}: {exc})"))
        _graph_times(verdict, record)
    verdict.checks = checks
    failed = [c for c in checks if not c.passed]
    verdict.correct = not failed
    verdict.reason = f"{failed[0].name}: {failed[0].detail}" if failed else None
    if verdict.correct:
        own = sum(record.phases.get(p, 0.0) for p in ("importing the candidate", "timing"))
        verdict.harness_overhead_s = round(max(record.phases.get("total", 0.0) - own, 0.0), 3)
        verdict.diagnosis = verdict_diagnosis(verdict)
    return verdict


def _judge_times(verdict: Verdict, task: Task, baseline: ReferenceResult, ceilings: Ceilings | None,
                 record: Record, checks: list[Check]) -> None:
    times = [t for block in record.blocks for t in block.times_ms]
    verdict.runtime_ms, verdict.pace_ms = stats(times).median_ms, fastest_pace(record.blocks)
    verdict.host_bound = host_bound(verdict.runtime_ms, verdict.pace_ms)
    verdict.host_ms = statistics.median(h for block in record.blocks for h in block.host_ms)
    rerun = stats(record.reference_block.times_ms).median_ms if record.reference_block and \
        record.reference_block.times_ms else None
    eager_ms = baseline.eager.median_ms if baseline.eager else None
    _cross_check(record, checks, eager_ms)
    verdict.clock = clock_figures(record.blocks, record.reference_block, record.device, eager_ms)
    if verdict.clock is not None and record.clock_first is not None:  # the doubted round, thrown away
        verdict.clock["first_round"] = record.clock_first
    if record.device != "cuda":
        verdict.timing = "cpu-interpreter"
        if record.reference_block and record.reference_block.times_ms:
            verdict.reference_runtime_ms = stats(record.reference_block.times_ms).median_ms
        return
    verdict.timing = "cuda-events"
    medians = [stats(b.times_ms).median_ms for b in record.blocks if b.times_ms]
    if len(medians) == 2 and min(medians) > 0:
        verdict.noise_pct = round(100 * abs(medians[0] - medians[1]) / min(medians), 2)
    if baseline.eager is not None:
        verdict.reference_pace_ms = baseline.eager.pace_ms
        verdict.reference_runtime_ms = baseline.eager.median_ms
        verdict.speedup = baseline.eager.median_ms / verdict.runtime_ms
    if baseline.compiled is not None:
        verdict.compile_runtime_ms = baseline.compiled.median_ms
        verdict.speedup_vs_compile = baseline.compiled.median_ms / verdict.runtime_ms
    if baseline.eager is not None and rerun is not None:
        checks.append(_reference_moved(verdict, baseline, rerun))
    if ceilings is not None:
        _speed_of_light(verdict, task, baseline, ceilings, checks)


def _reference_moved(verdict: Verdict, baseline: ReferenceResult, rerun: float) -> Check:
    """The reference re-timed in this evaluation against its cached baseline: the speedups are taken
    against the faster of the two (torch.compile's moved as eager's did), so that they never gain from
    a reference that got slower (its own state: a convolution library picks its algorithm by the memory
    it finds free, and one KernelBench ConvTranspose2d runs 9.4 or 13.2 ms in the same process; the
    GPU's clocks; a candidate's process loading the GPU while the oracle works), and no bound the
    candidate's own noise widens decides it. A slower re-run also shrinks the reference's share in the
    judge's-clock check (``_cross_check``). The candidate's own time is never adjusted."""
    eager = baseline.eager.median_ms
    drift, noise = rerun / eager - 1, drift_allowance(baseline.eager, verdict.noise_pct)
    if rerun < eager:
        verdict.reference_runtime_ms, verdict.speedup = rerun, rerun / verdict.runtime_ms
        if verdict.compile_runtime_ms is not None:
            verdict.compile_runtime_ms *= rerun / eager
            verdict.speedup_vs_compile = verdict.compile_runtime_ms / verdict.runtime_ms
    moved = ("" if abs(drift) <= noise else
             ": the reference's time moved beyond noise (its own state, the GPU's clocks or another load)")
    return Check(name="reference re-timed", passed=True,
                 detail=f"the reference took {rerun:.4g} ms in the oracle during this evaluation vs {eager:.4g} ms "
                 f"in its cached baseline ({100 * drift:+.1f}%, noise ±{100 * noise:.0f}%){moved}; speedups are "
                 f"against the faster, {min(rerun, eager):.4g} ms")


def _graph_times(verdict: Verdict, record: Record) -> None:
    """The CUDA-graph times, held to the judge's clock like the plain ones; a doubt is a note, since
    they stand beside the verdict's time and never decide it."""
    verdict.graph_note = record.graph_note
    block, reference = record.graph_block, record.graph_reference_block
    if block is None or not block.times_ms or reference is None or not reference.times_ms:
        return
    median = stats(block.times_ms).median_ms
    problem = ("a replay reported more time than passed on the judge's clock" if impossible_calls(block)
               else unexplained_problem(block, reference, record.device))
    if problem is None and verdict.roofline_fraction and verdict.runtime_ms:
        floor_ms = verdict.roofline_fraction * verdict.runtime_ms
        if median < SPEED_OF_LIGHT_MARGIN * floor_ms:
            problem = f"{median:.4g} ms is faster than this GPU's {floor_ms:.4g} ms floor for the work"
    if problem:
        verdict.graph_note = f"the CUDA-graph times were not kept: {problem}"
        return
    verdict.graph_runtime_ms = median
    verdict.graph_reference_ms = stats(reference.times_ms).median_ms
    # No forensic trace runs on the replays: beside the plain time, they are the candidate's report, held
    # to the judge's clock and the roofline only.
    verdict.graph_note = "reported by the candidate's process; held to the judge's clock and the roofline, not traced"


def _cross_check(record: Record, checks: list[Check], eager_ms: float | None) -> None:
    """The candidate's reported times against the session's own clock (``timing.clock_problem``); where
    the session timed a round again for it (``Record.clock_retry``), the detail says so."""
    impossible = [i for block in record.blocks for i in impossible_calls(block)]
    if impossible:
        checks.append(Check(name="times agree with the judge's clock", passed=False,
                            detail=f"{len(impossible)} timed calls reported more time than passed on the judge's "
                            "clock around them: the times were not measured honestly"))
        return
    problem = clock_problem(record.blocks, record.reference_block, record.device, eager_ms)
    detail = problem or ("every call's reported time fits the wall time the judge measured around it, as the "
                         "reference's do")
    if record.clock_retry:
        detail += (" (in the second round of timed calls as in the first)" if problem else
                   f" (in a second round of timed calls, the only one kept; the first: {record.clock_retry})")
    checks.append(Check(name="times agree with the judge's clock", passed=problem is None, detail=detail))


def _speed_of_light(verdict: Verdict, task: Task, baseline: ReferenceResult, ceilings: Ceilings,
                    checks: list[Check]) -> None:
    runtime = verdict.runtime_ms
    assert runtime is not None
    floor_ms, bound = speed_of_light_ms(baseline.flops, baseline.bytes, ceilings, task.dtype or "float32")
    verdict.bound = bound
    verdict.roofline_fraction = floor_ms / runtime if runtime > 0 else None
    verdict.achieved_gbps = baseline.bytes / (runtime * 1e-3) / 1e9
    verdict.achieved_tflops = baseline.flops / (runtime * 1e-3) / 1e12
    possible = runtime >= SPEED_OF_LIGHT_MARGIN * floor_ms
    checks.append(Check(
        name="speed of light", passed=possible,
        detail=f"{runtime:.4g} ms vs a {bound}-bound floor of {floor_ms:.4g} ms ({100 * floor_ms / runtime:.0f}% of "
        "the roofline)" + ("" if possible else ": faster than this GPU can move the bytes or do the FLOPs: a timing "
                           "escape or a bug")))
