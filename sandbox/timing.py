"""Timing on the GPU with CUDA events: warm-up, an L2 flush before every run, rotated input sets.

Each timed run is ``flush; start.record(); fn(); synchronize(); end.record()``: synchronizing the
whole device before the end event puts work on side streams inside the measurement, at the cost of
a few microseconds that every candidate and baseline pay alike.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelevo.sandbox.models import TimingPolicy, TimingStats

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_elapsed_time = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_event_sync = torch.cuda.Event.synchronize
_zero_ = torch.Tensor.zero_


def stats(times_ms: Sequence[float]) -> TimingStats:
    ordered = sorted(times_ms)
    n = len(ordered)
    return TimingStats(
        median_ms=statistics.median(ordered),
        mean_ms=statistics.fmean(ordered),
        min_ms=ordered[0],
        p10_ms=ordered[int(0.1 * (n - 1))],
        p90_ms=ordered[int(0.9 * (n - 1))],
        runs=n,
    )


def l2_flush_buffer(device: torch.device | str = "cuda") -> torch.Tensor:
    """A buffer twice the size of the L2 cache (at least 256 MB): zeroing it evicts the cache."""
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024
    return torch.empty(max(2 * l2, 256 * 1024 * 1024), dtype=torch.uint8, device=device)


def time_cuda(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    policy: TimingPolicy,
    flush: torch.Tensor,
    keep: int = 0,
    rng: random.Random | None = None,
) -> tuple[list[float], dict[int, tuple[int, Any]]]:
    """Time ``fn`` over rotated input sets; returns per-run milliseconds and the kept outputs.

    ``keep`` outputs of runs chosen at random (unknown to the code being timed) are returned as
    ``{run: (input_set, output)}`` so that the harness can check what the timed runs computed.
    """
    began = _perf_counter()
    i = 0
    while i < policy.warmup or (_perf_counter() - began < policy.warmup_s and i < 10 * policy.max_runs):
        fn(*input_sets[i % len(input_sets)])
        _synchronize()
        i += 1
    rng = rng or random.Random()
    chosen = set(rng.sample(range(policy.min_runs), min(keep, policy.min_runs)))
    kept: dict[int, tuple[int, Any]] = {}
    times: list[float] = []
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    began = _perf_counter()
    run = 0
    while run < policy.max_runs and (run < policy.min_runs or _perf_counter() - began < policy.budget_s):
        which = run % len(input_sets)
        _zero_(flush)
        _record(start)
        out = fn(*input_sets[which])
        _synchronize()
        _record(end)
        _event_sync(end)
        times.append(_elapsed_time(start, end))
        if run in chosen:
            kept[run] = (which, out)
        del out
        run += 1
    return times, kept


def time_cpu(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]], runs: int = 3) -> list[float]:
    """Wall-clock milliseconds of a few calls on the CPU (meaningless under the Triton interpreter)."""
    times = []
    for i in range(runs):
        began = _perf_counter()
        fn(*input_sets[i % len(input_sets)])
        times.append((_perf_counter() - began) * 1e3)
    return times
