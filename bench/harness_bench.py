"""Benchmarks of the evaluation core on a GPU (not a test): what docs/BENCHMARKS.md records.

Measures, on the GPU it runs on:
1. the GPU's ceilings (copy bandwidth, matmul peaks), as the harness measures and caches them;
2. eager time of every built-in task at full size (triton.testing.do_bench median), to check the
   1-15 ms sizing, and for a few tasks the harness's own eager median against do_bench;
3. the same Triton candidate judged in two separate `kernelevo eval` runs (medians within 3%?);
4. harness overhead per evaluation with baselines cached;
5. a CUDA (load_inline) candidate and a Triton candidate judged end to end.

Usage: python bench/harness_bench.py [--out DIR] [--sizing a,b] [--only label,...] [--skip-sizing]
Where the checkout has no .git (e.g. a copy on a GPU server), set KERNELEVO_COMMIT to the commit.
Resumable: each step's result is written to DIR/harness_bench.json as it completes and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def kernelevo_eval(task: str, candidate: str, cache: Path, *extra: str) -> tuple[dict, float]:
    env = dict(os.environ, KERNELEVO_CACHE=str(cache))
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "eval", task, candidate, "--json", *extra],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)
    wall = time.monotonic() - began
    try:
        return json.loads(done.stdout), wall
    except json.JSONDecodeError:
        return {"error": done.stderr[-2000:] or done.stdout[-2000:]}, wall


def _median_ms(model, inputs) -> float:  # noqa: ANN001
    import triton

    return triton.testing.do_bench(lambda: model(*inputs), warmup=100, rep=1000, return_mode="median")


def eager_do_bench(names: list[str]) -> dict[str, float]:
    import torch

    from kernelevo.tasks import load_task
    from kernelevo.tasks.loader import instantiate

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result = {}
    for name in names:
        with torch.no_grad():
            model, inputs = instantiate(load_task(name, "full"), "cuda", seed=1)
            result[name] = _median_ms(model, inputs)
        del model, inputs
        torch.cuda.empty_cache()
        print(f"eager {name}: {result[name]:.3f} ms", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/kernelevo-bench-cache"))
    parser.add_argument("--skip-sizing", action="store_true")
    parser.add_argument("--sizing", default="", help="comma-separated tasks to size (default: all)")
    parser.add_argument("--only", default="", help="comma-separated eval labels to run (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    state_path = args.out / "harness_bench.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}

    def save() -> None:
        state_path.write_text(json.dumps(state, indent=1))

    import torch
    import triton

    from kernelevo.tasks import builtin_names

    state["env"] = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "python": sys.version.split()[0],
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=ROOT).stdout.strip() or os.environ.get("KERNELEVO_COMMIT", "unknown"),
        "date": time.strftime("%Y-%m-%d"),
    }
    save()
    if not args.skip_sizing and "eager_do_bench" not in state:
        state["eager_do_bench"] = eager_do_bench(args.sizing.split(",") if args.sizing else builtin_names())
        save()

    runs = state.setdefault("evals", {})
    plan = [
        ("softmax-triton-1", "softmax", "tasks/examples/softmax_triton.py", []),
        ("softmax-triton-2", "softmax", "tasks/examples/softmax_triton.py", []),
        ("relu-triton", "relu", "tests/candidates/ok_relu_empty.py", ["--no-compile-baseline"]),
        ("relu-cuda", "relu", "tests/candidates/ok_cuda_relu.py", ["--no-compile-baseline"]),
        ("relu-cuda-again", "relu", "tests/candidates/ok_cuda_relu.py", ["--no-compile-baseline"]),
        ("layernorm-bad", "layernorm", "tests/candidates/bad_torch_only.py", ["--no-compile-baseline"]),
    ]
    only = set(args.only.split(",")) if args.only else None
    for label, task, cand, extra in plan:
        if label in runs or (only and label not in only):
            continue
        verdict, wall = kernelevo_eval(task, cand, args.cache, *extra)
        verdict["bench_wall_s"] = wall
        runs[label] = verdict
        save()
        keys = ("correct", "runtime_ms", "reference_runtime_ms", "compile_runtime_ms", "speedup",
                "speedup_vs_compile", "noise_pct", "harness_overhead_s", "phases", "roofline_fraction", "reason",
                "error")
        print(label, {k: verdict.get(k) for k in keys}, f"wall {wall:.1f}s", flush=True)

    ceilings = sorted((args.cache / "ceilings").glob("*.json"))
    if ceilings:
        state["ceilings"] = json.loads(ceilings[0].read_text())
    references = {}
    for path in sorted((args.cache / "references").glob("*.json")):
        data = json.loads(path.read_text())
        references[path.name.rsplit("-", 1)[0]] = {
            "eager_median_ms": data["eager"]["median_ms"] if data.get("eager") else None,
            "eager_runs": data["eager"]["runs"] if data.get("eager") else None,
            "compiled_median_ms": data["compiled"]["median_ms"] if data.get("compiled") else None,
        }
    state["harness_references"] = references
    save()
    print(json.dumps({k: v for k, v in state.items() if k != "evals"}, indent=1))


if __name__ == "__main__":
    main()
