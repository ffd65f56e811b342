"""How long does the timed call's device-wide synchronize take when nothing is left to wait for?
(not a test; needs a GPU)

The timed call (``sandbox/child/timed.py``) ends with the probe's event synchronize and then a
device-wide synchronize, timed on the host: work of the call still queued on another stream behind
other work makes that wait long. This measures the wait's noise in one process, so that its
allowance can be set from data: after each timed call of ``torch.relu`` on 1M values,

- ``lag``: the timed call's own synchronize (what ``TimedCall`` reports; the driver's call, no guard);
- ``again``: the probe queued once more, its event synchronized, then a device-wide synchronize timed
  again (the same state, certainly nothing left);
- ``raw``: ``torch._C._cuda_synchronize()`` timed right after (no Python device guard);
- ``blank``: a whole timed call around nothing, its lag.

Then one hostile pattern: the call's real work queued on a side stream behind a kernel that holds
every SM past the end event, to show what the probe counts and what only the synchronize sees.

Modes: ``loop`` (calls back to back) and ``idle`` (1 ms of host sleep between calls, as a worker
waits for its next request). Usage: python bench/sync_lag.py [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import time


def quantiles(values: list[float]) -> str:
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return f"{pick(0.1):.4f} | {statistics.median(values):.4f} | {pick(0.9):.4f} | {pick(0.99):.4f}"


def noise_rows(calls: int) -> None:
    import torch

    from kernelevo.sandbox.child.timed import LAG_ALLOWANCE_MS, TimedCall

    timer = TimedCall("cuda")
    x = torch.randn(1 << 20, device="cuda")
    for mode, pause in (("loop", 0.0), ("idle", 1e-3)):
        rows: dict[str, list[float]] = {"lag": [], "again": [], "raw": [], "blank": [], "lag - again": []}
        for _ in range(calls):
            if pause:
                time.sleep(pause)
            _, _, _, lag = timer(torch.relu, [x])
            timer.cover.probe()
            timer.cover.probed.synchronize()
            began = time.perf_counter()
            torch.cuda.synchronize()
            again = (time.perf_counter() - began) * 1e3
            began = time.perf_counter()
            torch._C._cuda_synchronize()
            raw = (time.perf_counter() - began) * 1e3
            if pause:
                time.sleep(pause)
            _, _, _, blank = timer.around(lambda: None)
            for key, value in (("lag", lag), ("again", again), ("raw", raw), ("blank", blank),
                               ("lag - again", lag - again)):
                rows[key].append(value)
        for key, values in rows.items():
            over = sum(v > LAG_ALLOWANCE_MS for v in values)
            print(f"| {mode} | {key} | {quantiles(values[1:])} | {over}/{len(values)} |", flush=True)


def hostile_rows(calls: int) -> None:
    """The call's own work (relu, 256M values, about 0.35 ms) queued on a side stream behind a
    filler that holds every SM for about 0.06 ms past the end event."""
    import torch

    from kernelevo.sandbox.child.timed import TimedCall

    timer = TimedCall("cuda")
    filler = torch.randn(48 << 20, device="cuda")
    work = torch.randn(256 << 20, device="cuda")
    side = torch.cuda.Stream()

    def hostile():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.relu(filler)
            return torch.relu(work)

    def honest():
        return torch.relu(work)

    for label, fn in (("honest", honest), ("hostile", hostile)):
        parts: dict[str, list[float]] = {"events": [], "excess": [], "tail": [], "lag": []}
        for _ in range(calls):
            time.sleep(1e-3)
            _, _, _, lag = timer(fn, [])
            for key in ("events", "excess", "tail"):
                parts[key].append(timer.last_parts[f"{key}_ms"])
            parts["lag"].append(lag)
        print(f"| {label} | " + " | ".join(f"{k} {statistics.median(v[1:]):.4f}" for k, v in parts.items()) + " |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    print("| mode | host wait | p10 ms | median | p90 | p99 | over the allowance |")
    print("|---|---|---|---|---|---|---|")
    noise_rows(args.calls)
    print()
    print("| candidate | medians (ms) |")
    print("|---|---|")
    hostile_rows(max(args.calls // 4, 20))


if __name__ == "__main__":
    main()
