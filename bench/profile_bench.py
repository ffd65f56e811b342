"""Profiles of candidates on the GPU (not a test): what docs/BENCHMARKS.md records for issue 6.

For each TASK=CANDIDATE pair (or TASK alone: the built-in policy's first seed for it), runs
`kernelevo profile TASK CANDIDATE --json` and keeps the verdict's figures, the per-kernel Nsight
Compute counters, the compiler report and the diagnosis. Prints a table; writes OUT/profiles.json.

Usage: python bench/profile_bench.py --out DIR rmsnorm softmax=path/to/candidate.py ...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def seed_candidate(task: str, folder: Path, size: str = "full") -> Path:
    """The built-in policy's first seed for ``task``, written to a file."""
    from kernelevo.agent.builtin.policy import BuiltinPolicy, seeds
    from kernelevo.tasks import load_task

    policy = BuiltinPolicy()
    policy.prepare(load_task(task, size))
    strategy, params, why = next(iter(seeds(policy.plan)))
    path = folder / f"{task}-seed.py"
    path.write_text(policy._proposal(strategy, dict(params), None, why)["source"])
    return path


def _f(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--size", default="full", choices=["full", "small"], help="small: a smoke test")
    parser.add_argument("pairs", nargs="+", help="TASK or TASK=CANDIDATE")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for pair in args.pairs:
        task, _, path = pair.partition("=")
        candidate = Path(path) if path else seed_candidate(task, args.out, args.size)
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "profile", task, str(candidate), "--json",
                               "--size", args.size], capture_output=True, text=True, cwd=ROOT, timeout=1200)
        (args.out / f"{task}.log").write_text(done.stdout + done.stderr)
        try:
            data = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            data = {"error": done.stderr[-2000:]}
        data["wall_s"] = round(time.monotonic() - began, 1)
        data["candidate_file"] = str(candidate)
        results[task] = data
        (args.out / "profiles.json").write_text(json.dumps(results, indent=1))
    print("| task | kernel | ncu us | DRAM % | SM % | occupancy % (theoretical) | registers | L2 hit % | "
          "top stall | profile s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for task, data in results.items():
        profile = data.get("profile") or {}
        for k in profile.get("kernels", [])[:3]:
            stalls = {s: v for s, v in k["stalls"].items() if s != "selected"}
            top = max(stalls, key=stalls.get) if stalls else ""
            print(f"| {task} | {k['name']} | {k['duration_us']:.0f} | {_f(k['dram_pct'])} | {_f(k['sm_pct'])} | "
                  f"{_f(k['achieved_occupancy_pct'])} ({_f(k['theoretical_occupancy_pct'])}) | {k['registers']} | "
                  f"{_f(k['l2_hit_pct'])} | {top} | {profile.get('ncu_seconds')} |")
    for task, data in results.items():
        profile = data.get("profile") or {}
        print(f"- {task}: {profile.get('diagnosis') or data.get('error', '')[:300]}; unavailable: "
              f"{profile.get('unavailable')}")


if __name__ == "__main__":
    main()
