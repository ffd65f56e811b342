"""Timing statistics and the rules that hold reported times to the judge's own clock (pure logic).

A timed call's time comes from the process that ran it (``child/timed.py``): for a candidate, an
untrusted figure. The session times every call from outside too, from sending the request to
reading the answer; that wall time includes the input refill, the launch cover, the output's
digest and the messages (the warm call before it is a request of its own), which
the reference's own timed calls, made through the same protocol in the oracle, measure. A candidate
whose reported times leave more of the wall clock unexplained than the reference's did, beyond the
noise allowance below, did work outside its timed windows (or reported less than it took).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelevo.sandbox.models import TimingStats

# The reference timed in the oracle may differ from its cached clean baseline by this much, and by
# at least this many milliseconds (launch jitter dominates calls of a few microseconds).
MIN_DRIFT_TOLERANCE = 0.10
MIN_DRIFT_MS = 0.05
# Unexplained wall time per call beyond the reference's: this fraction of the call, plus this many ms.
# On a GPU honest calls leave no more unexplained at 10 ms than at 20 us (18 honest verdicts of
# 0.02-10.2 ms calls: -0.50 to +0.57 ms, the largest at 3.5 ms, 0.09 ms at 10.2 ms): the
# fraction only keeps room for what grows with the call and was not seen yet, and is what a long
# call may be reported short by. On the CPU a few interpreter calls on a host busy with other
# processes (a spare importing torch, a test suite) are all there is: the allowance only has to
# catch times reported far short.
UNEXPLAINED_FRACTION = {"cuda": 0.10, "cpu": 1.0}
UNEXPLAINED_MS = {"cuda": 0.6, "cpu": 5.0}
"""On a GPU the candidate's process answers each timed call 0.07-0.7 ms later than the oracle does
for the same work (honest Triton kernels of 20-30 us, over several rounds and machines:
docs/BENCHMARKS.md). Host work that the launch cover hides adds no wall time (the GPU is busy with
the cover meanwhile, on both sides), so this is the harness's own work around each call in that process;
the cause is not found yet. Until it is, a call may report up to this much less than it took without
this check noticing; on a GPU the forensic trace bounds the kernels' part from below, for a candidate
that runs the same work when traced (docs/EVALUATION.md). It is each call's, not each request's: with
several timed calls a request (``TimingPolicy.calls_per_request``) the gap per call did not shrink
(docs/EVALUATION.md, "What the defences do not cover"), so every call keeps the whole allowance."""
UNEXPLAINED_OF_HARNESS = {"cuda": 0.15, "cpu": 0.0}
"""And this share of the reference's own unexplained time per call, on a GPU: the harness's work
around a call (the input refill, the output's digest), which the candidate's process does too, runs a
few percent slower there than in the oracle (0.25 ms of 4 ms per call at 9M values), and grows with
the output's size. On a GPU the forensic kernel trace also bounds a time from below (by 0.8 of its
kernels' traced time) where the candidate runs the same work when traced; where it does not, this
allowance is what a time may be short by."""


TIE_BAND = 0.03
"""Two medians within this fraction of each other are a tie. The same candidate judged in separate
processes with the current timed call moved 1.4% at 20 us (three verdicts, one with the forensic
pass) and 0.51% at 2 ms (two verdicts); at 200 us one verdict matched eager to 0.06%; on another GPU,
three verdicts a size moved 0.45% at 20 us, 0.19% at 200 us and 0.04% at 2 ms; an older timed call moved
2.3-3.3% at 1.5 ms (docs/BENCHMARKS.md). The band keeps about twice the worst current
spread: a smaller gain is not shown to be one, so the search does not replace a kept candidate for it
and a report does not call it one."""


def faster_beyond_tie(new_ms: float, old_ms: float) -> bool:
    """``new_ms`` is faster than ``old_ms`` by more than the tie band."""
    return new_ms < old_ms * (1 - TIE_BAND)


def tie_note(speedup: float | None) -> str | None:
    """Words for a speedup over the reference that is within the tie band (None where it is not)."""
    if speedup is None or abs(speedup - 1) > TIE_BAND:
        return None
    return f"within {100 * TIE_BAND:.0f}% of the reference: a tie, not a speedup"


PACE_MEASUREMENTS = 3
"""Pace measurements per block of timed calls; the fastest is reported (hiccups only slow one)."""
PACE_MARGIN = 0.10
"""A pace beyond this fraction above the timed median marks a call as host-bound: below it, the
launch recorder in the candidate's process (about a microsecond per launch) and a short loop's noise."""


def host_bound(median_ms: float, pace_ms: float | None) -> bool:
    """Would ``forward``'s host work, not its kernels, set the pace in a loop of its calls?

    Reported, never counted. The timed call's cover hides up to 0.26 ms of host work per call, as a
    GPU kept busy by the rest of a model hides it; a ``forward`` whose own host work outlasts its
    kernels pays it in a loop of its own calls. But the loop runs in the candidate's process, on
    repeated inputs and unchecked outputs: a cache keyed on the input buffers makes it fast, and the
    process can report any figure. Counting the pace on the reference's side (measured by the trusted
    oracle) and not on the candidate's would reward a candidate that fakes its own; counting it on
    neither keeps both sides measured alike. Counting it needs a pace the judge can verify: open."""
    return pace_ms is not None and pace_ms > median_ms * (1 + PACE_MARGIN)


def stats(times_ms: Sequence[float], pace_ms: float | None = None) -> TimingStats:
    ordered = sorted(times_ms)
    n = len(ordered)
    median = statistics.median(ordered)
    return TimingStats(
        median_ms=median,
        mean_ms=statistics.fmean(ordered),
        min_ms=ordered[0],
        p10_ms=ordered[int(0.1 * (n - 1))],
        p90_ms=ordered[int(0.9 * (n - 1))],
        runs=n,
        pace_ms=pace_ms,
    )


@dataclass
class Block:
    """One block of timed calls as the session saw them."""

    times_ms: list[float] = field(default_factory=list)
    """What the process reported per call (events, plus lag past the end event)."""
    host_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    """The session's own clock around each call's request and answer. A request of several calls holds
    only their total to the clock, so each of them counts as their mean (``times_ms``) with an even
    share of the request's wall time here."""
    calls_per_request: int = 1
    """How many timed calls each request of the block made (the verdict's clock says so where above one)."""
    pace_ms: list[float] = field(default_factory=list)
    """Per call in loops of back-to-back calls after the block (GPU only)."""
    digest_ms: list[float] = field(default_factory=list)
    """The reference's blocks only: how long the oracle took to digest each call's output (its own
    figure, trusted), part of its unexplained time but no harness work a candidate's calls may share."""

    def add(self, time_ms: float, host_ms: float, wall_ms: float) -> None:
        self.times_ms.append(time_ms)
        self.host_ms.append(host_ms)
        self.wall_ms.append(wall_ms)

    def unexplained_ms(self) -> float:
        """Median wall time per call not covered by the reported time. The host time a process reports
        explains nothing: it is as unverified as the time itself (host work hidden behind the launch
        cover, at most its length, is within the allowance)."""
        return statistics.median(w - t for t, w in zip(self.times_ms, self.wall_ms))


def fastest_pace(blocks: Sequence[Block]) -> float | None:
    """The fastest pace measured over ``blocks``, or None where none was."""
    paces = [pace for block in blocks for pace in block.pace_ms]
    return min(paces) if paces else None


def impossible_calls(block: Block) -> list[int]:
    """Calls whose reported time exceeds the wall time the session measured around them."""
    return [i for i, (t, w) in enumerate(zip(block.times_ms, block.wall_ms)) if t > w + 0.05]


def unexplained_figures(candidate: Block, reference: Block, device: str,
                        reference_scale: float = 1.0) -> tuple[float, float, float] | None:
    """``(extra, allowed, call)`` in ms: the median wall time per call the candidate's reported times
    leave unexplained beyond the reference's own, what the rule allows, and the candidate's median call
    (None without calls on both sides). ``reference_scale`` (at most 1) shrinks the reference's own:
    where the re-timed reference ran slower than its cached baseline, whatever slowed it (a candidate
    loading the GPU while the oracle works, say) must not widen the room the candidate's reported times
    get."""
    if not candidate.times_ms or not reference.times_ms:
        return None
    harness = reference.unexplained_ms() * min(reference_scale, 1.0)
    extra = candidate.unexplained_ms() - harness
    call = statistics.median(candidate.times_ms)
    kind = "cuda" if device == "cuda" else "cpu"
    digest = statistics.median(reference.digest_ms) if reference.digest_ms else 0.0
    allowed = (UNEXPLAINED_FRACTION[kind] * call + UNEXPLAINED_MS[kind]
               + UNEXPLAINED_OF_HARNESS[kind] * max(harness - digest, 0.0))
    return extra, allowed, call


def unexplained_problem(candidate: Block, reference: Block, device: str, reference_scale: float = 1.0) -> str | None:
    """Did the candidate's calls take more wall time beyond their reported times than the reference's
    (:func:`unexplained_figures`)?"""
    figures = unexplained_figures(candidate, reference, device, reference_scale)
    if figures is None or figures[0] <= figures[1]:
        return None
    extra, allowed, call = figures
    return (f"each timed call took {extra:.3g} ms more wall time beyond its reported {call:.3g} ms than the "
            f"reference's calls did (allowed {allowed:.3g} ms): work outside the timed window, or a time "
            "reported short")


def merged(blocks: Sequence[Block]) -> Block:
    """The calls of ``blocks`` as one block (times, host and wall times; no pace or digest)."""
    out = Block(calls_per_request=min((block.calls_per_request for block in blocks), default=1))
    for block in blocks:
        for t, h, w in zip(block.times_ms, block.host_ms, block.wall_ms):
            out.add(t, h, w)
    return out


def clock_problem(blocks: Sequence[Block], reference: Block | None, device: str,
                  eager_ms: float | None) -> str | None:
    """:func:`unexplained_problem` for one round of timed calls: the candidate's blocks against the
    reference's block timed between them. ``eager_ms``, the reference's cached baseline: where the
    re-timed reference ran slower, its share shrinks by as much (``reference_scale``)."""
    if reference is None or not reference.times_ms:
        return None
    return unexplained_problem(merged(blocks), reference, device, _reference_scale(reference, device, eager_ms))


def clock_figures(blocks: Sequence[Block], reference: Block | None, device: str,
                  eager_ms: float | None) -> dict[str, float] | None:
    """What :func:`clock_problem` decides from, for the verdict: the wall time per call left unexplained
    beyond the reference's, the allowance, the median call (ms), and the calls a request where more than
    one. Honest candidates' figures are what an allowance must clear, and what a tighter one would be
    set from."""
    calls = merged(blocks)
    figures = None if reference is None or not reference.times_ms else unexplained_figures(
        calls, reference, device, _reference_scale(reference, device, eager_ms))
    if figures is None:
        return None
    kept = dict(zip(("unexplained_ms", "allowed_ms", "call_ms"), (round(value, 4) for value in figures)))
    return kept | ({"calls_per_request": calls.calls_per_request} if calls.calls_per_request > 1 else {})


def _reference_scale(reference: Block, device: str, eager_ms: float | None) -> float:
    rerun = statistics.median(reference.times_ms)
    slower = rerun / eager_ms if eager_ms and device == "cuda" else 1.0
    return 1.0 / max(slower, 1.0)


def drift_allowance(eager: TimingStats, noise_pct: float | None) -> float:
    return max(MIN_DRIFT_TOLERANCE, 3 * (noise_pct or 0) / 100, eager.iqr_fraction, MIN_DRIFT_MS / eager.median_ms)
