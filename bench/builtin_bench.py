"""The built-in strategist on the built-in tasks (not a test): what docs/BENCHMARKS.md records.

For each task the built-in policy covers, one `kernelevo optimize` run with a fixed search budget
(full size, the process sandbox), then from the run's own database: eager and torch.compile times
(measured by the harness's clean reference process), the best candidate's parameters and its time
after its final re-judge with fresh seeds, its achieved bandwidth, and its fraction of the ceilings the harness
measured on this GPU in the same run (copy bandwidth; matmul peak per dtype). Optionally,
`torch.compile(mode="max-autotune")` on a few tasks, timed with triton.testing.do_bench.

Usage: python bench/builtin_bench.py --out DIR [--tasks a,b] [--max-evals N] [--autotune a,b]
Resumable: finished runs are read back; an interrupted run is resumed; results go to
DIR/builtin_bench.json after each task. Where the checkout has no .git (a copy on a GPU server),
set KERNELEVO_COMMIT to the commit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIE = 0.04
"""Ratios to torch.compile within this of 1.0 are ties: the harness's host overhead moved the ratio
by up to 4.1% against do_bench on a busy host (docs/EVALUATION.md)."""


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=3600)


def run_task(name: str, out: Path, max_evals: int, env: dict[str, str], size: str = "full") -> dict:
    """Optimise ``name`` (or resume/read back its run) and summarise it from the run's database."""
    from kernelevo.agent.store import RunStore

    run_dir = out / "runs" / name
    began = time.monotonic()
    log = out / f"{name}.log"
    if not (run_dir / "run.sqlite").exists():
        done = cli("optimize", name, "--policy", "builtin", "--max-evals", str(max_evals), "--run-dir", str(run_dir),
                   "--size", size, env=env)
        log.write_text(done.stdout + done.stderr)
    else:
        store = RunStore(run_dir)
        state = store.state()
        store.close()
        if state in ("interrupted", "running"):
            done = cli("resume", str(run_dir), env=env)
            log.write_text(log.read_text() + done.stdout + done.stderr if log.exists() else done.stdout + done.stderr)
    wall = time.monotonic() - began
    status = json.loads(cli("status", str(run_dir), "--json", env=env).stdout)
    row: dict = {"task": name, "commit": versions()["commit"], "state": status["state"],
                 "evaluations": status["evaluations"], "correct": status["correct"], "wall_s": round(wall, 1)}
    store = RunStore(run_dir)
    try:
        row["search_s"] = store.meta("elapsed_s")
        best = status.get("best")
        if best:
            final = store.evaluation(best["candidate"], "final") or store.evaluation(best["candidate"], "search")
            assert final is not None
            winner = store.candidate(best["candidate"]) or {}
            # which parameters won, and the policy's reason for proposing them
            note = _json_or_text(winner.get("note"))
            row.update(best=best["candidate"], variant=winner.get("cell"),
                       params=note.get("params") if isinstance(note, dict) else None,
                       why=note.get("why") if isinstance(note, dict) else note,
                       strategy=next(c["strategy"] for c in status["candidates"] if c["id"] == best["candidate"]),
                       best_ms=final.runtime_ms, eager_ms=final.reference_runtime_ms,
                       compile_ms=final.compile_runtime_ms, speedup=final.speedup,
                       vs_compile=final.speedup_vs_compile, gbps=final.achieved_gbps, tflops=final.achieved_tflops,
                       roofline=final.roofline_fraction, bound=final.bound, noise_pct=final.noise_pct,
                       rejudged=store.evaluation(best["candidate"], "final") is not None)
        else:
            evaluations = [store.evaluation(c["id"]) for c in status["candidates"]]
            any_verdict = next((v for v in evaluations if v is not None and v.reference_runtime_ms), None)
            if any_verdict:
                row.update(eager_ms=any_verdict.reference_runtime_ms, compile_ms=any_verdict.compile_runtime_ms)
            reasons = [v.reason for v in evaluations if v is not None and v.reason]
            row["reasons"] = reasons[:3]
    finally:
        store.close()
    return row


def _json_or_text(text: str | None) -> object:
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return text


def max_autotune(name: str) -> dict:
    """Eager, torch.compile (default) and torch.compile(mode="max-autotune") of the task's reference,
    all three timed the same way (triton.testing.do_bench, median), so their ratios compare like with
    like; the harness's own figures (rotated input sets, its own repeats) are not directly comparable."""
    import torch
    import triton

    from kernelevo.tasks import load_task
    from kernelevo.tasks.loader import instantiate

    times = {}
    with torch.no_grad():
        model, inputs = instantiate(load_task(name, "full"), "cuda", seed=1)
        for label, fn in (("eager", model), ("compile", torch.compile(model)),
                          ("max_autotune", torch.compile(model, mode="max-autotune"))):
            fn(*inputs)
            times[label] = triton.testing.do_bench(lambda fn=fn: fn(*inputs), warmup=100, rep=1000,
                                                   return_mode="median")
            torch._dynamo.reset()
    torch.cuda.empty_cache()
    return times


def ceilings(cache: Path) -> dict:
    """The ceilings the harness measured on this GPU (cached next to the reference results)."""
    for path in sorted(cache.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and "copy_gbps" in json.dumps(data):
            found = data.get("ceilings", data)
            if isinstance(found, dict) and "copy_gbps" in found:
                return found
    return {}


def versions() -> dict:
    import pydantic
    import torch
    import triton

    commit = os.environ.get("KERNELEVO_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=ROOT).stdout.strip() or "unknown"
        except OSError:
            commit = "unknown"
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return {"date": time.strftime("%Y-%m-%d"), "gpu": gpu, "commit": commit, "python": platform.python_version(),
            "torch": torch.__version__, "triton": triton.__version__, "pydantic": pydantic.VERSION}


def table(result: dict) -> str:
    lines = ["| task | strategy | evals | eager ms | torch.compile ms | best ms | vs eager | vs compile | GB/s | "
             "roofline | search s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups, wins, ties, covered = [], 0, 0, 0

    def f(x: float | None, fmt: str = "{:.3f}") -> str:
        return "" if x is None else fmt.format(x)

    for row in result["tasks"].values():
        if row.get("speedup"):  # None on the CPU: interpreter times are no speed
            covered += 1
            speedups.append(row["speedup"])
            ratio = row.get("vs_compile")
            wins += bool(ratio and ratio > 1 + TIE)
            ties += bool(ratio and abs(ratio - 1) <= TIE)
        lines.append(f"| {row['task']} | {row.get('strategy', 'none correct')} | {row['evaluations']} | "
                     f"{f(row.get('eager_ms'))} | {f(row.get('compile_ms'))} | {f(row.get('best_ms'))} | "
                     f"{f(row.get('speedup'), '{:.2f}x')} | {f(row.get('vs_compile'), '{:.2f}x')} | "
                     f"{f(row.get('gbps'), '{:.0f}')} | {f(row.get('roofline'), '{:.0%}')} | "
                     f"{f(row.get('search_s'), '{:.0f}')} |")
    if speedups:
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        lines.append(f"\nGeometric mean speedup over eager: {geo:.2f}x across {covered} tasks; faster than "
                     f"torch.compile on {wins} of {covered} by more than {TIE:.0%}, within {TIE:.0%} of it on "
                     f"{ties}.")
    for name, ms in result.get("max_autotune", {}).items():
        if isinstance(ms, dict):
            lines.append(f"- {name} (do_bench median, same method for all three): eager {ms['eager']:.3f} ms, "
                         f"torch.compile {ms['compile']:.3f} ms, max-autotune {ms['max_autotune']:.3f} ms")
        else:
            lines.append(f"- {name}: torch.compile max-autotune {ms:.3f} ms (do_bench median)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", default="")
    parser.add_argument("--max-evals", type=int, default=8)
    parser.add_argument("--autotune", default="", help="tasks to time with torch.compile max-autotune")
    parser.add_argument("--size", default="full", choices=["full", "small"], help="small: a smoke test of the script")
    args = parser.parse_args()
    from kernelevo.agent.builtin.recognize import CannotCover, recognise
    from kernelevo.tasks import builtin_names, load_task

    args.out.mkdir(parents=True, exist_ok=True)
    cache = args.out / "cache"
    env = dict(os.environ, KERNELEVO_CACHE=str(cache), PYTHONUNBUFFERED="1")
    path = args.out / "builtin_bench.json"
    result = json.loads(path.read_text()) if path.exists() else {"tasks": {}, "uncovered": {}}
    result.update(versions(), max_evals=args.max_evals)
    names = [] if args.tasks == "none" else args.tasks.split(",") if args.tasks else builtin_names()
    for name in names:
        if name in result["tasks"] and result["tasks"][name]["state"] in ("finished", "failed"):
            continue
        try:
            recognise(load_task(name, args.size))
        except CannotCover as exc:
            result["uncovered"][name] = str(exc)
            continue
        print(f"[{time.strftime('%H:%M:%S')}] {name}", flush=True)
        result["tasks"][name] = run_task(name, args.out, args.max_evals, env, args.size)
        print(json.dumps(result["tasks"][name]), flush=True)
        result["ceilings"] = ceilings(cache)
        path.write_text(json.dumps(result, indent=1))
    for name in filter(None, args.autotune.split(",")):
        result.setdefault("max_autotune", {})
        if not isinstance(result["max_autotune"].get(name), dict):
            result["max_autotune"][name] = max_autotune(name)
            path.write_text(json.dumps(result, indent=1))
    result["ceilings"] = ceilings(cache)
    path.write_text(json.dumps(result, indent=1))
    print(table(result))
    print("uncovered:", json.dumps(result["uncovered"], indent=1))


if __name__ == "__main__":
    main()
