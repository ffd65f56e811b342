"""The timing phase of a session: the candidate's timed blocks around the reference's, each call held
to the session's clock, a random share of timed outputs checked, the optional CUDA-graph replays and
the reported pace of back-to-back calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kernelevo.sandbox.child.timed import call_ms, same_digest
from kernelevo.sandbox.isolation.pausing import PauseFailed
from kernelevo.sandbox.isolation.protocol import Job
from kernelevo.sandbox.judge import rules, sampled, telemetry
from kernelevo.sandbox.judge.plan import SessionPart, Stop, fresh_seed, trace_line
from kernelevo.sandbox.judge.record import PrecisionSums
from kernelevo.sandbox.judge.reported import reported_ms
from kernelevo.sandbox.judge.timing import PACE_MEASUREMENTS, Block, clock_figures, clock_problem

CHECK_MS_PER_GB = 600.0
"""What a timed-output check costs per GB of the reference's output, charged against its block's
budget: on an H200, 2.1 GB shipped in 0.69 s and compared in 0.58 s (``bench/tensor_file_probe.py``,
``KERNELEVO_SESSION_TRACE``). Charged from the reference's size, never from the time the check took,
so a candidate cannot shorten its blocks (and so their checks) by slowing its own ships."""
SAMPLED_CHECK_MS_PER_GB = 45.0
"""What a check by sampled leaves costs per GB of the reference's output (the reference's run and the
oracle's passes over its whole output remain): on an H200, 0.23-0.29 s a check at 6.4 GB."""
KEPT_OUTPUT_BYTES = 256 << 20
"""The most a request's kept outputs may hold together (the reference's output size times the calls
per request): the candidate's process keeps them all until the session has drawn which to check."""
GRAPH_PHASE_S = 120.0
"""Time added to the candidate's deadline for the optional CUDA-graph phase (capture and replays)."""


def trace_call(who: str, op: str, reply: dict[str, Any], wall_ms: float) -> None:
    """Each timed call's reported parts and the session's wall time, for the timing benchmarks."""
    fields = {k: reply.get(k) for k in ("gpu_ms", "lag_ms", "host_ms", "parts", "harness")}
    trace_line("KERNELEVO_TIMING_TRACE", {"who": who, "op": op, **fields, "wall_ms": wall_ms})


class TimedCalls(SessionPart):
    """The session's timed calls (a part of ``Session``)."""

    def _timing(self) -> None:
        began = time.monotonic()
        gpu = self.plan.device == "cuda"
        before = telemetry.snapshot() if gpu else {}
        found = self._timed_round()
        if found is None:
            return
        doubt = clock_problem(self.record.blocks, self.record.reference_block, self.plan.device, self.plan.eager_ms)
        # A doubt is measured again before it decides: the clock check's margin is a few tenths of a
        # millisecond, the size of a process's own hiccups. A candidate that reports its times short does
        # so in the second round as well; one that cheats only in the first gains nothing, since only the
        # second round's times are kept. Not where the worker's deadline cannot hold a second round.
        if doubt and self.worker.remaining() > 2 * (time.monotonic() - began) + 5:
            # Each round's checked outputs meet the precision rule on their own: a round thrown away for
            # its times must not vouch for the kept round's precision (exact there, coarse here).
            if self._imprecise():
                return
            self.record.clock_retry = doubt
            self.record.clock_first = clock_figures(self.record.blocks, self.record.reference_block,
                                                    self.plan.device, self.plan.eager_ms)
            self.record.blocks, self.record.reference_block = [], None
            self.record.timed_precision = PrecisionSums()
            again = self._timed_round()
            if again is None:
                return
            found += again
        if gpu:
            self.record.telemetry = telemetry.around(before, telemetry.snapshot())
        if self._imprecise():
            return
        self.record.add("timed runs correct", True,
                        f"{found} timed calls, chosen after they ran, matched the reference (their outputs "
                        "the ones each call committed to, at the checked calls' precision)")
        self.record.phases["timing"] = round(time.monotonic() - began, 4)

    def _imprecise(self) -> bool:
        """Do the checked timed outputs so far break the precision rule? Recorded if so."""
        problem = rules.precision_problem(self.record.timed_precision, self.plan.task.dtype or "float32")
        if problem:
            self.record.add("timed runs correct", False, f"the timed calls checked: {problem}", compared=True)
        return problem is not None

    def _timed_round(self) -> int | None:
        """The candidate's timed blocks (two on a GPU, one on the CPU) with the reference's re-timed
        after the first, into the record; the number of timed calls checked, or None where one was
        wrong (recorded)."""
        checked = 0
        blocks = 2 if self.plan.device == "cuda" else 1
        for number in range(blocks):
            block, found = self._timed_block(self.worker, "worker", f"timed block {number + 1}")
            self.record.blocks.append(block)
            checked += found[0]
            if found[1]:
                self.record.add("timed runs correct", False, found[1][0])
                return None
            if number == 0:
                with self._worker_paused("re-timing the reference"):
                    self.record.reference_block, _ = self._timed_block(self.oracle, "oracle",
                                                                       "re-timing the reference")
        return checked

    def _graph_timing(self) -> None:
        """``--cuda-graph``: the candidate and the reference replayed as CUDA graphs, timed beside the
        plain calls, never instead of them. A forward that cannot be captured, or whose replays are
        wrong, is explained in a note and keeps its plain verdict."""
        record = self.record
        if self.plan.device != "cuda":
            record.graph_note = "CUDA graphs need a GPU: not timed"
            return
        began = time.monotonic()
        self.worker.extend(GRAPH_PHASE_S)  # an optional phase: it never eats the time the candidate is given
        try:
            block, (_, problems) = self._timed_block(self.worker, "worker", "CUDA-graph replays", op="graph_timed")
            if problems:
                record.graph_note = f"the candidate's CUDA-graph replays were wrong, so no graph time: {problems[0]}"
                return
            record.graph_block = block
            # From here the oracle holds a capture (or a failed one): it is not kept for other sessions.
            record.oracle_unfit = True
            with self._worker_paused("CUDA-graph replays of the reference"):
                record.graph_reference_block, _ = self._timed_block(self.oracle, "oracle",
                                                                    "CUDA-graph replays of the reference",
                                                                    op="graph_timed")
        except Stop as stop:
            if stop.broken:  # a channel that timed out or closed is out of step: the session cannot go on
                raise
            whose = "the candidate" if stop.who == "worker" else "the reference"
            record.graph_note = f"{whose} could not be timed as a CUDA graph: {stop.detail}"
        finally:
            record.phases["CUDA-graph timing"] = round(time.monotonic() - began, 4)

    @contextmanager
    def _worker_paused(self, phase: str) -> Iterator[None]:
        """The candidate's process stopped while the oracle times the reference: nothing it runs on the
        host or starts on the GPU then can slow the reference's calls, whose wall time beyond their
        events the judge's-clock check subtracts from the candidate's (``timing.unexplained_problem``).
        A process of its that cannot be held, or that ran anyway, rejects it."""
        try:
            self.worker.pause()
        except PauseFailed as exc:
            raise Stop("worker", phase, f"the candidate's process could not be paused while the reference was "
                       f"timed: {exc}") from None
        try:
            yield
        finally:
            held = self.worker.resume()
        if not held:
            raise Stop("worker", phase, "a process of the candidate's ran while it was paused for the reference's "
                       "timing (woken by another, or started past the pause)")

    def _timed_block(self, job: Job, who: str, phase: str, op: str = "timed") -> tuple[Block, tuple[int, list[str]]]:
        policy, gpu = self.plan.timing, self.plan.device == "cuda"
        self.ask(job, who, f"{phase}: warm-up", {"op": "warmup", "seed": fresh_seed(),
                                                  "calls": policy.warmup if gpu else 1,
                                                  "seconds": policy.warmup_s if gpu else 0.0})
        least, most = (policy.min_runs, policy.max_runs) if gpu else (3, 3)
        # Each of the candidate's calls is checked with the same chance, drawn after it ran and apart from
        # every other draw: the checks so far say nothing of the next call's (a fixed number drawn from
        # the first calls would leave the rest of them known to be unchecked once that many were shipped).
        wanted = min(policy.spot_checks, least) if who == "worker" else 0
        # Without a GPU every call is checked: its times mean nothing, and the block's three calls could
        # all miss their draws, leaving a candidate that skips its work in every timed call unseen.
        chance = (wanted / least if gpu else 1.0) if wanted else 0.0
        block, checked, problems = Block(calls_per_request=self._calls_per_request()), 0, []
        # Several calls a request, on a GPU: each counts as the request's mean, so work skipped in one call
        # of every request would move every request's time by a K-th, where a single call's skipped work
        # moves no median. So one call of every request is checked, drawn after it ran, and the least is
        # counted in requests: a candidate skipping one call in each of more than half the requests
        # escapes every check with chance (1 - 1/K)^(least) at most over the two blocks.
        by_requests = gpu and block.calls_per_request > 1
        most = max(most, least * block.calls_per_request) if by_requests else most
        # The block runs its least calls, then on until it has its checks and has spent its budget, which
        # holds the checks too: where each check ships gigabytes, it stops soon after its least calls.
        budget_ms, checking_ms, requests = 1e3 * policy.budget_s, 0.0, 0
        # Where checks may be samples, one call among the block's least, drawn now and kept secret, is
        # checked whole: a candidate that skips work in more than half of the calls (as it must, to
        # move the median) meets it with chance above one half, in every block, whatever it counts.
        # Counted in requests, the least holds K calls each: the draw spans them all.
        sampling = wanted and self.reference_bytes >= policy.sample_from_bytes
        whole_at = self.rng.randrange(least * (block.calls_per_request if by_requests else 1)) if sampling else -1
        while not problems and len(block.times_ms) < most and (
                (requests if by_requests else len(block.times_ms)) < least or checked < wanted
                or sum(block.wall_ms) + checking_ms < budget_ms):
            calls = [(fresh_seed(), fresh_seed()) for _ in range(block.calls_per_request)]
            answers = self._timed_request(job, who, phase, op, calls, block)
            requests += 1
            first = len(block.times_ms) - len(calls)
            for index, forced in self._drawn(len(calls), first, chance, whole_at, bool(wanted) and by_requests):
                checked += 1
                (seed, digest_seed), digest = calls[index], answers[index].get("digest")
                problem, cost_ms = self._check_timed(seed, first + index, digest_seed, digest, forced, index)
                checking_ms += cost_ms
                if problem:
                    problems.append(problem)
                    break
        if gpu and op == "timed" and who == "worker" and not problems:
            self._pace(job, who, phase, block)
        return block, (checked, problems)

    def _drawn(self, count: int, first: int, chance: float, whole_at: int, one_at_least: bool
               ) -> list[tuple[int, bool]]:
        """Which calls of a request of ``count`` (the block's calls ``first`` on) are checked, drawn after
        it ran, each as ``(place in the request, whole)``: every call with ``chance``, apart from every
        other draw; the block's secret whole check where it falls; and, with ``one_at_least``, one call
        drawn among them where no other was."""
        drawn = [(index, first + index == whole_at) for index in range(count)
                 if first + index == whole_at or chance >= 1.0 or (chance and self.rng.random() < chance)]
        if one_at_least and not drawn:
            drawn = [(self.rng.randrange(count), False)]
        return drawn

    def _calls_per_request(self) -> int:
        """The policy's calls per request, fewer where their kept outputs would pass ``KEPT_OUTPUT_BYTES``."""
        kept = KEPT_OUTPUT_BYTES // max(self.reference_bytes, 1)
        return max(1, min(self.plan.timing.calls_per_request, kept))

    def _timed_request(self, job: Job, who: str, phase: str, op: str, calls: list[tuple[int, int]],
                       block: Block) -> list[dict[str, Any]]:
        """Timed calls made in one request (after its untimed warm call on a GPU), each on the inputs of
        its seed, held together to the session's clock: each counts as their mean, with an even share of
        the request's wall time. Added to ``block``; each call's answer, in order."""
        if self.plan.device == "cuda" and op == "timed":  # its own request: the clock below holds the calls alone
            self.ask(job, who, f"{phase}: warm call", {"op": "warm"})
        sent = time.perf_counter()
        reply = self.ask(job, who, phase, {"op": op, "calls": [{"seed": seed, "digest_seed": digest_seed}
                                                               for seed, digest_seed in calls]})
        wall = (time.perf_counter() - sent) * 1e3
        if not reply.get("ok"):
            raise Stop(who, phase, str(reply.get("error")))
        answers = reply.get("calls")
        try:
            if not isinstance(answers, list) or len(answers) != len(calls):
                raise ValueError(f"not one answer for each of the {len(calls)} calls asked for")
            figures = [[reported_ms(answer, k) for k in ("gpu_ms", "lag_ms", "host_ms")] for answer in answers]
            if any(gpu_ms <= 0 for gpu_ms, _, _ in figures):  # a zero would divide every ratio the verdict gives
                raise ValueError("gpu_ms is 0")
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise Stop(who, phase, f"a malformed answer to a timed call ({exc}): {str(reply)[:200]}") from None
        # Only the request's total is held to the clock, so each of its calls counts as the request's mean:
        # a candidate that moved its time onto one call and reported the rest as nothing would otherwise
        # set the median with figures no clock checked.
        count = len(answers)
        mean_ms = sum(call_ms(gpu_ms, lag_ms) for gpu_ms, lag_ms, _ in figures) / count
        host_ms = sum(host for _, _, host in figures) / count
        for answer in answers:
            trace_call(who, op, answer, wall / count)
            block.add(mean_ms, host_ms, wall / count)
            if who == "oracle":  # the judge's own process: its figure for its digest is trusted
                try:
                    block.digest_ms.append(reported_ms(answer, "digest_ms"))
                except (KeyError, TypeError, ValueError):
                    pass
        return answers

    def _pace(self, job: Job, who: str, phase: str, block: Block) -> None:
        """Loops of back-to-back calls on the block's last inputs (``child/timed.paced_ms``): reported
        beside the time, never counted (``timing.host_bound`` says why)."""
        estimate = statistics.median(block.times_ms)
        for _ in range(PACE_MEASUREMENTS):
            reply = self.ask(job, who, f"{phase}: back-to-back calls", {"op": "paced", "estimate_ms": estimate})
            if not reply.get("ok"):
                raise Stop(who, phase, str(reply.get("error")))
            try:
                pace = reported_ms(reply, "pace_ms")
            except (KeyError, TypeError, ValueError):
                raise Stop(who, phase, f"a malformed answer to a pace request: {str(reply)[:200]}") from None
            block.pace_ms.append(pace)

    def _check_timed(self, seed: int, run: int, digest_seed: int, digest: Any,
                     whole: bool = False, index: int = -1) -> tuple[str | None, float]:
        """A timed call's output, shipped after the call: it must be the output the call committed to
        (its digest), agree with the reference, and keep the precision the checked calls showed. A large
        output ships leaves drawn now, tied to the digest (``sampled.py``), unless this check is drawn
        to be whole (or ``whole``); ``index``: the call's place in its request. Returns the problem (None
        if none) and the milliseconds the check is charged against its block's budget."""
        key = self.key()
        expected = self.expect("reference outputs for a timed run",
                               {"key": key, "seed": seed, "variant": 0, "exact": True})
        sizes = [int(o["bytes"]) for o in expected.get("outputs", [])]
        # leaves are drawn per output: only where every output of the reference is a tensor
        leaves = None if whole or len(sizes) != expected.get("count") else \
            sampled.draw_if_sampled(self.rng, sizes, self.plan.timing)
        if leaves is not None:
            cost_ms = SAMPLED_CHECK_MS_PER_GB * sum(sizes) / 1e9
            reply = self.ask(self.worker, "worker", "shipping leaves of a timed output",
                             {"op": "ship_leaves", "leaves": leaves, "name": f"timed{run}", "index": index})
        else:
            cost_ms = CHECK_MS_PER_GB * sum(sizes) / 1e9
            reply = self.ask(self.worker, "worker", "shipping a timed output",
                             {"op": "ship", "name": f"timed{run}", "index": index})
        if not reply.get("ok"):
            self.ask(self.oracle, "oracle", "dropping an expectation", {"op": "drop", "key": key})
            return f"timed run {run}: {reply.get('error')}", cost_ms
        found = self._compare(key, reply, expected, "comparing a timed output", digest_seed=digest_seed,
                              leaves=leaves)
        if found["problem"]:
            return f"timed run {run}: {found['problem']}", cost_ms
        if not same_digest(digest, found.get("digests")):
            return (f"timed run {run}: the output shipped after the call is not the one the call returned (its "
                    "digest differs): the work was done after the timed call"), cost_ms
        self._timed_precision(found, expected)
        return None, cost_ms
