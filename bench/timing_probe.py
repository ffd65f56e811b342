"""Where do the judge's timed call and ``triton.testing.do_bench`` part? (not a test; needs a GPU)

The sweep (``timing_methods.py``) found three departures; this script isolates each cause:

1. Refill: at some sizes the judge's call on freshly refilled inputs reads 20-25 us longer than the
   same call on unchanged inputs, even when the call is a replayed CUDA graph (no host launch cost).
   Variants: refill as the judge does; refill then a device synchronize; refill with the values
   generated straight into the buffers (no temporary); refill with the temporary kept alive past the
   call (is it where the output lands?).
2. Queue depth: below 40 us do_bench reads about 1 us more per call than the judge. Variants: do_bench
   as shipped (every call queued ahead, one synchronize at the end) and the same loop synchronized
   after every call, as the judge is.
3. Power: on large GEMMs the judge reads faster than do_bench at higher SM clocks. Variant: the judge's
   call with the GPU kept busy between calls, as do_bench's back-to-back loop keeps it.

Usage: python bench/timing_probe.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelevo.sandbox.child.timed import TimedCall, call_ms, warm_up

POINTS = {"rowsum": [2**20, 2**24, 2**26], "relu": [2**22, 2**26], "gemm": [1024, 8192]}


def op_and_shape(op: str, size: int) -> tuple[Callable[..., Any], list[tuple[tuple[int, ...], torch.dtype]]]:
    if op == "relu":
        return torch.relu, [((size,), torch.float32)]
    if op == "rowsum":
        return (lambda x: x.sum(dim=-1)), [((size // 8192, 8192), torch.float32)]
    return torch.matmul, [((size, size), torch.bfloat16)] * 2


def clock_mhz() -> int | None:
    try:
        import pynvml
    except ImportError:
        return None
    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)


def judge_variant(fn: Callable[..., Any], shapes: list, variant: str, budget_s: float = 0.6) -> float:
    """Median of the judge's timed call, inputs refilled per ``variant`` before every call."""
    timer = TimedCall("cuda")
    buffers = [torch.randn(s, device="cuda", dtype=d) for s, d in shapes]
    heater = torch.empty(1 << 26, device="cuda") if variant == "busy between calls" else None
    warm_up(fn, buffers, "cuda", 3, 0.25)
    times, began, k = [], time.perf_counter(), 0
    while len(times) < 200 and (len(times) < 25 or time.perf_counter() - began < budget_s):
        k += 1
        torch.manual_seed(k)
        kept = None
        if variant in ("refill", "refill, synchronize", "refill, keep the temporary"):
            temps = [torch.randn(s, device="cuda", dtype=d) for s, d in shapes]
            for b, t in zip(buffers, temps):
                b.copy_(t)
            if variant == "refill, keep the temporary":
                kept = temps
            del temps
            if variant == "refill, synchronize":
                torch.cuda.synchronize()
        elif variant == "refill in place":
            for b in buffers:
                b.normal_()
        elif variant == "busy between calls":
            for _ in range(4):
                fn(*buffers)
        out, gpu, _host, lag = timer(fn, buffers)
        del out, kept
        times.append(call_ms(gpu, lag))
    del heater
    return statistics.median(times)


def do_bench_variant(fn: Callable[..., Any], shapes: list, synchronized: bool, rep_ms: float = 300) -> float:
    """do_bench's loop (flush, event, call, event), queued ahead or synchronized after every call."""
    import triton.testing

    args = [torch.randn(s, device="cuda", dtype=d) for s, d in shapes]
    if not synchronized:
        return float(triton.testing.do_bench(lambda: fn(*args), warmup=100, rep=rep_ms, return_mode="median"))
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    warm_up(fn, args, "cuda", 3, 0.1)
    starts, ends, began = [], [], time.perf_counter()
    while len(starts) < 1000 and (time.perf_counter() - began) * 1e3 < rep_ms:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        s.record()
        fn(*args)
        e.record()
        torch.cuda.synchronize()
        starts.append(s)
        ends.append(e)
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    variants = ["unchanged", "refill", "refill, synchronize", "refill in place", "refill, keep the temporary",
                "busy between calls"]
    with torch.no_grad():
        for op, sizes in POINTS.items():
            for size in sizes:
                fn, shapes = op_and_shape(op, size)
                row: dict[str, Any] = {"op": op, "size": size}
                for _repeat in range(2):
                    for v in variants:
                        row.setdefault(v, []).append(judge_variant(fn, shapes, v))
                    row.setdefault("judge clock", []).append(clock_mhz())
                    row.setdefault("do_bench", []).append(do_bench_variant(fn, shapes, False))
                    row.setdefault("do_bench clock", []).append(clock_mhz())
                    row.setdefault("do_bench, synchronized", []).append(do_bench_variant(fn, shapes, True))
                rows.append(row)
                print(json.dumps({k: ([round(x, 4) if isinstance(x, float) else x for x in v]
                                      if isinstance(v, list) else v) for k, v in row.items()}), flush=True)
                torch.cuda.empty_cache()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
