"""Does the judge's timed call agree with ``triton.testing.do_bench``? (not a test; needs a GPU)

For a copy-bound pointwise op (ReLU, fp32), a row reduction (sum over rows of 8192 fp32) and a GEMM
(bf16, square), over sizes from a few microseconds to about 100 ms, for eager and for torch.compile:
the median of the judge's own timed call (``sandbox/child/timed.py``, each call on fresh values in the
same buffers, as the judge does) against do_bench's median on the same inputs (its L2 flush, its
back-to-back launches). A side-stream variant shows that work outliving the call is counted.

Usage: python bench/timing_methods.py [--ops relu,rowsum,gemm] [--compile-sizes 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# (op, sizes): relu and rowsum sizes are element counts, gemm sizes are M = N = K.
SWEEP = {
    "relu": [2**20, 2**22, 2**24, 2**26, 2**28, 2**30, 2**32],
    "rowsum": [2**20, 2**22, 2**24, 2**26, 2**28, 2**30, 2**32],
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


def judge_median(fn: Callable[..., Any], make_inputs: Callable[[int], list[Any]], budget_s: float = 1.0) -> dict:
    """The judge's timed call, as the session drives it: warm-up, then calls on fresh values until the
    budget is spent (25 to 200 calls)."""
    import torch

    from kernelevo.sandbox.child.inputs import InputBuffers
    from kernelevo.sandbox.child.timed import TimedCall, call_ms, warm_up

    buffers, timer = InputBuffers(), TimedCall("cuda")
    with torch.no_grad():
        warm_up(fn, buffers.fill(make_inputs(0)), "cuda", 3, 0.25)
        times, hosts, began = [], [], time.perf_counter()
        while len(times) < 200 and (len(times) < 25 or time.perf_counter() - began < budget_s):
            args = buffers.fill(make_inputs(len(times) + 1))
            out, gpu, host, lag = timer(fn, args)
            del out
            times.append(call_ms(gpu, lag))
            hosts.append(host)
    return {"median_ms": statistics.median(times), "host_ms": statistics.median(hosts), "runs": len(times)}


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


def sweep(ops: list[str], compile_sizes: int) -> list[dict]:
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
                judged = judge_median(callable_, make_inputs)
                bench = do_bench_median(callable_, args)
                rows.append({"op": op, "size": size, "callable": label, "judge_ms": judged["median_ms"],
                             "host_ms": judged["host_ms"], "runs": judged["runs"], "do_bench_ms": bench,
                             "ratio": judged["median_ms"] / bench})
                print(f"{op:7s} {size:>12d} {label:8s} judge {judged['median_ms']:.4f} ms  do_bench {bench:.4f} ms  "
                      f"ratio {judged['median_ms'] / bench:.3f}  host {judged['host_ms']:.4f} ms", flush=True)
            del args
            torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="relu,rowsum,gemm")
    parser.add_argument("--compile-sizes", type=int, default=3, help="sizes per op also timed under torch.compile")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = sweep(args.ops.split(","), args.compile_sizes)
    side = side_stream_row()
    print(f"side stream: plain {side['plain_ms']:.4f} ms, escaping {side['side_stream_ms']:.4f} ms")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "side_stream": side}, indent=2))
    print("| op | size | callable | judge ms | do_bench ms | judge / do_bench |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['op']} | {r['size']} | {r['callable']} | {r['judge_ms']:.4f} | {r['do_bench_ms']:.4f} | "
              f"{r['ratio']:.3f} |")


if __name__ == "__main__":
    main()
