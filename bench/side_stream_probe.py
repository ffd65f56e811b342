"""Where does work on a stream the call never joins run, against the timed call's parts? (needs a GPU)

A call that launches its work on a side stream and returns at once must still be charged for that
work: the cover ahead of the call holds every SM, and the probe after the end event waits for the
whole GPU (``sandbox/child/cover.py``). This script times such calls with events of its own on the
side stream, recorded before and after its kernel, and prints for a sample of the calls where those
events fell relative to the call's start and end events and the probe, beside the parts the timer
counted. The first event marks when the side stream reached the kernel, not when its blocks got the
SMs (they may wait behind the hold and the cover): it is the earliest the kernel could have started.

Usage: python bench/side_stream_probe.py [--floats N] [--calls 15]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from kernelevo.sandbox.child.timed import TimedCall, call_ms


def device_facts(timer: TimedCall) -> dict:
    props = torch.cuda.get_device_properties("cuda")
    cover = timer.cover
    return {"gpu": props.name, "sms": props.multi_processor_count,
            "threads_per_sm": getattr(props, "max_threads_per_multi_processor", None),
            "registers_per_sm": getattr(props, "regs_per_multiprocessor", None),
            "cover_registers": cover.registers, "cover_grid": cover.grid[0], "fills": cover.fills_every_sm,
            "uncontended_cover_ms": round(cover.uncontended_ms, 4),
            "uncontended_probe_ms": round(cover.uncontended_probe_ms, 4),
            "uncontended_hold_ms": round(cover.uncontended_hold_ms, 4)}


def probe(timer: TimedCall, floats: int, calls: int, joined_to_start: bool) -> list[dict]:
    x = torch.randn(floats, device="cuda")
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def unjoined():
        if joined_to_start:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            before.record()
            torch.clamp_min(x, 0.0, out=y)
            after.record()
        return y

    rows = []
    for _ in range(calls):
        _, gpu_ms, host_ms, lag_ms = timer(unjoined, [])
        torch.cuda.synchronize()
        start, end, probed = timer.start, timer.end, timer.cover.probed
        rows.append({"counted_ms": round(call_ms(gpu_ms, lag_ms), 4),
                     **{k: round(v, 4) for k, v in timer.last_parts.items()},
                     "lag_ms": round(lag_ms, 4), "host_ms": round(host_ms, 4),
                     "side_reached_kernel_after_start_ms": round(start.elapsed_time(before), 4),
                     "side_ended_after_start_ms": round(start.elapsed_time(after), 4),
                     "probe_ended_after_start_ms": round(start.elapsed_time(probed), 4),
                     "end_after_start_ms": round(start.elapsed_time(end), 4)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floats", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    timer = TimedCall("cuda")
    print(json.dumps(device_facts(timer)))
    whole = []
    x = torch.randn(args.floats, device="cuda")
    for _ in range(args.calls):
        _, gpu_ms, _, lag_ms = timer(lambda: torch.clamp_min(x, 0.0), [])
        whole.append(call_ms(gpu_ms, lag_ms))
    print(json.dumps({"main_stream_median_ms": round(statistics.median(whole), 4)}))
    for joined in (True, False):
        rows = probe(timer, args.floats, args.calls, joined)
        print(json.dumps({"side_waits_for_start": joined,
                          "median_counted_ms": statistics.median(r["counted_ms"] for r in rows)}))
        for row in rows[:: max(1, len(rows) // 5)]:
            print("  " + json.dumps(row))


if __name__ == "__main__":
    main()
