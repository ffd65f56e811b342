"""Whole-model optimization: capture a network, find where its time goes, optimize the hottest
regions as tasks under one budget, reassemble, and verify and time the result end to end.

A model run folder holds ``model.json`` (the regions, their captured shapes, times, budgets and
results), ``regions/<name>.py`` (each region as a task) and ``regions/<name>/`` (each region's own
optimizer run, resumable like any other). Regions run as separate ``kernelevo resume`` processes,
one per GPU at a time, so that a crash or ``kill -9`` loses at most the evaluation in flight.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from pydantic import BaseModel, Field

from kernelevo.agent.budget import Budget
from kernelevo.agent.model import check as mc
from kernelevo.agent.model.runtime import (  # noqa: F401 - the runtime's names, for callers of this module
    FixedShapes,
    KernelRegion,
    ModelSpec,
    assemble,
    build,
    capture_split,
    compare,
    kernel_region,
    load_kernel_module,
    region_times,
    slower_in_context,
    tolerance,
)
from kernelevo.agent.runner import RunConfig, create, device_count
from kernelevo.agent.store import RunStore
from kernelevo.sandbox.exit_codes import EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_INTERRUPTED
from kernelevo.sandbox.isolation.process import describe_signal
from kernelevo.tasks import regions as rg

MODEL_FILE = "model.json"
MIN_EVALS = 2
"""A region gets at least this many evaluations, or none (too little to search)."""


class RegionResult(BaseModel):
    name: str
    kind: str
    nodes: list[str]
    inputs: list[str]
    output: str
    modules: list[str] = Field(default_factory=list)
    task: str | None = None
    share: float | None = None
    """Its share of the model's time, measured in context."""
    before_ms: float | None = None
    after_ms: float | None = None
    headroom: float = 1.0
    gain: float = 0.0
    evals: int = 0
    run_dir: str | None = None
    candidate: str | None = None
    state: str = "pending"
    """pending, optimized, left alone, failed."""
    reason: str | None = None


def plan_budget(results: list[RegionResult], total_evals: int) -> None:
    """Split ``total_evals`` by expected gain (share of time x headroom); regions whose share would
    fall under MIN_EVALS get none, largest gains first."""
    candidates = sorted((r for r in results if r.state == "pending"), key=lambda r: -r.gain)
    left = total_evals
    pool = [r for r in candidates if r.gain > 0]
    while pool:
        total_gain = sum(r.gain for r in pool)
        shares = {r.name: max(MIN_EVALS, round(left * r.gain / total_gain)) if total_gain else MIN_EVALS
                  for r in pool}
        if sum(shares.values()) <= left:
            break
        pool = pool[:-1]  # the smallest gain gives way
    assigned = 0
    for r in candidates:
        if r in pool and assigned + shares[r.name] <= total_evals:
            r.evals = shares[r.name]
            assigned += r.evals
        else:
            r.evals = 0
            r.state, r.reason = "left alone", "its expected gain did not earn any of the evaluation budget"


def schedule(jobs: list[str], gpus: int, run: Callable[[str, int], None]) -> None:
    """Run ``run(job, gpu)`` for every job, at most one per GPU at a time (``gpus`` workers), jobs
    taken in order. On a CPU machine ``gpus`` is 1."""
    queue = list(jobs)
    lock = threading.Lock()

    def worker(gpu: int) -> None:
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            run(job, gpu)

    threads = [threading.Thread(target=worker, args=(g,)) for g in range(max(gpus, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _region_process(run_dir: Path, gpu: int | None) -> int:
    from kernelevo.agent.runner import PARENT_ENV

    env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})  # the child stops if we are killed
    if gpu is not None:
        visible = env.get("CUDA_VISIBLE_DEVICES")
        ids = [v.strip() for v in visible.split(",")] if visible else None
        env["CUDA_VISIBLE_DEVICES"] = ids[gpu] if ids and gpu < len(ids) else str(gpu)
    done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "resume", str(run_dir)], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    (run_dir / "resume.log").write_text(done.stderr[-20000:])
    return done.returncode


class ModelRunConfig(BaseModel):
    """How a model run was asked for (stored in model.json)."""

    spec: ModelSpec
    policy: str = "builtin"
    max_evals: int = 20
    size: str = "full"
    sandbox: str = "process"
    timeout_s: float = 300.0
    memory: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_regions: int = 8
    report: bool = False
    """Keep RUN_DIR/report.html (and each region's page) up to date as the run goes."""


def _save(run_dir: Path, state: dict[str, Any]) -> None:
    tmp = run_dir / f".{MODEL_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(run_dir / MODEL_FILE)


def load_state(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / MODEL_FILE
    return json.loads(path.read_text()) if path.exists() else None


def prepare(config: ModelRunConfig, run_dir: Path, device: str, log: Callable[[str], None]) -> dict[str, Any]:
    """Capture, partition, write region tasks, time regions in context, split the budget."""
    run_dir.mkdir(parents=True, exist_ok=True)
    model, inputs = build(config.spec, device)
    gm = rg.capture(model, inputs)
    found = rg.partition(gm)
    if why := _not_reassemblable(model, config.spec, device, found):
        log(f"warning: {why}; the regions are optimized and exported all the same, but the whole network "
            "cannot be checked end to end")
    split_gm = rg.split(gm, found)
    times = region_times(split_gm, inputs, device)
    total = sum(times.values()) or 1.0
    ceilings = _ceilings(device)
    (run_dir / "regions").mkdir(exist_ok=True)
    results = []
    for index, region in enumerate(found):
        result = RegionResult(name=region.name, kind=region.kind, nodes=region.nodes, inputs=region.inputs,
                              output=region.output, modules=region.modules)
        ms = times.get(f"submod_{index}")
        result.before_ms, result.share = ms, (ms or 0.0) / total
        if not region.supported:
            result.state, result.reason = "left alone", region.reason
        else:
            path = run_dir / "regions" / f"{region.name}.py"
            path.write_text(rg.region_task_source(gm, region))
            result.task = str(path)
            result.headroom = _headroom(rg.region_graph_module(gm, region), region, gm, ms, ceilings)
            result.gain = result.share * result.headroom
            if config.policy == "builtin":
                why = _builtin_cannot(path, config.size)
                if why:
                    result.state, result.reason = "left alone", f"the built-in policy cannot cover it: {why}"
                    result.gain = 0.0
        results.append(result)
    ranked = sorted((r for r in results if r.state == "pending"), key=lambda r: -r.gain)
    for r in ranked[config.max_regions:]:
        r.state, r.reason = "left alone", f"not among the {config.max_regions} regions with the most to gain"
    plan_budget(results, config.max_evals)
    gaps = {name: ms for name, ms in times.items() if int(name.split("_")[1]) >= len(found)}
    state = {"config": config.model_dump(mode="json"), "device": device, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
             "total_ms": total, "between_regions_ms": sum(gaps.values()),
             "regions": [r.model_dump(mode="json") for r in results], "state": "prepared", "end_to_end": None}
    _save(run_dir, state)
    log(f"captured {len(found)} regions ({sum(1 for r in results if r.state == 'pending')} to optimize); "
        f"model time {total:.4g} ms in context")
    return state


def _not_reassemblable(model: nn.Module, spec: ModelSpec, device: str, found: list[rg.Region]) -> str | None:
    """Why the end-to-end candidate will not build (it records the graph again on shapes alone), or
    None: said now rather than after the regions' search."""
    from kernelevo.agent.model.runtime import shape_inputs

    try:
        mode, inputs = shape_inputs(spec, device)
        again = rg.partition(rg.capture(model, inputs, mode))
    except Exception as exc:  # whatever tracing on fake tensors raises, as the candidate would
        return f"the network's graph cannot be recorded on shapes alone ({type(exc).__name__}: {str(exc)[:200]})"
    if [r.nodes for r in again] != [r.nodes for r in found]:
        return "the network's graph recorded on shapes alone partitions differently from the one run on data"
    return None


def _ceilings(device: str) -> Any:
    if device != "cuda":
        return None
    from kernelevo.sandbox.judge import cache
    from kernelevo.sandbox.judge.evaluate import Evaluator
    from kernelevo.sandbox.models import Ceilings

    with Evaluator() as evaluator:
        return cache.load(evaluator.ceilings_path(), Ceilings)


def _headroom(sub: nn.Module, region: rg.Region, gm: torch.fx.GraphModule, ms: float | None, ceilings: Any) -> float:
    """1 - floor/time against the roofline where the GPU's ceilings are known; 1.0 otherwise."""
    if ceilings is None or not ms:
        return 1.0
    from kernelevo.sandbox.judge.ceilings import speed_of_light_ms
    from kernelevo.sandbox.judge.workload import count_bytes, count_flops

    by_name = {n.name: n for n in gm.graph.nodes}
    metas = [by_name[i].meta["tensor_meta"] for i in region.inputs]
    device = next((p.device for p in sub.parameters()), torch.device("cuda"))
    args = [torch.randn(tuple(m.shape), device=device).to(m.dtype) if m.dtype.is_floating_point
            else torch.zeros(tuple(m.shape), device=device, dtype=m.dtype) for m in metas]
    with torch.no_grad():
        out = sub(*args)
    dtype = str(metas[0].dtype).removeprefix("torch.") if metas else "float32"
    floor, _ = speed_of_light_ms(count_flops(sub, args), count_bytes(sub, args, out), ceilings, dtype)
    return max(0.05, 1.0 - floor / ms)


def _builtin_cannot(path: Path, size: str) -> str | None:
    from kernelevo.agent.builtin.recognize import CannotCover, recognise
    from kernelevo.tasks import load_task

    try:
        recognise(load_task(str(path), size))  # type: ignore[arg-type]
    except CannotCover as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def optimize_regions(config: ModelRunConfig, run_dir: Path, state: dict[str, Any], log: Callable[[str], None],
                     gpus: int) -> None:
    """Create (or reuse) one optimizer run per region with a budget and run them, one per GPU."""
    jobs = []
    for r in state["regions"]:
        if r["state"] not in ("pending", "interrupted") or not r["evals"]:
            continue
        region_dir = run_dir / "regions" / r["name"]
        if not (region_dir / "run.sqlite").exists():
            # Regions are judged against eager; torch.compile is timed once, on the whole model, in
            # the end-to-end check (compiling every region took a good share of a model run's time).
            create(RunConfig(task=r["task"], size=config.size, policy=config.policy,
                             budget=Budget(max_evals=r["evals"]), timeout_s=config.timeout_s, memory=config.memory,
                             model=config.model, base_url=config.base_url, api_key_env=config.api_key_env,
                             sandbox=config.sandbox, report=config.report, measure_compile=False),
                   region_dir).close()
        r["run_dir"] = str(region_dir)
        jobs.append(r["name"])
    _save(run_dir, state)
    by_name = {r["name"]: r for r in state["regions"]}
    lock = threading.Lock()

    def run(name: str, gpu: int) -> None:
        log(f"region {name}: optimizing ({by_name[name]['evals']} evaluations, GPU {gpu})")
        code = _region_process(Path(by_name[name]["run_dir"]), gpu if gpus > 0 else None)
        outcome = region_outcome(Path(by_name[name]["run_dir"]), code)
        with lock:
            r = by_name[name]
            r["state"], r["candidate"], r["reason"] = outcome
            r["exit_code"] = code
            _save(run_dir, state)
            if config.report:
                _refresh_report(run_dir, log)
        log(f"region {name}: {by_name[name]['state']}" + (f" ({by_name[name]['reason']})" if by_name[name]["reason"]
                                                           else ""))

    schedule(jobs, max(gpus, 1), run)


def finish(config: ModelRunConfig, run_dir: Path, state: dict[str, Any], device: str,
           log: Callable[[str], None], in_context: bool | None = None) -> dict[str, Any]:
    """Reassemble with every optimized region and judge the whole network end to end
    (``check.py``): on a GPU (or when ``in_context`` asks), kernels that do not win in the
    network are left out first."""
    from kernelevo.sandbox.isolation.choose import make_sandbox
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    sandbox, _ = make_sandbox(config.sandbox)
    work = run_dir / "work" / f"{int(time.time())}-e2e"
    with Evaluator(EvalConfig(timeout_s=config.timeout_s * 4, memory=config.memory, workdir=work,
                              measure_compile=device == "cuda"), sandbox=sandbox) as evaluator:
        files = work / "model"
        spec = mc.local_spec(config.spec, files)
        regions = [r["nodes"] for r in state["regions"]]
        kernels = {str(index): [(Path(r["run_dir"]) / "candidates" / f"{r['candidate']}.py").read_text(),
                                f"{r['name']}_{r['candidate'][:10]}"]
                   for index, r in enumerate(state["regions"]) if r["state"] == "optimized" and r["candidate"]}
        advice: dict[str, Any] = {}
        if kernels and (device == "cuda" if in_context is None else in_context):
            advice = mc.arbitrate(evaluator, spec, regions, kernels, files, config.timeout_s * 4)
            if advice.get("error"):
                log(f"warning: {advice['error']}; every kernel is kept")
        reverted = advice.get("reverted") or {}
        kept = {k: v for k, v in kernels.items() if k not in reverted}
        dtype = state.get("dtype") or config.spec.dtype
        result = _judge_kept(evaluator, spec, regions, kept, files, dtype)
        if result.get("wrong_output"):
            exact, choice = mc.exact_choices(state["regions"], kept)
            if exact != kept:
                log(f"end to end: the network's outputs disagree ({result['reason'][:160]}); judging it again with "
                    "each region's fastest kernel as exact as eager, or its original code")
                first = result
                result = _judge_kept(evaluator, spec, regions, exact, files, dtype)
                result["first_attempt"] = {"reason": first["reason"], "max_abs_error": first.get("max_abs_error")}
                if result.get("correct"):  # the choices stand only where the network was verified with them
                    kept = exact
                    _apply_exact(state, choice, first["reason"], log)
                else:
                    result["exact_choices"] = choice
        result["regions_replaced"] = len(kept) if result.get("correct") else 0
        if reverted:
            result["reverted"] = reverted
        result["after"] = advice.get("after")
    _apply_reverted(state, reverted, result, log)
    state["end_to_end"] = result
    state["state"] = "finished"
    _save(run_dir, state)
    _log_result(result, log)
    return state


def _judge_kept(evaluator: Any, spec: ModelSpec, regions: list[list[str]], kept: dict[str, list[str]],
                folder: Path, dtype: str | None) -> dict[str, Any]:
    if not kept:
        return {"correct": True, "reason": None, "timing": None,
                "note": "no kernel is left in the network: it runs as it was"}
    task_path, candidate = mc.write_files(spec, regions, kept, folder, dtype)
    return mc.judge_network(evaluator, task_path, candidate, folder, kept)


def _apply_exact(state: dict[str, Any], choice: dict[str, str | None], why: str, log: Callable[[str], None]) -> None:
    """Record the second attempt's choices: a region whose kernel changed, or that lost it."""
    for index, candidate in choice.items():
        r = state["regions"][int(index)]
        if candidate == r["candidate"]:
            continue
        before = r["candidate"]
        if candidate is None:
            r.update(state="left alone", reverted_candidate=before, candidate=None,
                     reason=f"its kernel ({before[:10]}) was right alone, but with it the network's outputs disagreed "
                            f"({why[:160]}); none of its kernels is as exact as eager")
            log(f"region {r['name']}: left alone ({r['reason']})")
        else:
            r.update(candidate=candidate, replaced_candidate=before)
            log(f"region {r['name']}: kernel {before[:10]} replaced by {candidate[:10]}, as exact as eager")


def _apply_reverted(state: dict[str, Any], reverted: dict[str, Any], result: dict[str, Any],
                    log: Callable[[str], None]) -> None:
    for index, r in enumerate(state["regions"]):
        r["after_ms"] = (result.get("after") or {}).get(f"submod_{index}")
        if str(index) in reverted:
            times = reverted[str(index)]
            r.update(state="left alone", reverted_candidate=r["candidate"], candidate=None,
                     reason=f"its kernel ({r['candidate'][:10]}) won alone but not in the network: "
                            f"{times['kernel_ms']:.3g} ms there against {times['original_ms']:.3g} ms for the original")
            log(f"region {r['name']}: left alone ({r['reason']})")


def _log_result(result: dict[str, Any], log: Callable[[str], None]) -> None:
    error = result.get("max_abs_error")
    if result.get("correct") and result.get("speedup"):
        log(f"end to end: {result['optimized_ms']:.4g} ms vs eager {result['eager_ms']:.4g} ms "
            f"({result['speedup']:.2f}x), max error {error:.3g}")
    elif result.get("correct") and result.get("timing"):
        log(f"end to end: matches the original (max error {error:.3g}, {result['regions_replaced']} regions "
            "replaced, judged like any candidate); CPU interpreter: no speedup measured")
    elif result.get("correct"):
        log(f"end to end: {result.get('note')}")
    else:
        log(f"end to end: FAILED: {result.get('reason')}")


def region_outcome(region_dir: Path, exit_code: int | None = None) -> tuple[str, str | None, str | None]:
    """A finished region run as (state, candidate, reason). A best kernel that the harness timed
    slower than eager on the GPU (its re-judged speedup below 1) is not used: the region keeps its
    original code, and the reason says by how much the kernel lost."""
    store = RunStore(region_dir)
    try:
        best, run_state, reason = store.meta("best"), store.state(), store.meta("state_reason")
        if best:
            verdict = store.evaluation(best["id"], "final") or store.evaluation(best["id"])
            speedup = verdict.speedup if verdict is not None and verdict.timing == "cuda-events" else None
            if speedup is not None and speedup < 1.0:
                return ("left alone", None, f"its best kernel ({best['id'][:10]}) ran {speedup:.2f}x of eager's speed "
                        "when re-judged: the original stays")
            return "optimized", best["id"], None
        if run_state in ("interrupted", "running"):
            return "interrupted", None, reason or _died(region_dir, exit_code)
        return "failed", None, reason or "no correct candidate"
    finally:
        store.close()


def _died(region_dir: Path, exit_code: int | None) -> str:
    """How a region's process ended without a word in its store: its exit code (or signal), and the
    last line it wrote, if any (often the error; it may be only the last thing it said)."""
    try:
        lines = [line for line in (region_dir / "resume.log").read_text(errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        lines = []
    how = f"exit code {exit_code}"
    if exit_code is not None and exit_code < 0:
        how = f"killed by {describe_signal(-exit_code)}"
    said = f"; its last line was: {lines[-1].strip()[:300]} (its log: {region_dir / 'resume.log'})" if lines else ""
    return f"{how}{said}"


def _refresh_report(run_dir: Path, log: Callable[[str], None]) -> None:
    from kernelevo.agent.report.html import write_model_report

    try:
        write_model_report(run_dir)
    except Exception as exc:  # a view of the run: never let it stop the run
        log(f"warning: the report could not be written: {type(exc).__name__}: {exc}")


def stopped_exit_code(regions: list[dict[str, Any]]) -> int:
    """A model run's exit code while regions are interrupted: a region stopped by kernelevo's own error
    (5) or by the machine (3) says so; else the run was interrupted (4)."""
    codes = {r.get("exit_code") for r in regions if r["state"] == "interrupted"}
    return next((c for c in (EXIT_INTERNAL, EXIT_ENVIRONMENT) if c in codes), EXIT_INTERRUPTED)


def optimize_model(config: ModelRunConfig, run_dir: Path, log: Callable[[str], None]) -> int:
    """The whole run (or its continuation: prepared regions and finished region runs are reused). The
    end-to-end check needs the machine: where it cannot judge (exit 3), the run is left to resume."""
    from kernelevo.sandbox.judge.evaluate import EvalError, detect_device

    device = detect_device()
    state = load_state(run_dir)
    if state is None:
        state = prepare(config, run_dir, device, log)
    if config.report:
        _refresh_report(run_dir, log)
    optimize_regions(config, run_dir, state, log, device_count() if device == "cuda" else 0)
    if any(r["state"] == "interrupted" for r in state["regions"]):
        log(f"interrupted: continue with `kernelevo resume {run_dir}`")
        return stopped_exit_code(state["regions"])
    try:
        state = finish(config, run_dir, state, device, log)
    except EvalError as exc:
        if exc.exit_code != EXIT_ENVIRONMENT:
            raise
        log(f"interrupted: {exc}\nonce that is fixed, continue with `kernelevo resume {run_dir}`")
        return EXIT_ENVIRONMENT
    if config.report:
        _refresh_report(run_dir, log)
        log(f"report: {run_dir / 'report.html'}")
    return 0 if state["end_to_end"]["correct"] else 1

