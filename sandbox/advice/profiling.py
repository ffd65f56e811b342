"""Profiling a judged candidate: the compiler's resource report, Nsight Compute's counters, the
roofline and NVML telemetry from its verdict, and a one-line diagnosis.

Everything here is advice for the model and the reader of the trace; a speedup comes only from
the harness's verdict. Each section that cannot be collected (no GPU, no ncu, counters refused,
no NVML) says why in ``Profile.unavailable``, and the rest still comes back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from kernelevo.sandbox.advice.cuda_gate import compile_gate
from kernelevo.sandbox.advice.diagnosis import diagnose, from_verdict
from kernelevo.sandbox.judge.evaluate import Evaluator
from kernelevo.sandbox.judge.static_checks import check_candidate
from kernelevo.sandbox.models import Profile, Verdict
from kernelevo.tasks.task import Task


class Profiler(Protocol):
    """Profiles a candidate the harness has judged (``verdict``) or not (None)."""

    def profile(self, task: Task, candidate: Path, verdict: Verdict | None) -> Profile: ...


def _cuda_report(detail: str, passed: bool) -> dict:
    """The CUDA compile gate's one-line ptxas summary as a compiler entry."""
    report: dict = {"kernel": "CUDA sources", "ok": passed, "resources": detail}
    registers = [int(a or b) for a, b in re.findall(r"(?:\d+-(\d+)|(\d+)) registers", detail)]
    if registers:
        report["registers"] = max(registers)
    if "no spills" in detail:
        report["spill_bytes"] = 0
    elif spill := re.search(r"spills up to (\d+) bytes", detail):
        report["spill_bytes"] = int(spill.group(1))
    return report


class HarnessProfiler:
    """A :class:`Profiler` that runs its passes through an :class:`Evaluator`'s sandbox."""

    def __init__(self, evaluator: Evaluator, use_ncu: bool = True) -> None:
        self.evaluator = evaluator
        self.use_ncu = use_ncu

    def compiler_report(self, task: Task, candidate: Path) -> tuple[list[dict], str | None]:
        source = candidate.read_text()
        static = check_candidate(source, strict=not task.allow_partial)
        if "cuda" in static.kinds:
            gate = compile_gate(static.cuda_sources, self.evaluator.workspace / "cuda-profile")
            return [_cuda_report(gate.detail, gate.passed)], None if gate.passed else gate.detail
        if "triton" in static.kinds:
            result = self.evaluator.triton_gate(task, candidate)
            if result.get("kernels"):
                return result["kernels"], None
            return [], result.get("error") or "the Triton gate returned nothing"
        return [], "no Triton or CUDA kernel found in the candidate"

    def profile(self, task: Task, candidate: Path, verdict: Verdict | None) -> Profile:
        profile = Profile(task=task.name, candidate=str(candidate), device=verdict.device if verdict else
                          self.evaluator.device)
        from_verdict(profile, verdict)
        profile.compiler, why = self.compiler_report(task, candidate)
        if why:
            profile.unavailable["compiler"] = why
        if not self.use_ncu:
            profile.unavailable["ncu"] = "not asked for (--no-ncu)"
        else:
            kernels, why, seconds = self.evaluator.ncu_pass(task, candidate)
            profile.kernels, profile.ncu_seconds = kernels, seconds or None
            if why:
                profile.unavailable["ncu"] = why
        profile.diagnosis = diagnose(profile)
        return profile


def describe(profile: Profile) -> str:
    """A profile as a few readable lines (the CLI and the profile tool print this)."""
    lines = [f"diagnosis: {profile.diagnosis}"]
    if profile.runtime_ms is not None:
        line = f"time {profile.runtime_ms:.4g} ms ({profile.timing})"
        if profile.roofline_fraction is not None:
            line += f"; {profile.bound}-bound, {100 * profile.roofline_fraction:.0f}% of the roofline"
        if profile.achieved_gbps is not None and profile.achieved_tflops is not None:
            line += f"; {profile.achieved_gbps:.0f} GB/s, {profile.achieved_tflops:.1f} TFLOP/s"
        lines.append(line)
    for k in profile.kernels[:6]:
        stalls = ", ".join(f"{name.replace('_', ' ')} {value:.2f}" for name, value in k.top_stalls(3))
        lines.append(
            f"kernel {k.name} x{k.launches}: {k.duration_us:.1f} us; grid {k.grid} block {k.block}; "
            f"{k.registers} registers, {k.shared_bytes} B shared; DRAM {_pct(k.dram_pct)}, SM {_pct(k.sm_pct)}; "
            f"occupancy {_pct(k.achieved_occupancy_pct)} of {_pct(k.theoretical_occupancy_pct)}; "
            f"L2 hit {_pct(k.l2_hit_pct)}; stalls per issue: {stalls or 'n/a'}")
    if len(profile.kernels) > 6:
        lines.append(f"... {len(profile.kernels) - 6} more kernels")
    for report in profile.compiler:
        if report.get("ok", True):
            lines.append(f"compiled {report.get('kernel')}: {report.get('resources') or 'ok'}"
                         + (f", {report['shared_bytes']} B shared" if report.get("shared_bytes") else ""))
        else:
            lines.append(f"compile FAILED {report.get('kernel')}: {str(report.get('error', ''))[:300]}")
    tele = profile.telemetry
    if tele:
        lines.append(f"GPU: SM {tele.get('sm_clock_mhz')} MHz, memory {tele.get('mem_clock_mhz')} MHz, "
                     f"{tele.get('power_w')} W, {tele.get('temperature_c')} C, energy "
                     f"{tele.get('energy_used_j', 'n/a')} J, throttle: "
                     f"{', '.join(tele.get('throttle_reasons') or []) or 'none'}")
    for section, why in profile.unavailable.items():
        lines.append(f"{section}: not available: {why}")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"
