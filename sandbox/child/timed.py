"""One timed call, the same in the candidate's process and in the oracle's (which times the reference
with it), so that both sides of a speedup are measured alike.

On a GPU a timed call is ``flush L2; start.record(); out = fn(*inputs); end.record()``, queued like
``triton.testing.do_bench``: the flush keeps the GPU busy while the host enqueues the call, so the
host's launch cost is hidden as far as the flush lasts, and any host work beyond that (more launches,
glue in ``forward``) leaves the GPU idle between the events and counts. After the end event has
completed, a device-wide synchronize waits for work on any other stream; when that wait is longer
than ``LAG_ALLOWANCE_MS``, work outlived the call (a side stream, a thread) and the wait is added to
the call's time. The host time of ``fn`` itself is kept beside, for information.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

_perf_counter = time.perf_counter

LAG_ALLOWANCE_MS = 0.02
"""A device-wide synchronize right after the end event takes a few microseconds when nothing else
runs; a longer wait means work of this call was still running on another stream."""


def flush_buffer(device: str) -> torch.Tensor:
    """A buffer twice the size of the L2 cache (at least 256 MB): zeroing it evicts the cache."""
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024
    return torch.empty(max(2 * l2, 256 * 1024 * 1024), dtype=torch.uint8, device=device)


def call_ms(gpu_ms: float, lag_ms: float) -> float:
    """The time a timed call counts: its events' time, plus work that outlived the end event."""
    return gpu_ms + (lag_ms if lag_ms > LAG_ALLOWANCE_MS else 0.0)


class TimedCall:
    """Times calls of a function on one device (CUDA events on a GPU, a wall clock on the CPU)."""

    def __init__(self, device: str) -> None:
        self.device = device
        if device == "cuda":
            self.flush = flush_buffer(device)
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def __call__(self, fn: Callable[..., Any], inputs: list[Any]) -> tuple[Any, float, float, float]:
        """``(output, gpu_ms, host_ms, lag_ms)`` of one call (on the CPU, gpu_ms is the wall time)."""
        if self.device != "cuda":
            began = _perf_counter()
            out = fn(*inputs)
            host = (_perf_counter() - began) * 1e3
            return out, host, host, 0.0
        self.flush.zero_()
        self.start.record()
        began = _perf_counter()
        out = fn(*inputs)
        host = (_perf_counter() - began) * 1e3
        self.end.record()
        self.end.synchronize()
        settled = _perf_counter()
        torch.cuda.synchronize()
        lag = (_perf_counter() - settled) * 1e3
        return out, self.start.elapsed_time(self.end), host, lag


DIGEST_CHUNK = 1 << 22
"""Elements weighted at a time: the digest's float64 copies stay small whatever the output's size."""


def tensor_digest(value: Any, seed: int, index: int) -> float:
    """``value``'s elements, in logical order, summed in float64 with pseudo-random weights drawn from
    ``seed``: a commitment to an output that only the output itself satisfies (a constant such as a
    softmax's row sums cannot stand in for it), cheap enough to take after every timed call."""
    if not isinstance(value, torch.Tensor):
        return 0.0
    flat = value.detach().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    generator = torch.Generator(device=flat.device)
    total = 0.0
    for start in range(0, flat.numel(), DIGEST_CHUNK):
        part = flat[start:start + DIGEST_CHUNK].to(torch.float64)
        generator.manual_seed((seed * 1_000_003 + index * 7_919 + start) % 2**62)
        weights = torch.rand(part.numel(), generator=generator, device=flat.device, dtype=torch.float64)
        total += float(torch.dot(part, weights))
    return total


def output_digest(out: Any, seed: int) -> list[float]:
    """:func:`tensor_digest` of each output (a tuple or list of outputs, or one)."""
    values = list(out) if isinstance(out, (tuple, list)) else [out]
    return [tensor_digest(v, seed, k) for k, v in enumerate(values)]


def same_digest(a: list[float], b: list[float]) -> bool:
    """Digests of the same values on one device agree to rounding (NaN agrees with NaN)."""
    if len(a) != len(b):
        return False
    return all((x != x and y != y) or x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y)) for x, y in zip(a, b))


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
