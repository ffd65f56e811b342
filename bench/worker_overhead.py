"""Why does a Triton candidate time slower in the judge than in a plain process? (not a test; needs a GPU)

A Triton ReLU over 9M values runs in about 21 us, and ``TimedCall`` in a plain process reads that;
judged, the same kernel read 0.11-0.18 ms, with about 0.5 ms more wall time per call than the
reference's. Triton launches from Python (tens of microseconds of host work per launch, hidden by the
L2 flush while it lasts), so anything that slows the candidate's host side shows up in its time.
This script times the same call step by step towards the judge's worker:

1. in this process: plain; with the launch recorder installed; after checked calls (op recorder,
   poisoned allocations);
   and each call after the process went cold (other code ran, then it slept), as between two
   requests, with and without one untimed call first (``warm_host``);
2. the worker's and the oracle's request handlers driven in this process, warm and cold, before and
   after the worker's checked calls;
3. judged end to end (fresh oracle and worker, forensic pass off) under each isolation tier this
   machine offers (``KERNELEVO_ISOLATION``).

Usage: python bench/worker_overhead.py [--values 9000000] [--out FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CANDIDATE = ROOT / "tests" / "candidates" / "ok_relu_empty.py"


def go_cold() -> None:
    """What a process goes through between two requests: other code runs, then it sleeps."""
    churn = {str(k): [k] * 4 for k in range(30_000)}
    del churn
    time.sleep(0.002)


def timed_calls(model: Any, x: Any, calls: int = 300, cold: bool = False, warm_first: bool = False) -> dict:
    from kernelevo.sandbox.child.timed import TimedCall, warm_host, warm_up

    timer = TimedCall("cuda")
    warm_up(model, [x], "cuda", 10, 0.2)
    gpu, host = [], []
    for _ in range(calls):
        if cold:
            go_cold()
        if warm_first:
            warm_host(model, [x], "cuda")
        _out, g, h, _lag = timer(model, [x])
        gpu.append(g)
        host.append(h)
    return {"gpu_ms": statistics.median(gpu), "host_ms": statistics.median(host)}


def in_process(values: int) -> dict:
    import torch

    from kernelevo.sandbox.child.launches import LaunchRecorder, OpRecorder
    from kernelevo.sandbox.child.worker import _poison

    spec = importlib.util.spec_from_file_location("candidate", CANDIDATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, x = module.ModelNew().cuda(), torch.randn(values, device="cuda")
    rows = {}
    with torch.no_grad():
        rows["plain"] = timed_calls(model, x)
        LaunchRecorder().install()
        rows["launch recorder installed"] = timed_calls(model, x)
        ops = OpRecorder()
        for _ in range(5):
            _poison(True)
            with ops:
                model(x)
            _poison(False)
        rows["after checked calls"] = timed_calls(model, x)
        rows["cold between calls"] = timed_calls(model, x, cold=True)
        rows["cold, then one untimed call"] = timed_calls(model, x, cold=True, warm_first=True)
    return rows


def _request_times(handler: Any, cold: bool, calls: int = 60) -> dict:
    walls, gpus, hosts = [], [], []
    for k in range(calls):
        if cold:
            go_cold()
        handler.__self__.warm({"op": "warm"})  # as the session does: a request of its own, off the clock
        began = time.perf_counter()
        reply = handler({"op": "timed", "calls": [{"seed": 1000 + k, "digest_seed": 7 + k}]})["calls"][0]
        walls.append((time.perf_counter() - began) * 1e3)
        gpus.append(reply["gpu_ms"])
        hosts.append(reply["host_ms"])
    return {"wall_ms": statistics.median(walls), "gpu_ms": statistics.median(gpus),
            "host_ms": statistics.median(hosts),
            "unexplained_ms": statistics.median(w - g for w, g in zip(walls, gpus))}


def driven(values: int, device: str = "cuda") -> dict:
    """The worker's and the oracle's request handlers driven in this process, no sandbox, no channel:
    is the worker's timed request slower than the oracle's for the same work, and since when?"""
    from kernelevo.sandbox.child.worker import Worker
    from kernelevo.sandbox.judge.oracle import Oracle

    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        task, outbox = Path(scratch) / "relu.py", Path(scratch) / "out"
        outbox.mkdir()
        task.write_text((ROOT / "bench" / "judge_bench.py").read_text().split("TASK = '''")[1].split("'''")[0]
                        .format(n=values))
        job = {"task": str(task), "size": "full", "device": device, "dtype": None, "init_seed": 42,
               "outbox": str(outbox)}
        oracle = Oracle()
        oracle.load(job)
        oracle.warmup({"seed": 5, "calls": 3, "seconds": 0.25})
        worker = Worker(None)
        worker.build({**job, "candidate": str(CANDIDATE), "inbox": ""})
        worker.warmup({"seed": 5, "calls": 3, "seconds": 0.25})
        for cold in (False, True):
            rows[f"oracle{', cold' if cold else ''}"] = _request_times(oracle.timed, cold)
            rows[f"worker before checked calls{', cold' if cold else ''}"] = _request_times(worker.timed, cold)
        for k in range(5):
            worker.call({"seed": 50 + k, "variant": k, "record": True, "name": f"set{k}"})
        for cold in (False, True):
            rows[f"worker after checked calls{', cold' if cold else ''}"] = _request_times(worker.timed, cold)
    return rows


def judged(values: int, tier: str) -> dict:
    os.environ["KERNELEVO_ISOLATION"] = tier
    from kernelevo.sandbox.isolation import namespaces
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator
    from kernelevo.tasks import load_task

    namespaces.bwrap_works.cache_clear()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "relu.py"
        path.write_text((ROOT / "bench" / "judge_bench.py").read_text().split("TASK = '''")[1].split("'''")[0]
                        .format(n=values))
        task = load_task(str(path), "full")
        with Evaluator(EvalConfig(measure_compile=False, forensic=False, cache_dir=Path(scratch) / "c")) as ev:
            verdict, _ = ev.evaluate(task, CANDIDATE)
    return {"tier": namespaces.tier(), "correct": verdict.correct, "runtime_ms": verdict.runtime_ms,
            "host_ms": verdict.host_ms, "reference_ms": verdict.reference_runtime_ms,
            "reason": (verdict.reason or "")[:300]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=9_000_000)
    parser.add_argument("--tiers", default="none,bwrap", help="isolation tiers to judge under ('' for none)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result: dict[str, Any] = {"cpus": len(os.sched_getaffinity(0))}
    result["in_process"] = in_process(args.values)
    print(json.dumps(result), flush=True)
    result["driven"] = driven(args.values)
    for label, row in result["driven"].items():
        print(label, json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
    for tier in [t for t in args.tiers.split(",") if t]:
        result[f"judged, {tier}"] = judged(args.values, tier)
        print(json.dumps(result[f"judged, {tier}"]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
