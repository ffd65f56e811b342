"""Whole-model optimization: capture a network, find where its time goes, optimize the hottest
regions as tasks under one budget, reassemble, and verify and time the result end to end.

A model run folder holds ``model.json`` (the regions, their captured shapes, times, budgets and
results), ``regions/<name>.py`` (each region as a task) and ``regions/<name>/`` (each region's own
optimizer run, resumable like any other). Regions run as separate ``kernelevo resume`` processes,
one per GPU at a time, so that a crash or ``kill -9`` loses at most the evaluation in flight.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn as nn
from pydantic import BaseModel, Field

from kernelevo.agent.budget import Budget
from kernelevo.agent.runner import RunConfig, create, device_count
from kernelevo.agent.store import RunStore
from kernelevo.tasks import regions as rg
from kernelevo.tasks.loader import import_task_module

MODEL_FILE = "model.json"
MIN_EVALS = 2
"""A region gets at least this many evaluations, or none (too little to search)."""


class ModelSpec(BaseModel):
    """What to optimize and how to build it: a KernelBench-format file, or a class/factory in a file
    with input (and constructor-argument) functions."""

    path: str
    attr: str = "Model"
    inputs: str | None = None
    """``file.py:function`` returning the example inputs (a list), for ``file.py:Class`` models."""
    init: str | None = None
    """``file.py:function`` returning the constructor's arguments (a list)."""
    dtype: str | None = None
    size: Literal["full", "small"] = "full"
    """For a KernelBench file: ``small`` applies its ``SMALL`` overrides (DTYPE included), as for tasks."""


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


def _load_attr(spec: str, default_attr: str | None = None) -> tuple[Any, Path]:
    path_text, _, attr = spec.partition(":")
    path = Path(path_text)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    module_spec = importlib.util.spec_from_file_location(f"kernelevo_model_{abs(hash(path))}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    name = attr or default_attr
    if name is None:
        return module, path
    if not hasattr(module, name):
        raise AttributeError(f"{path} defines no {name}")
    return getattr(module, name), path


def build(spec: ModelSpec, device: str = "cpu", seed: int = 0) -> tuple[nn.Module, list[Any]]:
    """The model (eval mode, on ``device``) and one set of example inputs."""
    torch.manual_seed(seed)
    if spec.inputs is None:  # a KernelBench file: Model, get_inputs, get_init_inputs, maybe SMALL
        if not Path(spec.path).is_file():
            raise FileNotFoundError(f"no such file: {spec.path}")
        module = import_task_module(Path(spec.path), spec.size)
        factory, make_inputs = getattr(module, spec.attr), module.get_inputs
        init_args = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
    else:
        factory, _ = _load_attr(f"{spec.path}:{spec.attr}")
        make_inputs, _ = _load_attr(spec.inputs)
        init_args = list(_load_attr(spec.init)[0]()) if spec.init else []
    with torch.device(device):
        model = factory(*init_args)
        inputs = list(make_inputs())
    model = model.to(device).eval()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    dtype_name = spec.dtype
    if dtype_name is None and spec.inputs is None:
        declared = getattr(module, "DTYPE", None)  # a KernelBench file may declare its dtype
        dtype_name = str(declared).removeprefix("torch.") if declared is not None else None
    if dtype_name:
        dtype = getattr(torch, dtype_name)
        model = model.to(dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    return model, inputs


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def region_times(split_gm: torch.fx.GraphModule, inputs: list[Any], device: str, repeats: int = 5) -> dict[str, float]:
    """Milliseconds per call of each ``submod_<i>`` of the split network, measured in context (one
    forward of the whole network, each piece timed where it runs; median of ``repeats``)."""
    samples: dict[str, list[float]] = {}
    originals = {}
    for name, child in split_gm.named_children():
        originals[name] = child.forward

        def timed(*args: Any, _f: Callable = child.forward, _n: str = name, **kwargs: Any) -> Any:
            _sync(device)
            began = time.perf_counter()
            out = _f(*args, **kwargs)
            _sync(device)
            samples.setdefault(_n, []).append((time.perf_counter() - began) * 1e3)
            return out

        child.forward = timed  # type: ignore[method-assign]
    try:
        with torch.no_grad():
            split_gm(*inputs)  # warm-up
            samples.clear()
            for _ in range(repeats):
                split_gm(*inputs)
    finally:
        for name, child in split_gm.named_children():
            child.forward = originals[name]  # type: ignore[method-assign]
    return {name: sorted(v)[len(v) // 2] for name, v in samples.items()}


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


class KernelRegion(nn.Module):
    """A region replaced by a verified kernel module; the original runs instead whenever the inputs'
    shapes or dtypes differ from those the kernel was verified on."""

    def __init__(self, kernel: nn.Module, original: nn.Module, order: list[int],
                 signature: list[tuple[tuple[int, ...], str]]) -> None:
        super().__init__()
        self.kernel, self.original, self.order, self.signature = kernel, original, order, signature
        self.enabled = True
        """False: the original runs (the end-to-end check times the region both ways in context)."""

    def matches(self, args: tuple[Any, ...]) -> bool:
        return all(isinstance(a, torch.Tensor) and tuple(a.shape) == shape and str(a.dtype) == dtype
                   for a, (shape, dtype) in zip((args[i] for i in self.order), self.signature, strict=True))

    def forward(self, *args: Any) -> Any:
        if not self.enabled or not self.matches(args):
            return self.original(*args)
        return self.kernel(*[args[i].contiguous() for i in self.order])


def load_kernel_module(source: str, name: str) -> types.ModuleType:
    """A candidate's source as a module (written to a file: Triton's JIT reads kernel source from it),
    under ``KERNELEVO_KERNEL_DIR`` (default: ~/.cache/kernelevo/kernels)."""
    folder = Path(os.environ.get("KERNELEVO_KERNEL_DIR") or Path.home() / ".cache" / "kernelevo" / "kernels")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"kernelevo_kernel_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def kernel_region(gm: torch.fx.GraphModule, region: rg.Region, split_child: torch.fx.GraphModule,
                  source: str, name: str) -> KernelRegion:
    """Wrap ``split_child`` (the region's piece of the split network) with the kernel from ``source``,
    its parameters copied from the original network."""
    module = load_kernel_module(source, name)
    original = rg.region_graph_module(gm, region)
    kernel = module.ModelNew()
    _, unexpected = kernel.load_state_dict(original.state_dict(), strict=False)
    if unexpected:
        raise ValueError(f"the kernel module does not hold the region's parameters {unexpected[:3]}")
    first = next(iter(original.parameters()), None)
    if first is not None:
        kernel = kernel.to(first.device, first.dtype)
    kernel.eval()
    placeholders = [n.name for n in split_child.graph.nodes if n.op == "placeholder"]
    order = [placeholders.index(name) for name in region.inputs]
    by_name = {n.name: n for n in gm.graph.nodes}
    signature = [(tuple(by_name[i].meta["tensor_meta"].shape), str(by_name[i].meta["tensor_meta"].dtype))
                 for i in region.inputs]
    return KernelRegion(kernel, split_child, order, signature)


def capture_split(model: nn.Module, inputs: list[Any], region_nodes: list[list[str]]
                  ) -> tuple[torch.fx.GraphModule, list[rg.Region], torch.fx.GraphModule]:
    """Capture and partition ``model`` again and split it into its regions: (graph, regions, split);
    ValueError if it no longer partitions into ``region_nodes`` (the regions it was optimized as)."""
    gm = rg.capture(model, inputs)
    found = rg.partition(gm)
    if [r.nodes for r in found] != region_nodes:
        raise ValueError("the model's graph no longer partitions as it did when it was optimized")
    return gm, found, rg.split(gm, found)


def assemble(model: nn.Module, inputs: list[Any], region_nodes: list[list[str]],
             kernels: dict[int, tuple[str, str]]) -> torch.fx.GraphModule:
    """The network with region ``i`` replaced by ``kernels[i] = (source, name)``."""
    gm, found, split_gm = capture_split(model, inputs, region_nodes)
    for index, (source, name) in kernels.items():
        child = getattr(split_gm, f"submod_{index}")
        setattr(split_gm, f"submod_{index}", kernel_region(gm, found[index], child, source, name))
    return split_gm


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """Model-level tolerance (atol, rtol): errors add up across regions."""
    if dtype in (torch.bfloat16, torch.float16):
        return 5e-2, 5e-2
    return 1e-3, 1e-3


def compare(a: Any, b: Any) -> tuple[bool, float]:
    """(within tolerance, max abs error) of two outputs."""
    if isinstance(a, (list, tuple)):
        pairs = [compare(x, y) for x, y in zip(a, b, strict=True)]
        return all(p[0] for p in pairs), max((p[1] for p in pairs), default=0.0)
    atol, rtol = tolerance(a.dtype)
    diff = (a.float() - b.float()).abs()
    ok = bool(torch.isfinite(b).all()) and bool((diff <= atol + rtol * a.float().abs()).all())
    return ok, float(diff.max()) if diff.numel() else 0.0


def time_call(fn: Callable[[], Any], device: str, repeats: int = 20) -> float:
    """Median milliseconds of ``fn()``: CUDA events (``triton.testing.do_bench``) on a GPU, the host
    clock on the CPU (where interpreter times rank nothing anyway)."""
    with torch.no_grad():
        if device == "cuda":
            import triton

            return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))
        fn()
        _sync(device)
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            fn()
            _sync(device)
            times.append((time.perf_counter() - began) * 1e3)
    return sorted(times)[len(times) // 2]


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
            _save(run_dir, state)
            if config.report:
                _refresh_report(run_dir, log)
        log(f"region {name}: {by_name[name]['state']}" + (f" ({by_name[name]['reason']})" if by_name[name]["reason"]
                                                           else ""))

    schedule(jobs, max(gpus, 1), run)


def slower_in_context(with_kernel: dict[str, float], without: dict[str, float], replaced: list[int]
                      ) -> dict[int, tuple[float, float]]:
    """Replaced regions whose piece of the network did not get faster in context: {index: (ms with
    the kernel, ms with the original)}. Keeping the original is the safe default, so a tie reverts."""
    slower = {}
    for index in replaced:
        kernel_ms, original_ms = with_kernel.get(f"submod_{index}"), without.get(f"submod_{index}")
        if kernel_ms is not None and original_ms is not None and kernel_ms >= original_ms:
            slower[index] = (kernel_ms, original_ms)
    return slower


def _arbitrate(assembled: torch.fx.GraphModule, fresh: list[Any], device: str, replaced: list[int]
               ) -> tuple[dict[int, tuple[float, float]], dict[str, float]]:
    """Time every replaced region in context with its kernel and with its original code (same
    process, same inputs, interleaved), switch off the kernels that did not win: (those, the time
    of every piece as the network now runs)."""
    regions = {i: getattr(assembled, f"submod_{i}") for i in replaced}
    with_kernel: dict[str, list[float]] = {}
    without: dict[str, list[float]] = {}
    for _ in range(3):  # interleaved rounds, so that a drift in clocks hits both sides alike
        for enabled, into in ((True, with_kernel), (False, without)):
            for region in regions.values():
                region.enabled = enabled
            for name, ms in region_times(assembled, fresh, device, repeats=7).items():
                into.setdefault(name, []).append(ms)
    for region in regions.values():
        region.enabled = True
    kernel_ms = {k: sorted(v)[len(v) // 2] for k, v in with_kernel.items()}
    original_ms = {k: sorted(v)[len(v) // 2] for k, v in without.items()}
    slower = slower_in_context(kernel_ms, original_ms, replaced)
    for index in slower:
        regions[index].enabled = False
    after = {k: original_ms[k] if k in {f"submod_{i}" for i in slower} else ms for k, ms in kernel_ms.items()}
    return slower, after


def check_end_to_end(spec: ModelSpec, found_nodes: list[list[str]], kernels: dict[int, tuple[str, str]],
                     device: str, in_context: bool | None = None) -> dict[str, Any]:
    """Reassemble with ``kernels``, compare with the original on fresh inputs, time both (and
    torch.compile of the original on a GPU). Runs kernel code: call it in the sandbox (``finish``).

    With ``in_context`` (the default on a GPU), each replaced region is also timed in the network
    with and without its kernel, and a kernel that does not make its piece faster there is left out
    (``reverted``): a region can win alone, on a cold cache, and lose in the network, where its
    inputs are still in L2 and launch overheads count.
    """
    model, inputs = build(spec, device, seed=0)
    assembled = assemble(model, inputs, found_nodes, kernels)
    _, fresh = build(spec, device, seed=1234)
    with torch.no_grad():
        expected, got = model(*fresh), assembled(*fresh)
    ok, error = compare(expected, got)
    result: dict[str, Any] = {"correct": ok, "max_abs_error": error, "regions_replaced": len(kernels),
                              "timing": "cuda-events" if device == "cuda" else "cpu-interpreter"}
    if not ok:
        result["after"] = region_times(assembled, fresh, device)
        result["reason"] = (f"the reassembled model differs from the original by up to {error:.3g}: the kernels "
                            "are left out of the export")
        return result
    after = None
    if (device == "cuda" if in_context is None else in_context) and kernels:
        slower, after = _arbitrate(assembled, fresh, device, sorted(kernels))
        if slower:
            result["reverted"] = {str(i): {"kernel_ms": k, "original_ms": o} for i, (k, o) in slower.items()}
            result["regions_replaced"] = len(kernels) - len(slower)
            with torch.no_grad():
                ok, error = compare(expected, assembled(*fresh))
            result.update(correct=ok, max_abs_error=error)
            if not ok:  # cannot happen unless kernels interact; say so rather than export
                result["reason"] = f"without the reverted kernels the model differs by up to {error:.3g}"
                return result
    result["after"] = after or region_times(assembled, fresh, device)
    result["eager_ms"] = time_call(lambda: model(*fresh), device)
    result["optimized_ms"] = time_call(lambda: assembled(*fresh), device)
    if device == "cuda":
        result["speedup"] = result["eager_ms"] / result["optimized_ms"]
        if result["speedup"] < 1:
            result["note"] = "slower than eager: `kernelevo export` writes no kernels for it unless --keep-slower"
        try:
            compiled = torch.compile(model)
            result["compile_ms"] = time_call(lambda: compiled(*fresh), device)
            result["vs_compile"] = result["compile_ms"] / result["optimized_ms"]
        except Exception as exc:
            result["compile_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return result


def finish(config: ModelRunConfig, run_dir: Path, state: dict[str, Any], device: str,
           log: Callable[[str], None], in_context: bool | None = None) -> dict[str, Any]:
    """Reassemble with every optimized region and check it end to end, in the sandbox (the kernels
    are model-written code): a job folder with copies of the model's files and the kernels' sources."""
    import shutil

    from kernelevo.sandbox.isolation.choose import make_sandbox
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    sandbox, _ = make_sandbox(config.sandbox)
    with Evaluator(EvalConfig(timeout_s=config.timeout_s, memory=config.memory,
                              workdir=run_dir / "work" / f"{int(time.time())}-e2e"), sandbox=sandbox) as evaluator:
        job_dir = evaluator.workspace / "jobs" / "end-to-end"
        (job_dir / "kernels").mkdir(parents=True, exist_ok=True)
        spec = config.spec.model_copy()
        for field_name in ("path", "inputs", "init"):
            value = getattr(spec, field_name)
            if value:
                file_text, _, attr = value.partition(":")
                copy = job_dir / f"{field_name}_{Path(file_text).name}"
                shutil.copyfile(file_text, copy)
                setattr(spec, field_name, f"{copy}:{attr}" if attr else str(copy))
        kernels = {}
        for index, r in enumerate(state["regions"]):
            if r["state"] == "optimized" and r["candidate"]:
                source = (Path(r["run_dir"]) / "candidates" / f"{r['candidate']}.py").read_text()
                kernels[str(index)] = [source, f"{r['name']}_{r['candidate'][:10]}"]
        job = {"spec": spec.model_dump(mode="json"), "regions": [r["nodes"] for r in state["regions"]],
               "kernels": kernels, "device": device, "result": str(job_dir / "e2e.json"), "in_context": in_context}
        (job_dir / "job.json").write_text(json.dumps(job))
        run_spec = evaluator.side_spec(
            [sys.executable, "-m", "kernelevo.agent.model_run", str(job_dir / "job.json")], job_dir,
            job_dir / "e2e.json", config.timeout_s * 4, gpu=True)
        run_spec.env["KERNELEVO_KERNEL_DIR"] = str(job_dir / "kernels")
        outcome = evaluator.sandbox.run(run_spec)
        if outcome.payload is not None:
            result = json.loads(outcome.payload)
        elif (job_dir / "e2e.json").exists():
            result = {"correct": False, "reason": f"the end-to-end result cannot be trusted: {outcome.result_problem}"}
        else:
            result = {"correct": False, "reason": "the end-to-end check did not finish: "
                      + (outcome.log_tail[-600:] or f"exit code {outcome.returncode}")}
    reverted = result.get("reverted") or {}
    for index, r in enumerate(state["regions"]):
        r["after_ms"] = (result.get("after") or {}).get(f"submod_{index}")
        if str(index) in reverted:
            times = reverted[str(index)]
            r.update(state="left alone", reverted_candidate=r["candidate"], candidate=None,
                     reason=f"its kernel ({r['candidate'][:10]}) won alone but not in the network: "
                            f"{times['kernel_ms']:.3g} ms there against {times['original_ms']:.3g} ms for the original")
            log(f"region {r['name']}: left alone ({r['reason']})")
    state["end_to_end"] = result
    state["state"] = "finished"
    _save(run_dir, state)
    error = result.get("max_abs_error")
    if result.get("correct") and result.get("speedup"):
        log(f"end to end: {result['optimized_ms']:.4g} ms vs eager {result['eager_ms']:.4g} ms "
            f"({result['speedup']:.2f}x), max error {error:.3g}")
    elif result.get("correct"):
        log(f"end to end: matches the original (max error {error:.3g}, {result['regions_replaced']} regions "
            "replaced); CPU interpreter: no speedup measured")
    else:
        log(f"end to end: FAILED: {result.get('reason')}")
    return state


def main(argv: list[str] | None = None) -> int:
    """The sandboxed end-to-end check: ``python -m kernelevo.agent.model_run job.json``."""
    import traceback

    argv = sys.argv[1:] if argv is None else argv
    from kernelevo.sandbox.isolation.protocol import receive_key_and_go, signed_writer

    # The key, and what signs with it, before any kernel module is imported ("go": the GPU's lock
    # is held for us): the result is signed as the harness signs its own.
    write_signed = signed_writer(receive_key_and_go())
    job = json.loads(Path(argv[0]).read_text())
    try:
        kernels = {int(k): (v[0], v[1]) for k, v in job["kernels"].items()}
        result = check_end_to_end(ModelSpec.model_validate(job["spec"]), job["regions"], kernels, job["device"],
                                  job.get("in_context"))
    except Exception as exc:
        result = {"correct": False, "reason": f"the end-to-end check failed: {type(exc).__name__}: {exc}",
                  "trace": traceback.format_exc()[-2000:]}
    write_signed(Path(job["result"]), json.dumps(result))
    return 0


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
            return "interrupted", None, reason or f"exit code {exit_code}"
        return "failed", None, reason or "no correct candidate"
    finally:
        store.close()


def _refresh_report(run_dir: Path, log: Callable[[str], None]) -> None:
    from kernelevo.agent.html_report import write_model_report

    try:
        write_model_report(run_dir)
    except Exception as exc:  # a view of the run: never let it stop the run
        log(f"warning: the report could not be written: {type(exc).__name__}: {exc}")


def optimize_model(config: ModelRunConfig, run_dir: Path, log: Callable[[str], None]) -> int:
    """The whole run (or its continuation: prepared regions and finished region runs are reused)."""
    from kernelevo.sandbox.judge.evaluate import detect_device

    device = detect_device()
    state = load_state(run_dir)
    if state is None:
        state = prepare(config, run_dir, device, log)
    if config.report:
        _refresh_report(run_dir, log)
    optimize_regions(config, run_dir, state, log, device_count() if device == "cuda" else 0)
    if any(r["state"] == "interrupted" for r in state["regions"]):
        log(f"interrupted: continue with `kernelevo resume {run_dir}`")
        return 4
    state = finish(config, run_dir, state, device, log)
    if config.report:
        _refresh_report(run_dir, log)
        log(f"report: {run_dir / 'report.html'}")
    return 0 if state["end_to_end"]["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
