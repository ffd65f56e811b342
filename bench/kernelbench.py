"""KernelBench levels 1-3 as a benchmark of the built-in strategist (not a test).

Four modes, results accumulated per problem in a JSON file (``--out``, default
``docs/bench/kernelbench.json``), so a sweep can stop and go on later; a problem already in the file
is skipped unless ``--redo`` (or, with ``--fill-lean``, a lean row judged again in full). A problem that
runs past its limit while others share the GPU is judged again, alone, at the end of the sweep. The modes:

- ``--mode coverage`` (any machine): does the built-in policy cover the file, unchanged (its plan, and
  the first generation the search would propose, every seed rendered), and if not,
  why. Each file is loaded and recognised in its own process, with a memory cap and a time limit: a
  file whose reference does not fit this machine at its own size says so, and never stops the sweep.
- ``--mode cpu-judge`` (any machine): for each problem the coverage sweep covers, the first seed
  rendered for the file's own size and judged by the harness under the Triton interpreter at its
  automatic small size (rendered for the small size where the full size's code holds at that size
  alone: a size read in ``forward`` became a number in a kernel): is the strategist's candidate
  correct, and if not, why. No timing.
- ``--mode gpu-seed`` (a GPU): the same first seed judged once at the file's own size, timed against
  eager and torch.compile, the forensic pass included: one verdict a problem, so a GPU sweep covers
  a level in a fraction of ``optimize``'s time. Its speedups are the first seed's, before any search.
- ``--mode optimize`` (a GPU): ``kernelevo optimize FILE --policy builtin`` with ``--max-evals``
  evaluations (``--quick``: 2), then the run's status: correct or not, the verified best's time
  against eager and against torch.compile, both timed by the harness in the same oracle process.

The summary is KernelBench's: ``fast_p`` (the share of problems that are correct and more than p
times faster) for p in 0, 1, 1.5, 2, over eager and over torch.compile, and geometric means of the
speedups over the covered problems.

Usage:
  python bench/kernelbench.py --mode coverage --levels 1,2
  python bench/kernelbench.py --mode cpu-judge --levels 1 --only conv
  python bench/kernelbench.py --mode optimize --levels 1 --quick --only 19_ReLU,23_Softmax
  python bench/kernelbench.py --mode gpu-seed --suite .gpu/kernelbench --spread --jobs 2 --stop-after 500
  python bench/kernelbench.py --mode gpu-seed --gpus 8 --jobs 16   # a machine of 8 GPUs, two problems each
  python bench/kernelbench.py --mode cpu-judge --odd --levels 1 --every 5   # at odd small sizes
  python bench/kernelbench.py --mode gpu-seed --lean --spread --jobs 4   # correctness and eager time only
  python bench/kernelbench.py --mode gpu-seed --fill-lean --jobs 3   # later: what the lean rows left out
  python bench/kernelbench.py --summary            # the table of what the file holds
  python bench/kernelbench.py --mode optimize --quick --suite .gpu/kernelbench --every 5 --stop-after 500
                                                   # a GPU call: a sample of each level, stopping in time
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernelbench_summary import past_limit, summary, table, timed_out  # noqa: E402 - a sibling script, not a package
from odd_sizes import write_odd_copy  # noqa: E402 - a sibling script, not a package

SUITE = ROOT.parent / "shared" / "kernelbench"
DEFAULT_OUT = ROOT / "docs" / "bench" / "kernelbench.json"

COVERAGE_PROBE = r"""
import json, resource, sys
cap = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    from kernelevo.agent.builtin.program import CannotCover
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.tasks import load_task
    from kernelevo.agent.builtin.policy import BuiltinPolicy
    from kernelevo.agent.policy import SearchView
    task = load_task(sys.argv[1], "full")
    plan = recognise(task)
    # the search's own first step: every seed planned, named and rendered as the policy proposes it
    policy = BuiltinPolicy()
    policy.plan = plan
    first = policy.propose(SearchView(task=task, generation=0, archive={}, entries=[], tried=set()), 64)
    print(json.dumps({"covered": True, "kind": plan.kind, "plan": plan.describe(), "proposals": len(first)}))
except CannotCover as exc:
    print(json.dumps({"covered": False, "reason": str(exc)}))
except MemoryError:
    print(json.dumps({"covered": False, "harness": True,
                      "reason": "the reference does not fit this machine's memory cap at its size"}))
except Exception as exc:
    print(json.dumps({"covered": False, "reason": f"{type(exc).__name__}: {str(exc)[:300]}", "harness": True}))
"""


def spread(count: int) -> list[int]:
    """0 .. count-1 in bit-reversed order (0, 4, 2, 6, 1, 5, 3, 7 for 8): every prefix is spread evenly
    over the range, so a sweep cut short at any point has sampled the whole level, not its start."""
    bits = max(count - 1, 0).bit_length()
    order = sorted(range(1 << bits), key=lambda k: int(format(k, f"0{bits}b")[::-1] or "0", 2))
    return [k for k in order if k < count]


def interleaved(per_level: list[list[Path]]) -> list[Path]:
    """One problem of each level in turn, while a level has any left."""
    out: list[Path] = []
    for round_ in range(max((len(files) for files in per_level), default=0)):
        out += [files[round_] for files in per_level if round_ < len(files)]
    return out


def problems(levels: list[int], only: list[str], suite: Path = SUITE, every: int = 1,
             spread_out: bool = False) -> list[Path]:
    """The suite's files of ``levels`` in KernelBench's order, those naming a part of ``only`` if given;
    ``every``: one in that many of each level's (a sample spread over it, for sweeps that cannot afford
    all of it); ``spread_out``: the levels taken in turn, each in :func:`spread` order, so that any
    prefix of the sweep is an even sample of every level."""
    def number(path: Path) -> tuple[int, str]:  # KernelBench's "12_Name.py" by its number; others after, by name
        head = path.name.split("_")[0]
        return (int(head) if head.isdigit() else 10**9, path.name)

    def in_order(level: int) -> list[Path]:
        return sorted((suite / f"level{level}").glob("*.py"), key=number)

    chosen = [[p for p in in_order(level) if not only or any(o in p.stem for o in only)] for level in levels]
    chosen = [[p for k, p in enumerate(files) if k % max(every, 1) == 0] for files in chosen]
    if spread_out:
        return interleaved([[files[k] for k in spread(len(files))] for files in chosen])
    return [p for files in chosen for p in files]


def key_of(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def coverage(path: Path, memory_gb: float, timeout_s: float) -> dict[str, Any]:
    """One file recognised in a fresh process (a memory cap and a time limit)."""
    began = time.monotonic()
    try:
        done = run_within([sys.executable, "-c", COVERAGE_PROBE, str(path), str(int(memory_gb * 2**30))], timeout_s)
    except subprocess.TimeoutExpired:
        return {"covered": False, "reason": f"recognising took over {timeout_s:.0f} s", "harness": True}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    row = json.loads(lines[-1]) if lines else {
        "covered": False, "harness": True,
        "reason": f"the probe ended with code {done.returncode}: {(done.stderr or '').strip()[-300:]}"}
    row["seconds"] = round(time.monotonic() - began, 1)
    return row


JUDGE_PROBE = r"""
import sys
from kernelevo.agent.builtin.policy import seeds
from kernelevo.agent.builtin.recognize import recognise
from kernelevo.agent.builtin.templates import render
from kernelevo.tasks import load_task
plan = recognise(load_task(sys.argv[1], "full"))
# the full size's code holds at that size alone (its sizes or its constructor's numbers): judged at the
# small size (the CPU), the small size's plan
if sys.argv[3] == "small" and (plan.sized_for or plan.numbers_there):
    plan = recognise(load_task(sys.argv[1], "small"))
strategy, params, why = seeds(plan)[0]
open(sys.argv[2], "w").write(render(plan, strategy, params, why))
print(strategy, params)
"""


TERM_GRACE_S = 30.0
"""How long a run past its limit may take to end its jobs after SIGTERM."""


def run_within(cmd: list[str], timeout_s: float, gpu: str | None = None) -> subprocess.CompletedProcess:
    """``cmd`` in a session of its own, stopped when ``timeout_s`` runs out; then ``TimeoutExpired`` as
    ``subprocess.run``. SIGTERM first: the CLI then ends the sandboxed jobs it started, which run in
    sessions of their own where a signal to its group does not reach; SIGKILL to the group after.
    ``gpu``: the one device ``cmd`` may see (``CUDA_VISIBLE_DEVICES``), None: what this process sees."""
    env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True, env=env)
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 1.0))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def judge_seed(path: Path, timeout_s: float, timed: bool, gpu: str | None = None,
               lean: bool = False, forensic: bool = True) -> dict[str, Any]:
    """The strategist's first seed rendered and judged once by ``kernelevo eval``: on this machine's
    CPU (``timed`` False: the Triton interpreter at the file's automatic small size, correctness only),
    or on a GPU at the file's own size, timed against eager and torch.compile in the oracle's process,
    the forensic pass included (``lean``: neither the forensic pass nor torch.compile's time, about half
    the seconds; correctness and the time against eager are the same; ``forensic`` False: no forensic
    pass, torch.compile's time kept). One verdict a problem: a sweep's cheapest honest measure."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        candidate = Path(scratch) / "candidate.py"
        try:
            made = run_within([sys.executable, "-c", JUDGE_PROBE, str(path), str(candidate),
                               "full" if timed else "small"], timeout_s)
        except subprocess.TimeoutExpired:
            return {"correct": False, "reason": f"rendering took over {timeout_s:.0f} s", "harness": True}
        if made.returncode != 0:
            return {"correct": False, "harness": True, "reason": f"rendering failed: {made.stderr.strip()[-300:]}"}
        cli = [sys.executable, "-m", "kernelevo.agent.cli"]
        left = timeout_s - (time.monotonic() - began)  # rendering and judging share the problem's limit
        where = [] if timed else ["--sandbox", "process"]
        if timed and (lean or not forensic):
            where += ["--no-forensic"]
        if timed and lean:
            where += ["--no-compile-baseline"]
        try:
            done = run_within([*cli, "eval", str(path), str(candidate), "--json", *where,
                               "--timeout", str(max(10, int(0.75 * left)))], left, gpu)
        except subprocess.TimeoutExpired:
            return {"correct": False, "reason": f"judging took over {timeout_s:.0f} s", "harness": True}
    try:
        verdict = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"correct": False, "harness": True, "reason": (done.stderr or done.stdout)[-300:]}
    if "error" in verdict or "correct" not in verdict:  # no verdict: the CLI's own failure, said as an error
        return {"correct": False, "harness": True, "seconds": round(time.monotonic() - began, 1),
                "reason": f"no verdict (exit {done.returncode}): {str(verdict.get('error', verdict))[:900]}"}
    row = {"correct": bool(verdict.get("correct")), "reason": verdict.get("reason"), "seed": made.stdout.strip(),
           "seconds": round(time.monotonic() - began, 1)}
    if timed:
        row.update({field: verdict.get(field) for field in TIMED_FIELDS})
    return row


TIMED_FIELDS = ("runtime_ms", "reference_runtime_ms", "compile_runtime_ms", "speedup", "speedup_vs_compile",
                "assurance", "forensic", "clock", "phases", "wall_s")
"""What a timed seed verdict keeps: its times against eager and torch.compile, the forensic pass's
figures (its kernels' traced time per call beside the timed median: the spread the pass's margin must
clear), the clock check's (the wall time its calls left unexplained beside the allowance: the room a
tighter allowance must leave), and where its seconds went."""


def optimize(path: Path, max_evals: int, timeout_s: float, gpu: str | None = None) -> dict[str, Any]:
    """The built-in policy on one file, then the verified best as the run's status reports it."""
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch) / "run"
        began = time.monotonic()
        cli = [sys.executable, "-m", "kernelevo.agent.cli"]
        try:
            done = run_within([*cli, "optimize", str(path), "--policy", "builtin", "--max-evals", str(max_evals),
                               "--run-dir", str(run_dir)], timeout_s, gpu)
        except subprocess.TimeoutExpired:
            return {"correct": False, "reason": f"the run took over {timeout_s:.0f} s", "harness": True}
        status = subprocess.run([*cli, "status", str(run_dir), "--json"], capture_output=True, text=True, cwd=ROOT)
        row: dict[str, Any] = {"exit_code": done.returncode, "seconds": round(time.monotonic() - began, 1)}
        try:
            state = json.loads(status.stdout)
        except json.JSONDecodeError:
            return {**row, "correct": False, "harness": True, "reason": (done.stderr or done.stdout)[-400:]}
        best = state.get("best") or {}
        row.update(state=state.get("state"), reason=state.get("reason"), evaluations=state.get("evaluations"),
                   correct=bool(best.get("verified")), runtime_ms=best.get("runtime_ms"),
                   speedup=best.get("speedup"), timing=best.get("timing"))
        row["speedup_vs_compile"] = _vs_compile(run_dir, best.get("candidate"))
        # where the seconds went: the judge's phases over the run's verdicts; the rest of ``seconds``
        # is the CLI's start, the task's baselines and the winner's profile
        row["judge_time"] = state.get("judge_time")
        return row


def _vs_compile(run_dir: Path, candidate: str | None) -> float | None:
    if candidate is None:
        return None
    from kernelevo.agent.store import RunStore

    store = RunStore(run_dir)
    try:
        verdict = store.evaluation(candidate, "final") or store.evaluation(candidate)
        return verdict.speedup_vs_compile if verdict else None
    finally:
        store.close()


DEFAULT_TIMEOUT_S = {"coverage": 300.0, "cpu-judge": 900.0, "gpu-seed": 900.0, "optimize": 3600.0}
MIN_PROBLEM_S = 30.0
"""With less than this left of ``--stop-after``, no problem is started."""
ALONE_LIMIT_FACTOR = 2.0
"""A problem past its limit beside others is judged again alone with this many times the limit."""


def run_one(args: argparse.Namespace, path: Path, limit: float, gpu: str | None = None) -> dict[str, Any]:
    """One problem in the sweep's mode, within ``limit`` seconds, on device ``gpu`` where one is given
    (``--odd``: on the file's copy at odd small sizes, ``odd_sizes.py``)."""
    if args.odd:
        with tempfile.TemporaryDirectory() as folder:
            copy, values = write_odd_copy(path, Path(folder))
            return {**_run_mode(args, copy, limit, gpu), "sizes": values}
    return _run_mode(args, path, limit, gpu)


def _run_mode(args: argparse.Namespace, path: Path, limit: float, gpu: str | None) -> dict[str, Any]:
    if args.mode == "coverage":
        return coverage(path, args.memory_gb, limit)
    if args.mode in ("cpu-judge", "gpu-seed"):
        row = judge_seed(path, limit, timed=args.mode == "gpu-seed", gpu=gpu, lean=args.lean,
                         forensic=not args.no_forensic)
        if args.mode == "gpu-seed" and args.lean:  # every row of a lean sweep, one cut short included
            row["lean"] = True
        elif args.mode == "gpu-seed" and args.no_forensic:
            row["no_forensic"] = True
        return row
    return optimize(path, 2 if args.quick else args.max_evals, limit, gpu)


def device_name() -> str | None:
    """The GPU's name as torch reports it (None without one), asked in a child process so that this one
    never initializes CUDA before the judges it starts."""
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name() "
                           "if torch.cuda.is_available() else '')"], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() or None


def worker_devices(gpus: int, jobs: int) -> list[str | None]:
    """The device each of ``jobs`` workers runs its problems on: with ``gpus`` above 1, worker k gets the
    k-th visible GPU modulo their number (as ``CUDA_VISIBLE_DEVICES`` names it, so a sweep started with
    some GPUs hidden keeps to the rest); else every worker sees what this process sees. Each device's
    judge lock is its own, so problems on different GPUs are timed at the same moment."""
    if gpus <= 1:
        return [None] * jobs
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else [str(k) for k in range(gpus)]
    if len(ids) < gpus:
        raise SystemExit(f"--gpus {gpus}: only {len(ids)} visible ({visible})")
    return [ids[k % gpus] for k in range(jobs)]


def sweep(args: argparse.Namespace, files: list[Path], store: dict[str, Any], section: dict[str, Any]) -> None:
    """The problems of ``files`` not yet in ``section``, ``args.jobs`` at a time, each row written to
    ``args.out`` as it finishes. No problem starts with less than ``MIN_PROBLEM_S`` left of
    ``--stop-after``; one cut short by it is not recorded, and no other starts after it. On a GPU a
    problem that ran past its limit while others shared it (a large one waits for device memory the
    others hold) is recorded as ``crowded`` and judged alone, with ``ALONE_LIMIT_FACTOR`` times the
    limit: at the end of this sweep if time is left, else first in the next one."""
    began = time.monotonic()
    wanted = [(n, p) for n, p in enumerate(files, 1) if _wanted(args, store, section, p)]
    alone = [(n, p) for n, p in wanted if section.get(key_of(p), {}).get("crowded")]
    todo = iter([item for item in wanted if item not in alone])
    guard, stopped = threading.Lock(), threading.Event()
    jobs = max(args.jobs, args.gpus, 1)
    # workers take turns on a GPU (with --gpus N each may have its own); a CPU sweep's limits are its own
    shared = jobs > max(args.gpus, 1) and args.mode in ("gpu-seed", "optimize")
    card = device_name() if args.mode in ("gpu-seed", "optimize") else None
    devices = worker_devices(args.gpus, jobs)

    def left_s() -> float | None:
        return None if args.stop_after is None else args.stop_after - (time.monotonic() - began)

    def by_itself(items: list[tuple[int, Path]]) -> None:
        for number, path in sorted(items):
            started = None if stopped.is_set() else _started(args, number, path, len(files), left_s(), stopped,
                                                             ALONE_LIMIT_FACTOR)
            if started is None:
                return
            limit, cut = started
            row = {**_row(args, path, limit, devices[0], card), "alone": True}
            if past_limit(row):  # past it even alone: the next sweep tries it alone first again
                row["crowded"] = True
            _record(args, store, section, number, len(files), path, row, cut, stopped)

    def next_problem() -> tuple[int, Path, float, bool] | None:
        with guard:
            item = None if stopped.is_set() else next(todo, None)
            started = None if item is None else _started(args, *item, len(files), left_s(), stopped)
            return None if item is None or started is None else (*item, *started)

    def work(gpu: str | None) -> None:
        while (item := next_problem()) is not None:
            number, path, limit, cut = item
            row = _row(args, path, limit, gpu, card)
            with guard:
                if shared and not cut and past_limit(row):
                    print(f"[{number}/{len(files)}] {key_of(path)}: beside other problems; judged alone later",
                          flush=True)
                    row["crowded"] = True
                    alone.append((number, path))
                _record(args, store, section, number, len(files), path, row, cut, stopped)

    by_itself(alone)  # those an earlier sweep found crowded, before the others take the GPU
    alone.clear()
    workers = [threading.Thread(target=work, args=(gpu,)) for gpu in devices]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    by_itself(alone)


def _started(args: argparse.Namespace, number: int, path: Path, count: int, left: float | None,
             stopped: threading.Event, factor: float = 1.0) -> tuple[float, bool] | None:
    """``(limit, cut by --stop-after)`` for a problem about to start, announced; None (and the sweep
    stopped) where too little of ``--stop-after`` is left."""
    limit = factor * (args.timeout or DEFAULT_TIMEOUT_S[args.mode])
    if left is not None and left < MIN_PROBLEM_S:
        print(f"stopping after {args.stop_after:.0f} s; run again to go on", flush=True)
        stopped.set()
        return None
    print(f"[{number}/{count}] {key_of(path)}: started (at most {min(limit, left or limit):.0f} s)", flush=True)
    return (limit, False) if left is None or left >= limit else (left, True)


def _row(args: argparse.Namespace, path: Path, limit: float, gpu: str | None, card: str | None) -> dict[str, Any]:
    """One problem's row: its verdict, or its harness fault (one problem's, never the sweep's end)."""
    try:
        row = run_one(args, path, limit, gpu)
    except Exception as exc:
        row = {"correct": False, "harness": True, "reason": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if card:  # a row's times hold for the card that measured them
        row["gpu"] = card
    return row


def _fills(args: argparse.Namespace, row: dict[str, Any] | None) -> bool:
    """Does this sweep judge ``row``'s problem again to fill what a lean sweep left out (``--fill-lean``)?"""
    return bool(args.fill_lean and not args.lean and row and row.get("lean") and row.get("correct"))


def _record(args: argparse.Namespace, store: dict[str, Any], section: dict[str, Any], number: int, count: int,
            path: Path, row: dict[str, Any], cut: bool, stopped: threading.Event) -> None:
    """Write ``row`` to ``args.out``, unless ``--stop-after`` cut it short (then nothing more starts)."""
    if cut and past_limit(row):
        print(f"[{number}/{count}] {key_of(path)}: cut short by --stop-after, not recorded; run again to go on",
              flush=True)
        stopped.set()
        return
    if _fills(args, section.get(key_of(path))) and (row.get("harness") or timed_out(row)):
        print(f"[{number}/{count}] {key_of(path)}: {row.get('reason')}; its lean row stays", flush=True)
        return
    section[key_of(path)] = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(store, indent=1, sort_keys=True))
    print(f"[{number}/{count}] {key_of(path)}: {json.dumps(row)[:240]}", flush=True)


def _wanted(args: argparse.Namespace, store: dict[str, Any], section: dict[str, Any], path: Path) -> bool:
    # a harness row (this bench's time limit, a broken runner) is no verdict: the next sweep tries again
    row = section.get(key_of(path))
    if row is not None and not args.redo and not row.get("harness") and not _fills(args, row):
        return False
    # cpu-judge: only what the coverage sweep says the strategist covers
    return args.mode != "cpu-judge" or bool(store.get("coverage", {}).get(key_of(path), {}).get("covered"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["coverage", "cpu-judge", "gpu-seed", "optimize"], default="coverage")
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--only", default="", help="comma-separated parts of file names")
    parser.add_argument("--quick", action="store_true", help="optimize: 2 evaluations a problem")
    parser.add_argument("--max-evals", type=int, default=8)
    parser.add_argument("--memory-gb", type=float, default=12.0, help="coverage: memory cap per probe")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per problem")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--redo", action="store_true")
    parser.add_argument("--odd", action="store_true",
                        help="coverage or cpu-judge on each file's copy at odd small sizes (masks, partial tiles), "
                             "in the section '<mode>-odd'")
    parser.add_argument("--summary", action="store_true", help="print what --out holds and stop")
    parser.add_argument("--suite", type=Path, default=SUITE, help="the folder holding level1/, level2/, level3/")
    parser.add_argument("--every", type=int, default=1, help="one problem in this many of each level")
    parser.add_argument("--spread", action="store_true",
                        help="take the levels in turn, each in an order whose every prefix is spread over the "
                             "whole level: a sweep cut short by --stop-after is an even sample, not the first files")
    parser.add_argument("--jobs", type=int, default=1,
                        help="problems at once: on a GPU their judgements take turns on it through the judge's "
                             "GPU lock, while one's process starts and compiles overlap another's GPU time")
    parser.add_argument("--gpus", type=int, default=1,
                        help="GPUs of this machine to spread the problems over (gpu-seed, optimize): each worker "
                             "keeps to one, and --jobs is at least this")
    parser.add_argument("--lean", action="store_true",
                        help="gpu-seed: skip the Nsight Compute pass and torch.compile's time (about half a "
                             "problem's seconds); correctness and the time against eager are judged the same, "
                             "and the row says lean")
    parser.add_argument("--no-forensic", action="store_true",
                        help="gpu-seed only: skip the Nsight Compute pass alone (torch.compile's time kept; the "
                             "row says no_forensic): with --fill-lean, the cheaper way to add torch.compile's time")
    parser.add_argument("--fill-lean", action="store_true",
                        help="gpu-seed without --lean: judge again the problems a lean sweep verified, to add the "
                             "forensic pass and torch.compile's time; where that run fails in the harness, the lean "
                             "row stays")
    parser.add_argument("--stop-after", type=float, default=None,
                        help="seconds the sweep may take: no problem runs past them; one cut short is not "
                             "recorded (the next sweep starts it again), and the file keeps what finished")
    args = parser.parse_args()
    store = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.odd and args.mode not in ("coverage", "cpu-judge"):
        parser.error("--odd is for --mode coverage or cpu-judge (on the CPU, at small sizes)")
    section = store.setdefault(args.mode + ("-odd" if args.odd else ""), {})
    if not args.summary:
        files = problems([int(x) for x in args.levels.split(",")], [o for o in args.only.split(",") if o],
                         args.suite, args.every, args.spread)
        sweep(args, files, store, section)
    print(table(section))
    if args.mode == "cpu-judge":  # correctness only: no times to summarise
        print(json.dumps({"judged": len(section), "correct": sum(1 for r in section.values() if r.get("correct"))}))
    else:
        levels = sorted({name.split("/")[0] for name in section})
        by_level = {level: summary({k: v for k, v in section.items() if k.split("/")[0] == level}) for level in levels}
        print(json.dumps({**summary(section), **({"by_level": by_level} if len(levels) > 1 else {})}, indent=1))


if __name__ == "__main__":
    main()
