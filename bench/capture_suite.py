"""Whole networks as people write them: can ``optimize-model`` capture KernelBench's level-3 files,
unchanged? (not a test; any machine)

For each file, in its own process with a time limit, at the automatic small size: the model built
from the file, its forward captured (symbolic tracing, or the trace at the inputs' shapes where that
fails), cut into regions, and the cut network run against the original (exact equality of outputs).
Reports how each file was captured, its regions (and how many could be written as tasks), or why
it could not be.

Usage: python bench/capture_suite.py [--levels 3] [--only GPT,ResNet] [--timeout 180] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

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
print(json.dumps({"captured": True, "how": how, "regions": len(found),
                  "tasks": sum(r.supported for r in found), "split_exact": same,
                  "kinds": sorted({r.kind for r in found})}))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="3")
    parser.add_argument("--only", default="", help="comma-separated substrings of file names")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    wanted = [s for s in args.only.split(",") if s]
    rows = {}
    for level in args.levels.split(","):
        for path in sorted((SUITE / f"level{level}").glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
            if wanted and not any(w in path.name for w in wanted):
                continue
            rows[f"level{level}/{path.stem}"] = result = probe(path, args.timeout)
            print(f"{path.stem:40s} {json.dumps(result)}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    captured = [r for r in rows.values() if r["captured"]]
    print(f"\ncaptured {len(captured)} of {len(rows)} "
          f"({sum(r['how'] == 'shapes fixed' for r in captured)} only with shapes fixed); "
          f"cut network exact in {sum(r['split_exact'] for r in captured)}; "
          f"regions {sum(r['regions'] for r in captured)}, as tasks {sum(r['tasks'] for r in captured)}")


if __name__ == "__main__":
    main()
