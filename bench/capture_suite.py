"""Whole networks as people write them: can ``optimize-model`` capture KernelBench's level-3 files,
unchanged? (not a test; any machine)

For each file, in its own process with a time limit, at the automatic small size: the model built
from the file, its forward captured (symbolic tracing, or the trace at the inputs' shapes where that
fails), cut into regions, and the cut network run against the original (exact equality of outputs).
Reports how each file was captured, its regions (and how many could be written as tasks, and how
many of those the built-in policy plans: its first generation proposed and rendered, as a search
starts; a planner error is listed), or why it could not be.

With ``--optimize N``, each file instead goes through ``kernelevo optimize-model`` with N evaluations
(the built-in policy, at the small size on the CPU, the file's own size on a GPU) and the row says how
the network ended: reassembled and verified end to end (with how many regions replaced, and the time
against eager on a GPU) or why not. Results accumulate in ``--out`` (a file already there is skipped
unless ``--redo``), so a sweep can stop and go on.

Usage: python bench/capture_suite.py [--levels 3] [--only GPT,ResNet] [--timeout 180] [--out FILE]
       python bench/capture_suite.py --optimize 4 --only MLP,LeNet --timeout 900 --out FILE
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from kernelbench import run_within  # noqa: E402 - a sibling script: stops a run and its sandboxed jobs

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT.parent / "shared" / "kernelbench"

PROBE = r"""
import copy, json, sys, torch
from kernelevo.agent.model.runtime import ModelSpec, build
from kernelevo.tasks import regions as rg

model, inputs = build(ModelSpec(path=sys.argv[1], size="small"))
try:
    gm = rg.capture(model, inputs)
except rg.CannotCapture as exc:
    print(json.dumps({"captured": False, "reason": str(exc)[:300]}))
    sys.exit(0)
try:
    torch.fx.symbolic_trace(copy.deepcopy(model))  # a copy: a failed trace can leave proxies in a module
    how = "symbolic"
except Exception:
    how = "shapes fixed"
found = rg.partition(gm)
with torch.no_grad():
    want, got = model(*inputs), rg.split(gm, found)(*inputs)
same = all(torch.equal(a, b) for a, b in zip(*(o if isinstance(o, (tuple, list)) else [o] for o in (want, got))))
# each region's task through the search's first step, as optimize-model would start it
import tempfile
from pathlib import Path
from kernelevo.agent.builtin.policy import BuiltinPolicy
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.policy import SearchView
from kernelevo.tasks import load_task
planned, failures = 0, []
with tempfile.TemporaryDirectory() as folder:
    for k, region in enumerate(r for r in found if r.supported):
        path = Path(folder) / f"r{k}_{region.kind}.py"
        path.write_text(rg.region_task_source(gm, region))
        try:
            task = load_task(str(path), "small")
            policy = BuiltinPolicy()
            policy.prepare(task)
            policy.propose(SearchView(task=task, generation=0, archive={}, entries=[], tried=set()), 64)
            planned += 1
        except CannotCover:
            pass
        except Exception as exc:
            failures.append(f"{path.stem}: {type(exc).__name__}: {str(exc)[:200]}")
print(json.dumps({"captured": True, "how": how, "regions": len(found),
                  "tasks": sum(r.supported for r in found), "split_exact": same,
                  "kinds": sorted({r.kind for r in found}), "planned": planned, "plan_failures": failures}))
"""


def probe(path: Path, timeout_s: float) -> dict:
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True,
                              timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"captured": False, "reason": f"took longer than {timeout_s:.0f} s at the small size"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        error = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"captured": False, "reason": f"the file did not build or run: {error[:300]}"}
    return json.loads(lines[-1])


def optimize(path: Path, evals: int, timeout_s: float, size: str, keep: Path | None = None) -> dict:
    """``optimize-model`` on one file; the end-to-end result as its run folder's ``model.json`` holds it.
    With ``keep``, the run folder is kept there (``keep/<file stem>``, ``keep`` one folder a level)."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernelevo-capture-") as scratch:
        os.chmod(scratch, 0o711)  # without bubblewrap the candidates run as a user that must pass through
        run = Path(scratch) / "run"
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            os.chmod(keep, 0o711)
            run = keep / path.stem
            shutil.rmtree(run, ignore_errors=True)
        cmd = [sys.executable, "-m", "kernelevo.agent.cli", "optimize-model", str(path), "--size", size,
               "--max-evals", str(evals), "--run-dir", str(run)]
        try:
            done = run_within(cmd, timeout_s)
        except subprocess.TimeoutExpired:
            return {"end_to_end": False, "reason": f"took longer than {timeout_s:.0f} s"}
        seconds = round(time.monotonic() - began, 1)
        try:
            state = json.loads((run / "model.json").read_text())
        except (OSError, json.JSONDecodeError):
            tail = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
            return {"end_to_end": False, "exit_code": done.returncode, "seconds": seconds, "reason": tail[:300]}
    e2e = state.get("end_to_end") or {}
    regions = state.get("regions") or []
    return {"end_to_end": bool(e2e.get("correct")), "exit_code": done.returncode, "seconds": seconds,
            "regions": len(regions), "optimized": sum(r.get("state") == "optimized" for r in regions),
            "replaced": e2e.get("regions_replaced", 0), "max_abs_error": e2e.get("max_abs_error"),
            "speedup": e2e.get("speedup"),
            "reason": e2e.get("reason") or e2e.get("note") or next(
                (f"region {r.get('name')}: {r.get('reason')}" for r in regions if r.get("state") == "interrupted"),
                None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="3")
    parser.add_argument("--only", default="", help="comma-separated substrings of file names")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--suite", type=Path, default=SUITE, help="the folder holding level3/")
    parser.add_argument("--optimize", type=int, default=0, metavar="N",
                        help="run optimize-model with N evaluations instead of the capture probe")
    parser.add_argument("--size", default="small", help="--optimize: the size to optimize at")
    parser.add_argument("--redo", action="store_true", help="run files already in --out again")
    parser.add_argument("--jobs", type=int, default=1,
                        help="files run at once (their GPU work still takes turns: one lock per GPU)")
    parser.add_argument("--keep-runs", type=Path, help="--optimize: keep each run folder here")
    args = parser.parse_args()
    wanted = [s for s in args.only.split(",") if s]
    kept = json.loads(args.out.read_text()) if args.out and args.out.exists() else {}
    todo = []
    for level in args.levels.split(","):
        for path in sorted((args.suite / f"level{level}").glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
            name = f"level{level}/{path.stem}"
            if (not wanted or any(w in path.name for w in wanted)) and (name not in kept or args.redo):
                todo.append((name, path))

    def one(name: str, path: Path) -> dict:
        try:
            if args.optimize:
                keep = args.keep_runs / name.split("/")[0] if args.keep_runs else None
                return optimize(path, args.optimize, args.timeout, args.size, keep)
            return probe(path, args.timeout)
        except Exception as exc:  # one file's fault (this script's, say) never loses the others' rows
            key = "end_to_end" if args.optimize else "captured"
            return {key: False, "reason": f"the sweep failed on this file: {type(exc).__name__}: {exc}"}

    rows = {}
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = {pool.submit(one, name, path): (name, path) for name, path in todo}
        for future in as_completed(futures):  # each row as soon as its file finishes
            name, path = futures[future]
            rows[name] = result = future.result()
            if args.out:  # after each file: a sweep cut short keeps what finished, and rows not run stay
                args.out.write_text(json.dumps({**kept, **rows}, indent=1))
            print(f"{path.stem:40s} {json.dumps(result)}", flush=True)
    if args.optimize:
        done = {**kept, **rows}
        print(f"\nend to end verified {sum(r['end_to_end'] for r in done.values())} of {len(done)}; "
              f"with a region replaced {sum(r['end_to_end'] and r.get('replaced', 0) > 0 for r in done.values())}")
        return
    captured = [r for r in rows.values() if r["captured"]]
    print(f"\ncaptured {len(captured)} of {len(rows)} "
          f"({sum(r['how'] == 'shapes fixed' for r in captured)} only with shapes fixed); "
          f"cut network exact in {sum(r['split_exact'] for r in captured)}; "
          f"regions {sum(r['regions'] for r in captured)}, as tasks {sum(r['tasks'] for r in captured)}")


if __name__ == "__main__":
    main()
