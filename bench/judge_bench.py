"""The judge on a GPU (not a test): what docs/BENCHMARKS.md records for the trust boundary and timing.

1. Spread: the same Triton ReLU judged ``--repeats`` times, each in fresh processes (oracle and
   candidate), at three sizes whose calls take about 20 us, 200 us and 2 ms: the spread of the
   verdicts' medians (max / min - 1) is the noise a tie band must cover.
2. Cost: each verdict's wall time without the forensic pass, and one verdict with it per size, so the
   share the pass adds per verdict is measured, not guessed (and where its seconds go, by phase).
3. A search's cost (``--search N``): N verdicts with the forensic pass on one Evaluator, as a search
   makes them. The first starts its traced process cold; later ones find one started ahead, while
   the previous verdict was being read, so their pass is what a search pays per verdict.

Usage: python bench/judge_bench.py [--repeats 3] [--search 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from kernelevo.sandbox.judge.forensic import PHASE as FORENSIC_PHASE

ROOT = Path(__file__).resolve().parents[1]
TASK = '''"""ReLU over N fp32 values (a judge benchmark)."""
import torch
import torch.nn as nn

N = {n}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''
# fp32 ReLU moves 8 bytes per value; at about 3.5 TB/s: 20 us, 200 us and 2 ms.
SIZES = {"20us": 9_000_000, "200us": 90_000_000, "2ms": 900_000_000}


def relu_task(folder: Path, n: int):  # noqa: ANN201 - a Task
    """The ReLU task over ``n`` values, written into ``folder`` and loaded at its own size."""
    from kernelevo.tasks import load_task

    path = folder / f"relu_{n}.py"
    path.write_text(TASK.format(n=n))
    return load_task(str(path), "full")


def judge(folder: Path, n: int, repeats: int, forensic: bool, cache: Path, per_request: int = 1) -> list[dict]:
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator
    from kernelevo.sandbox.models import TimingPolicy

    task = relu_task(folder, n)
    rows = []
    for k in range(repeats):  # a new Evaluator each time: fresh oracle and candidate processes
        trace = folder / f"trace-{n}-{forensic}-{k}.jsonl"
        os.environ["KERNELEVO_TIMING_TRACE"] = str(trace)
        config = EvalConfig(measure_compile=False, forensic=forensic, cache_dir=cache,
                            timing=TimingPolicy(calls_per_request=per_request))
        with Evaluator(config) as ev:
            verdict, _ = ev.evaluate(task, ROOT / "tests" / "candidates" / "ok_relu_empty.py")
        os.environ.pop("KERNELEVO_TIMING_TRACE")
        rows.append({"correct": verdict.correct, "reason": verdict.reason, "runtime_ms": verdict.runtime_ms,
                     "eager_ms": verdict.reference_runtime_ms, "noise_pct": verdict.noise_pct,
                     "wall_s": verdict.wall_s, "phases": verdict.phases, "assurance": verdict.assurance,
                     "forensic": verdict.forensic, "clock": verdict.clock, "calls": call_parts(trace)})
        print(json.dumps({"n": n, "forensic": forensic, "per_request": per_request, **rows[-1]}), flush=True)
    return rows


def search_like(folder: Path, n: int, verdicts: int, cache: Path) -> list[dict]:
    """``verdicts`` judgements of the same candidate on one Evaluator, forensic pass on, with a pause
    between them as a search's next proposal would leave: each verdict's wall time and pass."""
    import time

    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    task = relu_task(folder, n)
    rows = []
    with Evaluator(EvalConfig(measure_compile=False, forensic=True, cache_dir=cache)) as ev:
        for k in range(verdicts):
            verdict, _ = ev.evaluate(task, ROOT / "tests" / "candidates" / "ok_relu_empty.py")
            rows.append({"k": k, "correct": verdict.correct, "reason": verdict.reason, "wall_s": verdict.wall_s,
                         "forensic_s": verdict.phases.get(FORENSIC_PHASE), "phases": verdict.phases,
                         "assurance": verdict.assurance})
            print(json.dumps({"n": n, "search": True, **rows[-1]}), flush=True)
            time.sleep(5)  # a proposal's time; the next traced process starts meanwhile
    return rows


def call_parts(trace: Path) -> dict:
    """Per process, the medians of what its timed calls reported (events, lag past the end event,
    host time of ``forward``) and of the session's wall time around each, and how often a lag counted."""
    lines = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    parts = {}
    for who in ("worker", "oracle"):
        mine = [c for c in lines if c["who"] == who]
        if mine:
            parts[who] = {key: round(statistics.median(c[key] for c in mine), 4)
                          for key in ("gpu_ms", "lag_ms", "host_ms", "wall_ms")}
            for key in ("events_ms", "excess_ms", "tail_ms"):  # the GPU time's parts (timed.py)
                values = [c["parts"][key] for c in mine if (c.get("parts") or {}).get(key) is not None]
                if values:
                    parts[who][key] = round(statistics.median(values), 4)
                    parts[who][key.replace("_ms", "_counted")] = sum(v > 0 for v in values)
            for key in ("refill_ms", "digest_ms", "handler_ms"):  # the process's own harness work (timed.py)
                values = [c["harness"][key] for c in mine if (c.get("harness") or {}).get(key) is not None]
                if values:
                    parts[who][key] = round(statistics.median(values), 4)
            handled = [c["wall_ms"] - c["harness"]["handler_ms"] for c in mine
                       if (c.get("harness") or {}).get("handler_ms")]
            if handled:  # the session's wall time outside the process's handler: the messages
                parts[who]["messages_ms"] = round(statistics.median(handled), 4)
            parts[who]["lag_counted"] = sum(c["lag_ms"] > 0.02 for c in mine)
            parts[who]["calls"] = len(mine)
    return parts


def summary(rows: list[dict]) -> dict:
    times = [r["runtime_ms"] for r in rows if r["runtime_ms"]]
    walls = [r["wall_s"] for r in rows]
    passes = [r["phases"].get(FORENSIC_PHASE, 0.0) for r in rows]
    return {"median_ms": statistics.median(times) if times else None,
            "spread_pct": 100 * (max(times) / min(times) - 1) if len(times) > 1 else None,
            "wall_s": statistics.median(walls), "forensic_s": statistics.median(passes),
            "correct": all(r["correct"] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"which of {', '.join(SIZES)}")
    parser.add_argument("--search", type=int, default=0,
                        help="also judge N times on one Evaluator with the forensic pass, as a search does")
    parser.add_argument("--calls-per-request", default="1",
                        help="timed calls per request, a list to compare (e.g. 1,8): whether the wall time the "
                             "clock leaves unexplained per call shrinks with more calls a request")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.repeats < 1 and not args.search:
        parser.error("nothing to measure: give --repeats 1 or more, or --search N")
    result: dict = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder, cache = Path(scratch), Path(scratch) / "cache"
        for label in args.sizes.split(","):
            n = SIZES[label]
            if args.search:
                result[f"{label} search"] = {"rows": search_like(folder, n, args.search, cache)}
                if args.repeats == 0:
                    continue
            without = judge(folder, n, args.repeats, False, cache)
            with_pass = judge(folder, n, 1, True, cache)
            result[label] = {"without_forensic": summary(without), "with_forensic": summary(with_pass),
                             "rows": without + with_pass}
            for per_request in [int(k) for k in args.calls_per_request.split(",") if int(k) > 1]:
                rows = judge(folder, n, args.repeats, False, cache, per_request)
                result[f"{label} x{per_request}"] = {"without_forensic": summary(rows), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    for label, r in result.items():
        if "search" in label:
            print(f"{label}: verdict wall s {[row['wall_s'] for row in r['rows']]}, "
                  f"forensic pass s {[row['forensic_s'] for row in r['rows']]}")
    print("| call | median ms | spread between processes | verdict wall s | forensic pass s | wall without it s |")
    print("|---|---|---|---|---|---|")
    for label, r in result.items():
        if "search" in label:
            continue
        wo = r["without_forensic"]
        w = r.get("with_forensic")  # none for several calls per request: those compare the clock only
        print(f"| {label} | {wo['median_ms']:.4g} | {wo['spread_pct'] or 0:.2f}% | "
              f"{w['wall_s'] if w else wo['wall_s']:.2f} | {w['forensic_s'] if w else 0.0:.2f} | {wo['wall_s']:.2f} |")
    print("clock per verdict (unexplained / allowed ms):")
    for label, r in result.items():
        clocks = [row.get("clock") or {} for row in r["rows"] if "clock" in row]
        if clocks:
            print(f"  {label}: " + ", ".join(f"{c.get('unexplained_ms')}/{c.get('allowed_ms')}" for c in clocks))


if __name__ == "__main__":
    main()
