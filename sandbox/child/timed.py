"""One timed call, the same in the candidate's process and in the oracle's (which times the reference
with it), so that both sides of a speedup are measured alike.

On a GPU a timed call is ``cover; start.record(); out = fn(*inputs); end.record()``, queued like
``triton.testing.do_bench``. The cover (``cover.py``) flushes L2 and then holds every SM for a fixed
time while the host enqueues the call, so the host's launch cost is hidden as far as it lasts (0.26
ms), any host work beyond that (many launches, heavy glue in ``forward``) leaves the GPU idle between
the events and counts, and no work of the call can run before the start event on another stream.
Before the call, one untimed call on the previous inputs (:func:`warm_host`). Right after the end
event, the cover's probe (a barrier that completes only when its programs hold every SM at once):
blocks of the call still running on another stream hold it back, and its delay is added to the
call's time. Then a
device-wide synchronize waits for anything else; when that wait, measured on the host, is longer
than ``LAG_ALLOWANCE_MS``, work outlived the call and the wait is added too. The host time of ``fn``
itself is kept beside, for information. After a block of timed calls, :func:`paced_ms` times
back-to-back calls, for a ``forward`` whose own host work is slower than its kernels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from kernelevo.sandbox.child.digest import tensor_digest

_perf_counter = time.perf_counter

LAG_ALLOWANCE_MS = 0.02
"""A device-wide synchronize after the probe takes a few microseconds of host time when nothing else
runs (up to a few tens in a process that just woke up, now and then); a longer wait means work of
this call was still queued on another stream behind other work. Work that was running, or ready to
run, there when the call returned is timed on the GPU by the probe, to the microsecond."""


def _device_synchronize() -> None:
    """Wait for all work on the current device. ``torch.cuda.synchronize`` wraps this in a Python
    device guard that costs about 10 us of host time, twice the wait itself when nothing is left,
    and that cost is the noise the lag allowance must clear."""
    torch._C._cuda_synchronize()


def call_ms(gpu_ms: float, lag_ms: float) -> float:
    """The time a timed call counts: its events' time, plus work that outlived the end event."""
    return gpu_ms + (lag_ms if lag_ms > LAG_ALLOWANCE_MS else 0.0)


class TimedCall:
    """Times calls of a function on one device (CUDA events on a GPU, a wall clock on the CPU)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.last_parts: dict[str, float] = {}
        """The last GPU call's time in parts: between the events, the cover's delay, the probe's."""
        if device == "cuda":
            from kernelevo.sandbox.child.cover import LaunchCover

            self.cover = LaunchCover(device)
            self.flush = self.cover.flush
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def __call__(self, fn: Callable[..., Any], inputs: list[Any]) -> tuple[Any, float, float, float]:
        """``(output, gpu_ms, host_ms, lag_ms)`` of one call (on the CPU, gpu_ms is the wall time)."""
        if self.device != "cuda":
            began = _perf_counter()
            out = fn(*inputs)
            host = (_perf_counter() - began) * 1e3
            return out, host, host, 0.0
        return self.around(lambda: fn(*inputs))

    def around(self, launch: Callable[[], Any]) -> tuple[Any, float, float, float]:
        """The cover, then ``launch()`` timed between two events on the current stream, then the probe
        (see the module). A cover or a probe held up by other kernels adds the delay to the call's time."""
        stream = torch.cuda.current_stream()  # a call that switches streams does not move the clock
        self.cover.launch()
        self.start.record(stream)
        began = _perf_counter()
        out = launch()
        host = (_perf_counter() - began) * 1e3
        self.end.record(stream)
        self.cover.probe(stream)
        if torch.cuda.current_stream() != stream:
            torch.cuda.set_stream(stream)
        self.cover.probed.synchronize()
        settled = _perf_counter()
        _device_synchronize()
        lag = (_perf_counter() - settled) * 1e3
        events, excess, tail = (self.start.elapsed_time(self.end), self.cover.excess_ms(self.start),
                                self.cover.tail_ms(self.end))
        self.last_parts = {"events_ms": events, "excess_ms": excess, "tail_ms": tail}
        return out, events + excess + tail, host, lag


GRAPH_WARM_CALLS = 3
"""Calls on a side stream before capture, as CUDA graphs require: lazy initialization (cuBLAS
handles, autotuning, first-call compilation) must not happen during capture."""


class GraphTimedCall:
    """``fn`` on fixed input tensors, captured once as a CUDA graph and replayed: what a call costs
    when its launches are recorded ahead, the ``--cuda-graph`` timing for launch-bound candidates.
    The caller refills the captured input tensors in place before each replay; the output is the
    graph's own tensors, which every replay overwrites. Timed exactly like :class:`TimedCall`."""

    def __init__(self, timer: TimedCall, fn: Callable[..., Any], inputs: list[Any]) -> None:
        self.timer = timer
        self.inputs = list(inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARM_CALLS):
                fn(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = fn(*inputs)
        torch.cuda.synchronize()

    def replays(self, inputs: list[Any]) -> bool:
        """Are ``inputs`` the captured ones (the same tensors, refilled; equal other values)? A replay
        reads the captured tensors whatever the call would be given."""
        return len(inputs) == len(self.inputs) and all(
            a is b if isinstance(b, torch.Tensor) else (not isinstance(a, torch.Tensor) and a == b)
            for a, b in zip(inputs, self.inputs))

    def __call__(self, inputs: list[Any]) -> tuple[Any, float, float, float]:
        """``(output, gpu_ms, host_ms, lag_ms)`` of one replay on ``inputs``, which must be the captured
        tensors refilled in place (a ValueError otherwise: the replay would read stale values)."""
        if not self.replays(inputs):
            raise ValueError("the inputs are no longer the tensors the graph captured")
        return self.timer.around(self._replay)

    def _replay(self) -> Any:
        self.graph.replay()
        return self.out


def requested_calls(msg: dict[str, Any]) -> list[tuple[int, int]]:
    """A timed request's calls: each one's input seed and the seed its output's digest is made under."""
    calls = msg.get("calls")
    if not isinstance(calls, list) or not calls:
        raise ValueError("a timed request names no calls")
    return [(int(call["seed"]), int(call["digest_seed"])) for call in calls]


class HarnessParts:
    """Where a timed request's time goes in the process that serves it, beside the call: the refill of
    its inputs, the output's digest, the whole handler (the rest of the session's wall time is the
    messages). Read by the timing benchmarks to find which of them the candidate's process pays more
    for than the oracle; a candidate's figures are its own word, so no verdict reads them."""

    def __init__(self) -> None:
        self.marks = [_perf_counter()]

    def mark(self) -> None:
        """The end of the next part: the refill, the call, the digest, then the copy kept."""
        self.marks.append(_perf_counter())

    def figures(self) -> dict[str, float]:
        marks = self.marks
        return {"refill_ms": (marks[1] - marks[0]) * 1e3, "digest_ms": (marks[3] - marks[2]) * 1e3,
                "handler_ms": (marks[-1] - marks[0]) * 1e3}


def timed_calls(msg: dict[str, Any], fill: Callable[[int], list[Any]],
                run: Callable[[list[Any]], tuple[Any, float, float, float]], timer: TimedCall | None,
                kept: list[Any] | None) -> dict[str, Any]:
    """A timed request's calls, one after another, in either process: each on the inputs of its seed
    (``fill``), run, its output digested under its own seed and, where the request holds several,
    copied apart from what later calls write (one buffer written by every call, a CUDA graph's static
    output, an input refilled), into ``kept`` where given (the candidate's process keeps them for the
    session's checks; the oracle makes the same copies and drops them, so both walls hold the same
    work). The reply: each call's figures, in order."""
    calls, answers = requested_calls(msg), []
    for seed, digest_seed in calls:
        harness = HarnessParts()
        with torch.no_grad():
            args = fill(seed)
            harness.mark()
            out, gpu_ms, host_ms, lag_ms = run(args)
            harness.mark()
            digest = output_digest(out, digest_seed)
            harness.mark()
            copy = kept_copy(out) if len(calls) > 1 else out
            harness.mark()
        if kept is not None:
            kept.append(copy)
        del out, copy
        figures = harness.figures()
        answers.append({"gpu_ms": gpu_ms, "host_ms": host_ms, "lag_ms": lag_ms, "digest": digest,
                        "digest_ms": figures["digest_ms"], "parts": dict(timer.last_parts) if timer else {},
                        "harness": figures})
    return {"ok": True, "calls": answers}


def flat_outputs(out: Any) -> list[Any]:
    """A model's outputs as a list: a tuple or list of outputs, or one."""
    return list(out) if isinstance(out, (tuple, list)) else [out]


def kept_copy(out: Any) -> list[Any]:
    """A copy of each tensor of ``out`` (the rest as they are), in its own memory and with its strides:
    an output kept while a request's later calls run. Both processes make it, so that both walls hold
    the same work."""
    return [_copy_with_strides(value) if isinstance(value, torch.Tensor) else value for value in flat_outputs(out)]


def _copy_with_strides(value: torch.Tensor) -> torch.Tensor:
    copy = torch.empty_like(value)  # a dense tensor's strides; a view with gaps or overlaps gets others
    if copy.stride() == value.stride() or value.numel() <= 1:
        return copy.copy_(value)
    storage = value.untyped_storage().clone()
    return torch.empty(0, dtype=value.dtype, device=value.device).set_(storage, value.storage_offset(), value.size(),
                                                                        value.stride())


def output_digest(out: Any, seed: int) -> list[list[int]]:
    """:func:`tensor_digest` of each output."""
    return [tensor_digest(v, seed, k) for k, v in enumerate(flat_outputs(out))]


def same_digest(a: Any, b: Any) -> bool:
    """Exactly equal digests (the same bits hash the same on one device)."""
    return isinstance(a, list) and isinstance(b, list) and a == b


def warm_host(fn: Callable[..., Any], inputs: list[Any] | None, device: str) -> None:
    """One untimed call on the previous call's inputs, finished, right before a timed call's refill.

    Each timed call is its own request: between two of them the process waits on its channel while
    others run, and its CPU caches and clocks go cold. Launching from Python (a Triton kernel costs
    tens of microseconds of host work) then takes several times longer than in a loop of calls, the
    way a model calls it or ``do_bench`` times it, and the excess outlasts the L2 flush that hides a
    launch. This call makes the timed one the next of a loop. It cannot help a cache: it sees only
    values the last timed call already had, and the new ones arrive after it has finished. A
    candidate can still do the next call's input-independent work here, off the clock; the forensic
    pass bounds that (docs/EVALUATION.md, "Work moved off the clock")."""
    if device != "cuda" or inputs is None:
        return
    fn(*inputs)
    torch.cuda.synchronize()


PACE_WINDOW_MS = 2.0
"""How long one pace measurement's loop of calls runs, about (from the call's timed length)."""
PACE_CALLS = (2, 100)
"""The fewest and the most calls in one pace measurement."""


def paced_ms(fn: Callable[..., Any], inputs: list[Any], estimate_ms: float) -> tuple[float, int]:
    """``(ms per call, calls)`` of back-to-back calls on the same inputs, launched as fast as the host
    can and synchronized once at the end, on the host's clock: what a call costs in a loop when the
    host, not the GPU, sets the pace (many launches, glue in ``forward``), as ``do_bench`` sees it.

    The timed call cannot see this: its cover hides up to 0.26 ms of host work, as a busy queue does
    in a model whose other work keeps the GPU fed. When ``forward`` alone keeps the GPU waiting, the
    user pays the host's time, so the judge takes the slower of the two (``sandbox/judge/timing.py``).
    The inputs repeat, so a cache could make this loop fast; that only leaves the timed call's figure
    standing. One call first, finished, so a cold process's first launch is not in the loop."""
    low, high = PACE_CALLS
    calls = max(low, min(high, math.ceil(PACE_WINDOW_MS / max(estimate_ms, 1e-3))))
    fn(*inputs)
    _device_synchronize()
    began = _perf_counter()
    for _ in range(calls):
        fn(*inputs)
    _device_synchronize()
    return (_perf_counter() - began) * 1e3 / calls, calls


def warm_up(fn: Callable[..., Any], inputs: list[Any], device: str, calls: int, seconds: float) -> int:
    """Call ``fn`` at least ``calls`` times and for at least ``seconds`` (an idle GPU's clocks take a
    while to ramp up); returns how many calls ran."""
    began = _perf_counter()
    done = 0
    while done < calls or (_perf_counter() - began < seconds and done < 100 * max(calls, 1)):
        fn(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        done += 1
    return done
