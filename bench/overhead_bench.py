"""Harness overhead per evaluation inside one run (one Evaluator, one workspace and compile cache),
as in an optimizer run: the same candidate judged N times; prints overhead and phases of each.

Usage: python bench/overhead_bench.py [TASK] [CANDIDATE] [N] [SANDBOX]   (SANDBOX: process or docker)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator
from kernelevo.tasks import load_task


def main() -> None:
    task = sys.argv[1] if len(sys.argv) > 1 else "relu"
    cand = Path(sys.argv[2] if len(sys.argv) > 2 else "tests/candidates/ok_relu_empty.py")
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    from kernelevo.sandbox.isolation.choose import make_sandbox

    sandbox, _ = make_sandbox(sys.argv[4] if len(sys.argv) > 4 else "process")
    config = EvalConfig(measure_compile=False, cache_dir=Path(tempfile.mkdtemp(prefix="kernelevo-oh-")))
    with Evaluator(config, sandbox=sandbox) as ev:
        loaded = load_task(task, "full" if ev.device == "cuda" else "small")
        ev.baseline(loaded)
        for i in range(runs):
            verdict, _ = ev.evaluate(loaded, cand)
            print(json.dumps({"run": i, "sandbox": sandbox.name, "correct": verdict.correct,
                              "runtime_ms": verdict.runtime_ms, "harness_overhead_s": verdict.harness_overhead_s,
                              "wall_s": verdict.wall_s, "phases": verdict.phases}), flush=True)


if __name__ == "__main__":
    main()
