"""Does the judge's timed call agree with ``triton.testing.do_bench``? (not a test; needs a GPU)

For a copy-bound pointwise op (ReLU, fp32), a row reduction (sum over rows of 8192 fp32) and a GEMM
(bf16, square), over sizes from a few microseconds to about 100 ms, for eager and for torch.compile:
the median of the judge's own timed call (``sandbox/child/timed.py``, each call on fresh values in the
same buffers, as the judge does), and beside it the slower of that and the same calls queued back to back
the way do_bench queues them (``timed.queued_ms``, which the judge does not count), against do_bench's
median on the same inputs (its L2 flush, its
back-to-back launches). Each point is measured ``--repeats`` times, the two methods alternating, with
the SM clock and the power draw read after each, so a disagreement can be told from a disturbed
sample or a GPU that heated up. Beside them: the judge's call on unchanged inputs (is it the refill?)
and the CUDA-graph replay the ``--cuda-graph`` option times. A side-stream variant shows that work
outliving the call is counted.

Usage: python bench/timing_methods.py [--ops relu,rowsum,gemm] [--repeats 3] [--compile-sizes 3] [--sizes N]
                                      [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (op, sizes): relu and rowsum sizes are element counts, gemm sizes are M = N = K.
SWEEP = {
    "relu": [2**20, 2**21, 2**22, 2**24, 2**26, 2**28, 2**30],
    "rowsum": [2**20, 2**21, 2**22, 2**24, 2**26, 2**28, 2**30],
    "gemm": [1024, 2048, 4096, 8192, 16384, 32768],
}


def make(op: str, size: int) -> tuple[Callable[..., Any], Callable[[int], list[Any]]]:
    """The op and a function that makes its inputs from a seed (fresh values each time)."""
    import torch

    def relu_inputs(seed: int) -> list[Any]:
        torch.manual_seed(seed)
        return [torch.randn(size, device="cuda")]

    def rowsum_inputs(seed: int) -> list[Any]:
        torch.manual_seed(seed)
        return [torch.randn(size // 8192, 8192, device="cuda")]

    def gemm_inputs(seed: int) -> list[Any]:
        torch.manual_seed(seed)
        return [torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2)]

    ops = {"relu": (torch.relu, relu_inputs), "rowsum": (lambda x: x.sum(dim=-1), rowsum_inputs),
           "gemm": (torch.matmul, gemm_inputs)}
    return ops[op]


def gpu_state() -> dict:
    """The SM clock (MHz) and power draw (W) right now, from NVML."""
    try:
        import pynvml
    except ImportError:
        return {"sm_mhz": None, "watts": None}
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "watts": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3}


QUEUED_WINDOW_MS = 100.0
"""How long one queued measurement's calls run, about (from the call's timed length, its flush beside)."""
QUEUED_CALLS = (5, 400)
"""The fewest and the most calls in one queued measurement."""


def queued_ms(fn: Callable[..., Any], inputs: list[Any], flush: Any, estimate_ms: float) -> tuple[float, int]:
    """``(median ms per call, calls)`` of calls queued back to back on the same inputs, each after an
    L2 flush (``flush`` zeroed), each between two events on the current stream, synchronized once at
    the end: ``triton.testing.do_bench``'s method, so that a figure means what the usual tool's does.

    Here, not in the judge, which cannot count it: in the candidate's process the inputs repeat,
    nothing is checked and the figure is the process's own word, so a candidate can make its queued
    calls fast (a cache keyed on the inputs' version counters, work skipped when the queue is deep) or
    report any figure; counting the slower of this and the timed calls on both sides would then count
    the reference's queue cost and not the candidate's, a gain from nothing (docs/EVALUATION.md, "Why
    queued calls are not counted"). The data of 2026-12-06 used a 20 ms window and the median of the
    measurements; these settings (100 ms, the fastest of two) have not run on a GPU yet."""
    import torch

    low, high = QUEUED_CALLS
    calls = max(low, min(high, math.ceil(QUEUED_WINDOW_MS / max(estimate_ms, 1e-3))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    fn(*inputs)
    torch.cuda.synchronize()
    for start, end in zip(starts, ends):
        flush.zero_()
        start.record()
        fn(*inputs)
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)), calls


def judge_median(fn: Callable[..., Any], make_inputs: Callable[[int], list[Any]], budget_s: float = 1.0,
                 refill: bool = True, graph: bool = False) -> dict:
    """The judge's timed call, as the session drives it: warm-up, then calls on fresh values until the
    budget is spent (25 to 200 calls), then the pace of back-to-back calls (reported beside, as the
    judge reports it). ``refill=False``: the same values every call; ``graph``: the call captured once
    as a CUDA graph and replayed (the ``--cuda-graph`` timing)."""
    import torch

    from kernelevo.sandbox.child.inputs import InputBuffers
    from kernelevo.sandbox.child.timed import (
        GraphTimedCall,
        TimedCall,
        call_ms,
        paced_ms,
        warm_host,
        warm_up,
    )
    from kernelevo.sandbox.judge.timing import PACE_MEASUREMENTS

    buffers, timer = InputBuffers(), TimedCall("cuda")
    with torch.no_grad():
        args = buffers.fill(make_inputs(0))
        warm_up(fn, args, "cuda", 3, 0.25)
        replay = GraphTimedCall(timer, fn, args) if graph else None
        times, hosts, began = [], [], time.perf_counter()
        while len(times) < 200 and (len(times) < 25 or time.perf_counter() - began < budget_s):
            if refill:
                if not replay:
                    warm_host(fn, buffers.tensors, "cuda")
                args = buffers.fill(make_inputs(len(times) + 1))
            out, gpu, host, lag = replay(args) if replay else timer(fn, args)
            del out
            times.append(call_ms(gpu, lag))
            hosts.append(host)
        # reported beside the time, as the judge does (sandbox/judge/timing.py, host_bound)
        paces = [paced_ms(fn, args, statistics.median(times))[0] for _ in range(PACE_MEASUREMENTS)] \
            if refill and not replay else []
        # do_bench's method on the judge's side (not what the judge counts: child/timed.queued_ms says why)
        queued = [queued_ms(fn, args, timer.cover.flush, statistics.median(times))[0]
                  for _ in range(2)] if refill and not replay else []
    fresh = statistics.median(times)
    pace = min(paces) if paces else None
    queued_fastest = min(queued) if queued else None
    # "median_ms" is what the judge counts (its timed calls); "slower_ms" what the slower of the two would read
    return {"median_ms": fresh, "queued_ms": queued_fastest,
            "slower_ms": max(fresh, queued_fastest) if queued_fastest is not None else fresh,
            "pace_ms": pace,
            "host_ms": statistics.median(hosts), "runs": len(times), **gpu_state()}


def do_bench_median(fn: Callable[..., Any], args: list[Any]) -> float:
    import torch
    import triton.testing

    with torch.no_grad():
        return float(triton.testing.do_bench(lambda: fn(*args), warmup=100, rep=500, return_mode="median"))


def side_stream_row() -> dict:
    """ReLU of 256M floats launched on a side stream the call does not wait for."""
    import torch

    side = torch.cuda.Stream()

    def escaping(x: Any) -> Any:
        y = torch.empty_like(x)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.clamp_min(x, 0.0, out=y)
        return y

    fn, make_inputs = make("relu", 2**28)
    plain = judge_median(fn, make_inputs)
    escaped = judge_median(escaping, make_inputs)
    return {"op": "relu on a side stream", "size": 2**28, "plain_ms": plain["median_ms"],
            "side_stream_ms": escaped["median_ms"]}


def compare_point(callable_: Callable[..., Any], make_inputs: Callable[[int], list[Any]], args: list[Any],
                  repeats: int) -> dict:
    """The judge and do_bench alternating ``repeats`` times on one op and size, plus the judge on
    unchanged inputs and the graph replay once each."""
    judged, benched, states = [], [], []
    for _ in range(repeats):
        j = judge_median(callable_, make_inputs)
        judged.append(j["median_ms"])
        benched.append(do_bench_median(callable_, args))
        states.append({**gpu_state(), "judge_sm_mhz": j["sm_mhz"], "host_ms": j["host_ms"], "pace_ms": j["pace_ms"],
                       "slower_ms": j["slower_ms"], "queued_ms": j["queued_ms"]})
    same = judge_median(callable_, make_inputs, refill=False)["median_ms"]
    try:
        graphed: float | str = judge_median(callable_, make_inputs, graph=True)["median_ms"]
    except Exception as exc:  # a capture failure is a finding of the sweep, not its end
        graphed = f"{type(exc).__name__}: {str(exc)[:120]}"
    ratios = [j / b for j, b in zip(judged, benched)]
    slower = statistics.median(s["slower_ms"] for s in states)
    return {"judge_ms": statistics.median(judged), "do_bench_ms": statistics.median(benched), "slower_ms": slower,
            "slower_ratio": slower / statistics.median(benched),
            "ratio": statistics.median(judged) / statistics.median(benched), "ratios": ratios,
            "judge_runs_ms": judged, "do_bench_runs_ms": benched, "same_inputs_ms": same, "graph_ms": graphed,
            "states": states, "host_ms": statistics.median(s["host_ms"] for s in states)}


def sweep(ops: list[str], compile_sizes: int, repeats: int) -> list[dict]:
    import torch

    rows = []
    for op in ops:
        sizes = SWEEP[op]
        compiled_at = set(sizes[:: max(1, len(sizes) // compile_sizes)][:compile_sizes])
        for size in sizes:
            fn, make_inputs = make(op, size)
            try:
                args = make_inputs(0)
            except torch.OutOfMemoryError:
                continue
            variants = {"eager": fn}
            if size in compiled_at:
                variants["compile"] = torch.compile(fn)
            for label, callable_ in variants.items():
                point = compare_point(callable_, make_inputs, args, repeats)
                rows.append({"op": op, "size": size, "callable": label, **point})
                graphed = point["graph_ms"]
                print(f"{op:7s} {size:>12d} {label:8s} judge {point['judge_ms']:.4f} ms  do_bench "
                      f"{point['do_bench_ms']:.4f} ms  ratio {point['ratio']:.3f} "
                      f"({', '.join(f'{r:.3f}' for r in point['ratios'])})  slower of judge and queued "
                      f"{point['slower_ratio']:.3f}  same inputs {point['same_inputs_ms']:.4f}"
                      f"  graph {graphed if isinstance(graphed, str) else f'{graphed:.4f}'}  host "
                      f"{point['host_ms']:.4f} ms  MHz {[s['judge_sm_mhz'] for s in point['states']]}/"
                      f"{[s['sm_mhz'] for s in point['states']]}", flush=True)
            del args
            torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="relu,rowsum,gemm")
    parser.add_argument("--compile-sizes", type=int, default=3, help="sizes per op also timed under torch.compile")
    parser.add_argument("--repeats", type=int, default=3, help="alternations of the judge and do_bench per point")
    parser.add_argument("--sizes", type=int, default=0, help="only each op's first N sizes (0: all)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.sizes:
        for op in SWEEP:
            SWEEP[op] = SWEEP[op][:args.sizes]
    rows = sweep(args.ops.split(","), args.compile_sizes, args.repeats)
    side = side_stream_row()
    print(f"side stream: plain {side['plain_ms']:.4f} ms, escaping {side['side_stream_ms']:.4f} ms")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "side_stream": side}, indent=2))
    print("| op | size | callable | judge ms | do_bench ms | ratio | ratio per repeat | slower of judge and queued "
          "| same inputs ms | graph ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        g = r["graph_ms"]
        print(f"| {r['op']} | {r['size']} | {r['callable']} | {r['judge_ms']:.4f} | {r['do_bench_ms']:.4f} | "
              f"{r['ratio']:.3f} | {' '.join(f'{x:.3f}' for x in r['ratios'])} | {r['slower_ratio']:.3f} | "
              f"{r['same_inputs_ms']:.4f} | "
              f"{'capture failed' if isinstance(g, str) else f'{g:.4f}'} |")


if __name__ == "__main__":
    main()
