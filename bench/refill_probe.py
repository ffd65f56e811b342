"""Why does a small kernel read slower right after the judge's input refill? (not a test; needs a GPU)

One process, no sandbox, the judge's timed call (``sandbox/child/timed.py``) around ``torch.relu`` on
1M and 4M fp32 values, with what happens between two timed calls varied one thing at a time:

- ``same``: nothing (the same values every call, as ``do_bench`` times);
- ``warm``: the judge's warm call and its synchronize, no new values;
- ``copy``: new values copied in from a tensor made beforehand (no generator, no allocation);
- ``generate``: new values made by the task's generator and copied in, as the judge refills;
- ``generate+idle``: the same, then a synchronize and 1 ms of host sleep before the call;
- ``judge``: the warm call, then the judge's refill (what a timed request does).

Usage: python bench/refill_probe.py [--calls 61]
"""

from __future__ import annotations

import argparse
import statistics
import time


def size_rows(n: int, calls: int, timer) -> None:  # noqa: ANN001 - a TimedCall
    import torch
    import triton.testing

    from kernelevo.sandbox.child.inputs import InputBuffers
    from kernelevo.sandbox.child.timed import call_ms, warm_host

    buffers = InputBuffers()
    buffers.fill([torch.randn(n, device="cuda")])
    spare = torch.randn(n, device="cuda")
    bench = triton.testing.do_bench(lambda: torch.relu(buffers.tensors[0]), return_mode="median")

    def generate(seed: int) -> list:
        torch.manual_seed(seed)
        return [torch.randn(n, device="cuda")]

    steps = {
        "same": lambda k: None,
        "warm": lambda k: warm_host(torch.relu, buffers.tensors, "cuda"),
        "copy": lambda k: buffers.tensors[0].copy_(spare),
        "generate": lambda k: buffers.fill(generate(k)),
        "generate+idle": lambda k: (buffers.fill(generate(k)), torch.cuda.synchronize(), time.sleep(1e-3)),
        "judge": lambda k: (warm_host(torch.relu, buffers.tensors, "cuda"), buffers.fill(generate(k))),
    }
    for label, between in steps.items():
        times, parts = [], []
        for k in range(calls):
            between(k)
            _, gpu, _, lag = timer(torch.relu, buffers.tensors)
            times.append(call_ms(gpu, lag))
            parts.append([timer.last_parts["events_ms"], timer.last_parts["excess_ms"], timer.last_parts["tail_ms"],
                          timer.cover.launch_ms])
        times = sorted(times[1:])
        events, excess, tail, launch = (statistics.median(column) for column in zip(*parts[1:]))
        print(f"| {n} | {label} | {statistics.median(times):.4f} | {times[len(times) // 10]:.4f} | "
              f"{times[9 * len(times) // 10]:.4f} | {bench:.4f} | {events:.4f} | {excess:.4f} | {tail:.4f} | "
              f"{launch:.4f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=61)
    parser.add_argument("--cover-ms", default="0.26", help="cover lengths to try, comma-separated")
    parser.add_argument("--sizes", default=f"{1 << 20},{1 << 22}")
    args = parser.parse_args()
    from kernelevo.sandbox.child import cover
    from kernelevo.sandbox.child.timed import TimedCall

    print("| values | between calls | median ms | p10 | p90 | do_bench ms | events | excess | tail | cover launch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for length in args.cover_ms.split(","):
        cover.COVER_NS = round(float(length) * 1e6)
        timer = TimedCall("cuda")  # calibrated at this length
        print(f"| cover {length} ms, uncontended {timer.cover.uncontended_ms:.4f} | | | | | | | | | |")
        for n in args.sizes.split(","):
            size_rows(int(n), args.calls, timer)


if __name__ == "__main__":
    main()
