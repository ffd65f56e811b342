"""The forensic pass: on a GPU, the list of kernels that actually ran, taken outside the candidate's
Python by Nsight Compute, for every candidate about to be accepted.

A second candidate process runs under ``ncu`` (one metric, the kernel's duration; every kernel of the
process from its start, on every thread and stream). Before it imports the candidate it builds the
task's own ``Model`` and launches a marker kernel: the kernels before the marker are what the
reference's constructor launches, which ``ModelNew`` may launch again when it builds its parameters
the same way. Then ``ModelNew`` is built and called on ``FORENSIC_CALLS`` input sets the oracle writes as
files (so the harness itself launches no kernels), and the oracle checks the outputs (shipped with memory
copies only, unless an output with gaps or overlaps spans more than ``tensor_files.GATHER_ON_HOST_BYTES``).

The rules (``analyse``, pure):

- a custom kernel (one the candidate's source defines) must have run;
- in a strict task, no library kernel (aten, cuBLAS, cuDNN, inductor: anything the candidate did not
  define, except copies and fills) may run after the marker beyond the constructor's allowance;
- the kernels after the marker, per call, must not take longer than the candidate's timed calls did
  (``MARGIN``): timed calls that ran something faster than the checked calls were not these calls. The
  kernels of every stream are summed: ncu runs one kernel at a time and cannot say which would have
  overlapped, and a per-stream count would let work split over streams, or moved off the clock onto
  another one, claim up to the number of streams over the margin.

Everything after the marker counts as the calls' work, the candidate's construction and the loading of
its parameters included: a boundary between them launched from the candidate's own process could be
withheld or moved by it. Where that count breaks a rule but a kernel of the candidate's own ran, a
second session makes ``SHORT_CALLS`` calls, and the rules are applied to what the longer session ran
beyond it (``analyse_difference``): construction and loading, the same in both, cancel, and what is
left is the work of the calls the short session did not make. A candidate whose short session's
launches are not the first of the long one's behaves by how many calls it has made; the long session's
findings stand.
"""

from __future__ import annotations

import csv
import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kernelevo.sandbox.advice import ncu
from kernelevo.sandbox.isolation.confinement import LAUNCHER_EXPOSED
from kernelevo.sandbox.isolation.namespaces import read_no_follow
from kernelevo.sandbox.judge.kernel_names import Owned
from kernelevo.sandbox.judge.record import HarnessFault
from kernelevo.sandbox.judge.static_checks import check_candidate
from kernelevo.sandbox.models import Check, Verdict
from kernelevo.tasks.task import Task

PHASE = "forensic pass"
"""The verdict's phase that holds the whole pass's seconds."""
FORENSIC_CALLS = 3
SHORT_CALLS = 1
"""The calls of the second session, run where the first's findings may be construction's work."""
MARGIN = 0.8
"""A candidate's median timed call may be this much shorter than its kernels' time per call under
ncu (clock and cache noise); shorter still means the timed calls ran other kernels."""
LAUNCH_CAP = 5000
MARKER = "spin_kernel"
_GLUE = re.compile(r"FillFunctor|copy_kernel|CopyFunctor|_copy_kernel|fill_kernel")


def owned_kernels(*sources: str) -> Owned:
    """The kernels the candidate's sources define (their ``@triton.jit`` functions and CUDA ``__global__``s):
    its own file, and the files of kernels the trusted side put into it (a reassembled network carries
    its regions' verified kernels as text, which it loads at run time)."""
    triton: list[str] = []
    cuda: list[str] = []
    for source in sources:
        report = check_candidate(source, strict=False)
        triton += report.triton_kernels
        cuda += report.cuda_sources
    return Owned.of(triton, cuda)


def is_marker(name: str) -> bool:
    return ncu.short_name(name).split("::")[-1].strip() == MARKER


def classify(name: str, owned: Owned) -> str:
    """``custom`` (the candidate's own, ``kernel_names``), ``glue`` (library copies and fills) or
    ``library`` (anything else)."""
    if owned.owns(name):
        return "custom"
    return "glue" if _GLUE.search(name) else "library"


@dataclass
class Findings:
    kernels: int = 0
    custom_launches: int = 0
    per_call_ms: float = 0.0
    """Kernel time per call after the marker, less the constructor's allowance, every stream summed."""
    streams: int = 0
    """The streams those kernels ran on."""
    custom_share: float = 0.0
    library_extra: dict[str, int] = field(default_factory=dict)
    """Library kernels after the marker beyond the constructor's allowance, by short name."""
    problems: list[str] = field(default_factory=list)


def beyond_construction(launches: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The launches after the harness's marker, less one of each kernel the reference's constructor ran
    before it (``ModelNew`` may build its parameters the same way); None where no marker ran. The marker
    is the first spin kernel, launched by the harness before the candidate is imported; one the
    candidate launches later is a kernel like any other."""
    marker = next((i for i, launch in enumerate(launches) if is_marker(launch["name"])), None)
    if marker is None:
        return None
    allowance = Counter(launch["name"] for launch in launches[:marker])
    kept = []
    for launch in launches[marker + 1:]:
        if allowance[launch["name"]] > 0:
            allowance[launch["name"]] -= 1
        else:
            kept.append(launch)
    return kept


def analyse(launches: list[dict[str, Any]], owned: Owned, calls: int, strict: bool,
            timed_ms: float | None) -> Findings:
    """Apply the rules to ncu's launches (in launch order: ``{"name", "metrics", "stream"}``), every
    kernel after the marker counted as the ``calls`` calls' work."""
    found = Findings(kernels=len(launches))
    work = beyond_construction(launches)
    if work is None:
        found.problems.append("the harness's marker kernel never ran: the trace cannot be read")
        return found
    return _tally(found, work, owned, calls, strict, timed_ms,
                  f"every kernel launched after the candidate's import, its construction and loading included, "
                  f"shared among the {calls} calls")


def analyse_difference(short: list[dict[str, Any]], long: list[dict[str, Any]], owned: Owned, short_calls: int,
                       long_calls: int, strict: bool, timed_ms: float | None) -> Findings | None:
    """The rules applied to what the long session ran beyond the short one: its launches after the
    marker, less as many as the short session made (construction, loading and the first calls), are
    ``long_calls - short_calls`` calls' work. None where the short session's launches are not, name by
    name and in order, the first of the long one's: then the difference is not the calls' work, and the
    long session's findings stand.

    A candidate that tells the sessions apart (a note left in its compile cache) could pad the short one
    with kernels the long one runs in its later calls, taking them out of the difference; so the
    long session's launches from the candidate's first own kernel on, over all its calls, are held to the
    same rules, and their findings stand where the difference's pass."""
    first, second = beyond_construction(short), beyond_construction(long)
    if first is None or second is None or long_calls <= short_calls or len(first) > len(second):
        return None
    if [launch["name"] for launch in second[:len(first)]] != [launch["name"] for launch in first]:
        return None
    calls = long_calls - short_calls
    difference = _tally(Findings(kernels=len(long)), second[len(first):], owned, calls, strict, timed_ms,
                        f"what a {long_calls}-call session ran beyond a {short_calls}-call one, shared among the "
                        f"{calls} calls between")
    own = next((i for i, launch in enumerate(second) if classify(launch["name"], owned) == "custom"), len(second))
    since = _tally(Findings(kernels=len(long)), second[own:], owned, long_calls, strict, timed_ms,
                   f"every kernel from the candidate's first own kernel on, shared among the {long_calls} calls")
    return since if since.problems and not difference.problems else difference


def _tally(found: Findings, work: list[dict[str, Any]], owned: Owned, calls: int, strict: bool,
           timed_ms: float | None, basis: str) -> Findings:
    """The rules over ``work``, the launches counted as ``calls`` calls' work (``basis`` says which)."""
    streams: set[str] = set()
    custom_ns = total_ns = 0.0
    extra: Counter[str] = Counter()
    for launch in work:
        kind, name = classify(launch["name"], owned), launch["name"]
        ns = float(launch["metrics"].get("gpu__time_duration.sum") or 0.0)
        if ns > 0:
            streams.add(str(launch.get("stream", "")))
        total_ns += ns
        if kind == "custom":
            found.custom_launches += 1
            custom_ns += ns
        elif kind == "library":
            extra[ncu.short_name(name)] += 1
    found.per_call_ms = total_ns / 1e6 / max(calls, 1)
    found.streams = len(streams)
    found.custom_share = custom_ns / total_ns if total_ns else 0.0
    found.library_extra = dict(extra)
    if found.custom_launches == 0:
        found.problems.append("no kernel of the candidate's own ran on the GPU")
    if strict and extra:
        names = ", ".join(f"{k} x{v}" for k, v in extra.most_common(4))
        found.problems.append(f"library kernels did the work on the GPU: {names}; this task is strict: the work "
                              "must run in the candidate's own kernels")
    if timed_ms is not None and found.per_call_ms > 0 and timed_ms < MARGIN * found.per_call_ms:
        found.problems.append(f"the timed calls took {timed_ms:.4g} ms, yet the kernels of a checked call take "
                              f"{found.per_call_ms:.4g} ms on the GPU: the timed calls did not run these kernels "
                              f"({basis}{_streams_note(found.streams)})")
    return found


def _streams_note(streams: int) -> str:
    """Why a candidate on several streams is charged for all of them (the rule's words, where it applies)."""
    if streams < 2:
        return ""
    return (f"; its kernels ran on {streams} streams, summed: the trace runs one kernel at a time and cannot "
            "show that they overlap")


def read_trace(path: Path) -> list[dict[str, Any]]:
    """ncu's CSV log as launches in order, durations in nanoseconds. Names in it are the candidate's
    to choose: anything not laid out as ncu writes it (a stray line, a row cut short, a duration not
    finite or negative) is a ValueError, for the candidate's account."""
    text = read_no_follow(path)
    problem = ncu.layout_problem(text)
    if problem:
        raise ValueError(f"the trace is not as ncu writes it: {problem}")
    try:
        launches = ncu.parse_launches(text)
        streams = ncu.launch_streams(text)
    except (csv.Error, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {str(exc)[:120]}") from None
    for launch in launches:  # a duration ncu did not write as a number ("n/a", empty) is no zero
        duration = launch["metrics"].get("gpu__time_duration.sum", math.nan)
        if not isinstance(launch["name"], str) or not math.isfinite(duration) or duration < 0:
            raise ValueError(f"launch {launch['id']}: name {str(launch['name'])[:80]!r}, duration {duration!r}")
        launch["stream"] = streams.get(launch["id"], "")
    return sorted(launches, key=lambda launch: launch["id"])  # ncu numbers launches in the order they ran


def forensic_launcher(binary: str, trace: Path) -> list[str]:
    """ncu as the launcher of a candidate's process: one metric, every kernel from the start, clocks and
    caches as they are; its CSV goes to ``ncu.csv`` in ``trace``, a folder ncu writes and the candidate's
    process, confined away from it, cannot."""
    return [binary, "--csv", "--log-file", str(trace / "ncu.csv"), "--metrics", "gpu__time_duration.sum",
            "--print-units", "base", "--clock-control", "none", "--cache-control", "none", "--target-processes", "all",
            "--launch-count", str(LAUNCH_CAP)]


def untraced_slower(bar_ms: float) -> str:
    """The assurance of a correct search verdict left untraced: no faster than the run's fastest, which
    were traced, it cannot be handed back without the re-judge that traces it."""
    return (f"gpu: not forensic (no faster than {bar_ms:.4g} ms, the bar of the run's fastest verdicts, all "
            "traced: it is traced only if it is re-judged to be handed back)")


def apply(verdict: Verdict, evaluator: Any, task: Task, candidate: Path, cache_name: str,
          owned_sources: Sequence[str] = ()) -> None:
    """Run the forensic pass for an accepted verdict on a GPU and fold its findings in (``cache_name``:
    the evaluation's kept compile cache, so the pass loads what the timed process compiled;
    ``owned_sources``: kernel sources the trusted side handed the candidate, whose kernels are its own)."""
    if not evaluator.config.forensic:
        verdict.assurance = "gpu: not forensic (the forensic pass was turned off)"
        return
    binary = ncu.find_ncu()
    if binary is None:
        verdict.assurance = "gpu: not forensic (Nsight Compute's ncu was not found: install it or set KERNELEVO_NCU)"
        return
    began = time.monotonic()
    traced = _traced(verdict, evaluator, task, candidate, binary, cache_name, FORENSIC_CALLS, "forensic")
    if traced.failure is not None:
        verdict.checks.append(Check(name="forensic pass", passed=False, detail=traced.failure))
    else:
        owned = owned_kernels(candidate.read_text(), *owned_sources)
        found, basis = analyse(traced.launches, owned, FORENSIC_CALLS, not task.allow_partial, verdict.runtime_ms), ""
        sessions, exposed = 1, traced.exposed
        if found.problems and found.custom_launches:  # construction's work, counted as the calls'?
            short = _traced(verdict, evaluator, task, candidate, binary, cache_name, SHORT_CALLS, "forensic, short")
            sessions, exposed = 2, exposed or short.exposed
            difference = None if short.failure is not None else analyse_difference(
                short.launches, traced.launches, owned, SHORT_CALLS, FORENSIC_CALLS, not task.allow_partial,
                verdict.runtime_ms)
            if difference is not None:
                found = difference
                basis = (f" (calls {SHORT_CALLS + 1}-{FORENSIC_CALLS}: a {SHORT_CALLS}-call session's launches "
                         "taken away)")
        verdict.forensic = {"kernels": found.kernels, "custom_launches": found.custom_launches,
                            "per_call_ms": round(found.per_call_ms, 6), "custom_share": round(found.custom_share, 4),
                            "library_kernels": found.library_extra, "seconds": round(time.monotonic() - began, 2),
                            "sessions": sessions, "streams": found.streams}
        detail = "; ".join(found.problems) or (
            f"{found.kernels} kernels traced outside the candidate's Python; its own did "
            f"{100 * found.custom_share:.0f}% of the GPU time, {found.per_call_ms:.4g} ms per call{basis}")
        verdict.checks.append(Check(name="forensic kernel trace", passed=not found.problems, detail=detail))
        verdict.assurance = "forensic: the kernels Nsight Compute saw agree with the verdict" + (
            f" (a tripwire, not a proof: the trace was within the candidate's reach: {exposed})" if exposed else "")
    failed = [c for c in verdict.checks if not c.passed]
    if failed:
        verdict.correct = False
        verdict.reason = f"{failed[0].name}: {failed[0].detail}"
        verdict.assurance = "forensic: rejected by the kernel trace"
    verdict.phases[PHASE] = round(time.monotonic() - began, 2)


def _traced(verdict: Verdict, evaluator: Any, task: Task, candidate: Path, binary: str, cache_name: str,
            calls: int, label: str) -> Traced:
    """One forensic session of ``calls`` calls, its phases kept under ``label``. Where ncu itself failed
    (a driver error, not the candidate's doing as far as can be told), once more before a correct
    candidate is rejected for it: forging such a log buys a second session, no more."""
    traced = run_pass(evaluator, task, candidate, binary, cache_name, calls)
    verdict.phases.update({f"{label}: {name}": value for name, value in traced.phases.items()})
    if traced.tool_failed:
        traced = run_pass(evaluator, task, candidate, binary, cache_name, calls)
        verdict.phases.update({f"{label} again: {name}": value for name, value in traced.phases.items()})
    return traced


class Traced(NamedTuple):
    """One forensic session: the launches ncu saw, why the pass failed (None if it did not), whether
    that was ncu's own failure rather than the candidate's, and the session's phases in seconds."""

    launches: list[dict[str, Any]]
    failure: str | None
    tool_failed: bool
    phases: dict[str, float]
    exposed: str | None = None
    """Why the trace lay within the candidate's reach (None where confinement kept it out)."""


def run_pass(evaluator: Any, task: Task, candidate: Path, binary: str, cache_name: str,
             calls: int = FORENSIC_CALLS) -> Traced:
    """The forensic session of ``calls`` calls (``Evaluator._session`` under ncu)."""
    began = time.monotonic()
    footprint = evaluator.baseline(task)[0].eager_peak_bytes
    record = evaluator._session(task, candidate, cache_name, forensic=binary, footprint=footprint,
                                forensic_calls=calls)
    phases = {**record.phases, "session with exits": round(time.monotonic() - began, 4)}
    launches, failure, tool_failed = read_pass(record)
    return Traced(launches, failure, tool_failed, phases, exposure(record.worker_isolation))


def exposure(isolation: Any) -> str | None:
    """Why the candidate's process could have written the trace: not confined, or the trace's folder
    beneath one it may write; None when it could not."""
    writes = getattr(isolation, "writes", None) or "not reported"
    if not writes.startswith("landlock"):
        return writes
    return next((w for w in getattr(isolation, "warnings", []) if w.startswith(LAUNCHER_EXPOSED)), None)


def read_pass(record: Any) -> tuple[list[dict[str, Any]], str | None, bool]:
    """``(launches, why the pass failed, whether ncu itself said it failed)`` from a session's record."""
    if record.reference_error:
        return [], record.reference_error, False
    if harness_error := getattr(record, "harness_error", None):
        raise HarnessFault(f"in the forensic pass, {harness_error}")
    log = record.worker_trace / "ncu.csv"
    failed = [c for c in record.checks if not c.passed]
    if record.failure or failed:
        why = record.failure or f"{failed[0].name}: {failed[0].detail}"
        text = (record.worker.log_tail if record.worker else "") + read_no_follow(log)
        said = ncu.refusal(text)
        # ncu's own error, not "no kernel ran" (which is the candidate's doing)
        tool_failed = said is not None and "no kernel ran" not in said
        if said is None and text.strip():
            said = f"{why} (its log ends: {' | '.join(text.strip().splitlines()[-3:])[:400]})"
        return [], f"under the kernel trace the candidate failed: {said or why}", tool_failed
    ended = record.worker
    if ended is None or ended.killed_by_judge:
        # ncu writes its log as the process exits; one that never exited by itself may still have been
        # writing where ncu's log lies (where confinement could not keep it out)
        return [], ("under the kernel trace the candidate's process did not exit by itself after its last "
                    "call: its trace is not read"), False
    try:
        launches = read_trace(log)
    except ValueError as exc:
        return [], f"Nsight Compute's trace in the candidate's outbox could not be read ({exc})", False
    if len(launches) >= LAUNCH_CAP:
        return [], f"the candidate launched more than {LAUNCH_CAP} kernels in a few calls: too many to trace", False
    return launches, None, False
