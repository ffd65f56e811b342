"""The benchmark script's summary line, which docs/BENCHMARKS.md quotes: pure logic, no GPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _builtin_bench():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("builtin_bench", ROOT / "bench" / "builtin_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ratios_within_the_timing_methods_spread_are_ties_not_wins() -> None:
    bench = _builtin_bench()
    rows = {name: {"task": name, "evaluations": 8, "speedup": 2.0, "vs_compile": ratio, "strategy": "tiled"}
            for name, ratio in (("a", 1.10), ("b", 1.02), ("c", 0.97), ("d", 0.90))}
    rows["e"] = {"task": "e", "evaluations": 8, "speedup": None}  # the CPU interpreter: not a speedup
    text = bench.table({"tasks": rows})
    assert "across 4 tasks; faster than torch.compile on 1 of 4 by more than 4%, within 4% of it on 2." in text
