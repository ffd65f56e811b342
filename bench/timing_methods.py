"""How much of a harness time is host overhead (not a test; needs a GPU).

The harness times one call at a time and synchronizes the device before its end event, so that work
on side streams is counted (docs/EVALUATION.md, loophole 7). The price: the host's dispatch time
(Python, torch.compile's guards, Triton's launcher) counts too whenever it is longer than the GPU's
wait. This script times the same callables three ways, over the same rotated inputs and L2 flush:

- ``harness``: the harness's own `timing.time_cuda`;
- ``preloaded``: the same, with a spin kernel queued ahead of the start event, so that the host
  dispatches while the GPU is still busy and only GPU time falls between the events;
- ``do_bench``: `triton.testing.do_bench`, median (back-to-back launches).

Usage: python bench/timing_methods.py TASK[=CANDIDATE.py] ... [--seed] [--busy-cpus N] [--out FILE]
``--seed`` also times the built-in policy's first seed candidate for each task (a Triton kernel,
whose launcher has its own host cost). ``--busy-cpus N`` keeps N processes spinning on the host
meanwhile, as a second evaluation starting up does.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
from pathlib import Path
from typing import Any


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


def measure(spec: str, seed: bool = False, scratch: Path | None = None) -> dict[str, Any]:
    import torch
    import triton.testing

    from kernelevo.sandbox import timing
    from kernelevo.sandbox.models import TimingPolicy
    from kernelevo.tasks.loader import instantiate, instantiate_candidate, load_task

    name, _, candidate = spec.partition("=")
    task = load_task(name)
    model, inputs = instantiate(task, device="cuda")
    sets = [inputs] + [instantiate(task, device="cuda", seed=s)[1] for s in (1, 2)]
    callables = {"eager": model, "compile": torch.compile(model)}
    if seed and not candidate:
        from kernelevo.agent.builtin.policy import seeds
        from kernelevo.agent.builtin.recognize import recognise
        from kernelevo.agent.builtin.templates import render

        plan = recognise(task)
        strategy, params, why = seeds(plan)[0]
        assert scratch is not None
        path = scratch / f"{name}_seed.py"
        path.write_text(render(plan, strategy, dict(params), why))
        candidate = str(path)
    if candidate:
        fn = callables["candidate"] = instantiate_candidate(task, Path(candidate), "cuda")
        with torch.no_grad():
            torch.testing.assert_close(fn(*inputs), model(*inputs), rtol=2e-2, atol=2e-2)
    policy = TimingPolicy()
    flush = timing.l2_flush_buffer()
    row: dict[str, Any] = {"task": name}
    with torch.no_grad():
        for label, fn in callables.items():
            harness, _ = timing.time_cuda(fn, sets, policy, flush)
            times = []
            for i in range(policy.min_runs * 2):
                flush.zero_()
                torch.cuda._sleep(2_000_000)  # about 1 ms of spinning: the host dispatches meanwhile
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*sets[i % len(sets)])
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            bench = triton.testing.do_bench(lambda f=fn: f(*inputs), return_mode="median")
            row[label] = {"harness_ms": statistics.median(harness), "preloaded_ms": statistics.median(times),
                          "do_bench_ms": bench}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", help="TASK or TASK=CANDIDATE.py")
    parser.add_argument("--seed", action="store_true", help="also time the built-in policy's first seed")
    parser.add_argument("--busy-cpus", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.busy_cpus)]
    for p in spinners:
        p.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            rows = [measure(spec, args.seed, Path(scratch)) for spec in args.tasks]
    finally:
        stop.set()
    if args.out:
        args.out.write_text(json.dumps({"busy_cpus": args.busy_cpus, "rows": rows}, indent=2))
    print(f"busy host CPUs: {args.busy_cpus}")
    print("| task | callable | harness ms | preloaded ms | do_bench ms |\n|---|---|---|---|---|")
    for row in rows:
        for label, t in row.items():
            if label != "task":
                print(f"| {row['task']} | {label} | {t['harness_ms']:.3f} | {t['preloaded_ms']:.3f} | "
                      f"{t['do_bench_ms']:.3f} |")


if __name__ == "__main__":
    main()
