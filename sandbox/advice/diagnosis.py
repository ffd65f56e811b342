"""A candidate's profile in one line, the way a kernel engineer would summarise it for a colleague.

"memory-bound; 78% of bandwidth; row_stats_kernel: 141 registers, no spills; DRAM 97%, SM 37%;
occupancy 18% (theoretical 19%); top stall: long scoreboard" plus, where the numbers point at one,
a hint for what to try next. Pure: it reads a :class:`Profile` and nothing else.
"""

from __future__ import annotations

from kernelevo.sandbox.advice.ncu import STALL_WORDS
from kernelevo.sandbox.models import KernelMetrics, Profile, Verdict


def from_verdict(profile: Profile, verdict: Verdict | None) -> None:
    """Copy the roofline and NVML reading the harness measured for this candidate."""
    if verdict is None:
        profile.unavailable["timing"] = "not judged yet: no roofline"
        return
    profile.runtime_ms, profile.timing = verdict.runtime_ms, verdict.timing
    if verdict.timing == "cuda-events":
        profile.bound, profile.roofline_fraction = verdict.bound, verdict.roofline_fraction
        profile.achieved_gbps, profile.achieved_tflops = verdict.achieved_gbps, verdict.achieved_tflops
    tele = verdict.telemetry or {}
    if tele.get("available"):
        profile.telemetry = tele
    else:
        profile.unavailable["nvml"] = tele.get("reason") or "no NVML reading (CPU run)"


def verdict_diagnosis(verdict: Verdict) -> str:
    """The cheap diagnosis every accepted verdict carries: roofline and telemetry, no extra pass."""
    profile = Profile(task=verdict.task, candidate=verdict.candidate, device=verdict.device)
    from_verdict(profile, verdict)
    return diagnose(profile)


def _compiler_entry(profile: Profile, kernel: KernelMetrics | None) -> dict | None:
    """The compiler report of ``kernel`` (matched by name), else of the only or first compiled kernel."""
    reports = [r for r in profile.compiler if r.get("ok", True)]
    if not reports:
        return None
    if kernel is not None:
        for report in reports:
            if report.get("kernel") and report["kernel"] in kernel.name:
                return report
    return reports[0]


def _roofline(profile: Profile) -> str | None:
    if profile.timing == "cpu-interpreter":
        return "CPU interpreter: no roofline (its times mean nothing)"
    if profile.bound is None or profile.roofline_fraction is None:
        return None
    ceiling = "bandwidth" if profile.bound == "memory" else "matmul peak"
    return f"{profile.bound}-bound; {100 * profile.roofline_fraction:.0f}% of {ceiling}"


def _resources(kernel: KernelMetrics | None, report: dict | None) -> str | None:
    registers = (report or {}).get("registers") or (kernel.registers if kernel else None)
    if registers is None:
        return None
    text = f"{registers} registers"
    spills = (report or {}).get("spill_bytes")
    if spills is not None:
        text += ", no spills" if spills == 0 else f", {spills} bytes spilled"
    return text


def hints(profile: Profile, kernel: KernelMetrics | None, report: dict | None) -> list[str]:
    """What the numbers suggest trying next (at most two, most telling first)."""
    found = []
    fraction = profile.roofline_fraction
    if report and report.get("spill_bytes"):
        found.append("spills to local memory: smaller tiles or fewer values per thread")
    if profile.bound == "memory" and fraction is not None:
        if fraction >= 0.85:
            found.append("at the bandwidth limit: only moving fewer bytes (fusion, narrower types) helps")
        elif len(profile.kernels) > 1 and sum(1 for k in profile.kernels if k.duration_us > 5) > 1:
            found.append("several kernels: fusing them saves a round trip through memory")
        elif kernel and kernel.achieved_occupancy_pct is not None and kernel.achieved_occupancy_pct < 25:
            found.append("low occupancy hides too little memory latency: fewer registers (smaller blocks) "
                         "or more warps")
        elif kernel and kernel.top_stalls(1) and kernel.top_stalls(1)[0][0] == "long_scoreboard":
            found.append("waiting on memory: more loads in flight (wider blocks, more stages)")
    if profile.bound == "compute" and fraction is not None and fraction < 0.6:
        found.append("far from the matmul peak: larger tiles, more pipeline stages, tensor-core dtypes")
    if profile.telemetry and [r for r in profile.telemetry.get("throttle_reasons") or [] if r != "idle"]:
        found.append("the GPU was throttling: compare timings with care")
    return found[:2]


def diagnose(profile: Profile) -> str:
    """The one-line diagnosis shown to the model, in the trace and in ``status``."""
    parts = []
    roofline = _roofline(profile)
    if roofline:
        parts.append(roofline)
    kernel = profile.kernels[0] if profile.kernels else None
    report = _compiler_entry(profile, kernel)
    name = kernel.name if kernel else (report or {}).get("kernel")
    if kernel and len(profile.kernels) > 1:
        total = sum(k.duration_us for k in profile.kernels) or 1.0
        parts.append(f"{len(profile.kernels)} kernels, {name} takes {100 * kernel.duration_us / total:.0f}% "
                     "of their time")
    resources = _resources(kernel, report)
    if resources:
        parts.append(f"{name}: {resources}" if name else resources)
    if kernel:
        if kernel.dram_pct is not None and kernel.sm_pct is not None:
            parts.append(f"DRAM {kernel.dram_pct:.0f}%, SM {kernel.sm_pct:.0f}% of peak")
        if kernel.achieved_occupancy_pct is not None:
            occupancy = f"occupancy {kernel.achieved_occupancy_pct:.0f}%"
            if kernel.theoretical_occupancy_pct is not None:
                occupancy += f" (theoretical {kernel.theoretical_occupancy_pct:.0f}%)"
            parts.append(occupancy)
        top = kernel.top_stalls(1)
        if top:
            parts.append(f"top stall: {STALL_WORDS.get(top[0][0], top[0][0].replace('_', ' '))}")
    tele = profile.telemetry or {}
    throttled = [r for r in tele.get("throttle_reasons") or [] if r != "idle"]
    if throttled:
        parts.append("throttled: " + ", ".join(throttled))
    if not parts:
        parts.append("no measurements: " + "; ".join(f"{k}: {v}" for k, v in profile.unavailable.items())
                     if profile.unavailable else "no measurements")
    advice = hints(profile, kernel, report)
    line = "; ".join(parts)
    return line + (". Try: " + "; ".join(advice) if advice else "")
