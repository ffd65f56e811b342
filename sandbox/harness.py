"""The harness: the only source of verdicts and timings. Runs inside the sandboxed process.

``python -m kernelevo.sandbox.harness JOB.json`` with a signing key on stdin. Two modes:

- ``reference`` (no candidate code ever runs in it): fingerprints of the reference's outputs on every
  input set, FLOP and byte counts, eager and ``torch.compile`` timings, the GPU's ceilings.
- ``candidate``: imports the candidate (after the timers, comparers and launch recorder are in place),
  runs every runtime check of docs/EVALUATION.md, then times candidate, reference, candidate.

The result goes to ``Job.result_path``, signed with the key, never through stdout. This module
imports nothing from ``kernelevo.agent`` or ``kernelevo.tools``: it must stay small enough to trust.
"""

from __future__ import annotations

# Everything the harness relies on is imported, and captured, before any candidate code runs.
import faulthandler
import hmac
import importlib.util
import json
import os
import random
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelevo.sandbox import compare, telemetry, timing, workload
from kernelevo.sandbox.launches import LaunchRecorder, OpRecorder
from kernelevo.sandbox.models import (
    CandidateResult,
    Check,
    HarnessResult,
    Job,
    ReferenceResult,
    TensorPrint,
)
from kernelevo.sandbox.protocol import receive_key_and_go, signed_writer
from kernelevo.tasks.loader import TaskError, import_task_module
from kernelevo.tasks.task import default_tolerance

_perf_counter = time.perf_counter
_urandom = os.urandom
_active_threads = threading.active_count
_clone = torch.clone
_copy_ = torch.Tensor.copy_
_set_deterministic = getattr(torch._C, "_set_deterministic_algorithms", None)

# (owner, attribute) pairs whose identity is checked after the candidate ran.
_WATCHED = [
    (torch, "equal"), (torch, "allclose"), (torch, "abs"), (torch, "sub"), (torch, "le"), (torch, "all"),
    (torch, "isfinite"), (torch, "clone"), (torch, "sum"), (torch.Tensor, "to"), (torch.Tensor, "copy_"),
    (torch.Tensor, "__sub__"), (torch.Tensor, "__eq__"), (torch.Tensor, "numel"), (torch.Tensor, "cpu"),
    (torch.cuda, "synchronize"), (torch.cuda.Event, "record"), (torch.cuda.Event, "elapsed_time"),
    (time, "perf_counter"), (time, "time"), (json, "dumps"), (hmac, "new"),
]
_ORIGINALS = [(owner, name, getattr(owner, name)) for owner, name in _WATCHED]

VARIANTS = [
    ("seed A", 1.0, False),
    ("seed B", 1.0, False),
    ("small values (x0.01)", 0.01, False),
    ("large values (x100)", 100.0, False),
    ("ties (values on a 0.25 grid)", 1.0, True),
]


class _Progress:
    """Announces the current phase in a file (so a timeout or crash can say where it happened) and
    keeps how long each phase took."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.phases: dict[str, float] = {}
        self._current: tuple[str, float] | None = None

    def __call__(self, name: str) -> None:
        now = _perf_counter()
        if self._current is not None:
            previous, began = self._current
            self.phases[previous] = self.phases.get(previous, 0.0) + now - began
        self._current = (name, now)
        try:
            self.path.write_text(name)
        except OSError:
            pass


def _trim(exc: BaseException, limit: int = 1500) -> str:
    """An exception in a few lines: its message and the candidate's own frames."""
    frames = [
        f"{Path(f.filename).name}:{f.lineno}"
        for f in traceback.extract_tb(exc.__traceback__)
        if "candidate" in Path(f.filename).name
    ]
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > limit:
        text = text[: limit // 2] + "\n...\n" + text[-limit // 2:]
    return text + (f" (at {', '.join(frames[-3:])})" if frames else "")


def _set_precision() -> None:
    """TF32 off: fp32 references and baselines compute in IEEE fp32."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def _poison(on: bool) -> None:
    """Fill fresh ``empty`` allocations with NaN (and integers with their max) while checking.

    ``torch.use_deterministic_algorithms`` also imports torch._inductor to set its flag, which costs
    1.5 s on our CPU machine and 4-5 s on the H200 machine per evaluation; the eager switch alone is
    what poisoning needs, so the harness sets it directly where torch exposes it.
    """
    torch.utils.deterministic.fill_uninitialized_memory = on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if _set_deterministic is not None:
            _set_deterministic(on, warn_only=True)
        else:
            torch.use_deterministic_algorithms(on, warn_only=True)


def _sync(device: str) -> None:
    if device == "cuda":
        timing._synchronize()


def make_inputs(module: Any, job: Job, index: int) -> list[Any]:
    """Input set ``index``: the task's generator under its seed, then the set's value variant."""
    torch.manual_seed(job.seeds[index])
    with torch.device(job.device):
        raw = module.get_inputs()
    _, scale, ties = VARIANTS[index % len(VARIANTS)]
    dtype = getattr(torch, job.dtype) if job.dtype else None
    inputs = []
    for x in raw:
        if isinstance(x, torch.Tensor):
            x = x.to(job.device)
            if x.is_floating_point():
                if dtype is not None:
                    x = x.to(dtype)
                if ties:
                    x = torch.round(x * 4) / 4
                elif scale != 1.0:
                    x = x * scale
            x = x.contiguous()
        inputs.append(x)
    return inputs


def build_model(cls: type, module: Any, job: Job) -> torch.nn.Module:
    """Build ``cls`` like KernelBench: under the init seed, so Model and ModelNew share parameters."""
    torch.manual_seed(job.init_seed)
    with torch.device(job.device):
        model = cls(*module.get_init_inputs())
    model = model.to(job.device)
    if job.dtype:
        model = model.to(getattr(torch, job.dtype))
    return model.eval()


def _prints(outputs: list[Any], job: Job) -> list[TensorPrint] | None:
    tensors = [o for o in outputs if isinstance(o, torch.Tensor)]
    prints = [compare.fingerprint(t, job.sample_seed) for t in tensors]
    return prints if all(p.finite for p in prints) else None


def _float64_model(model: torch.nn.Module) -> torch.nn.Module | None:
    """A float64 copy of the reference, to measure how exact eager itself is (None if it cannot be made)."""
    import copy

    try:
        return copy.deepcopy(model).double()
    except Exception:  # a model that cannot be copied or cast: no allowance, the plain tolerance holds
        return None


def _set_excess(prints: list[TensorPrint], outs: list[Any], exact: torch.nn.Module, inputs: list[Any],
                job: Job) -> None:
    """Record, per output, how far eager strays from float64 beyond the tolerance (TensorPrint.excess)."""
    wide = [_to_double(x) for x in inputs]
    try:
        want = compare.flat_outputs(exact(*wide))
    except Exception:  # an op without float64 support (or out of memory): the plain tolerance holds
        return
    finally:
        del wide
    tensors = [o for o in outs if isinstance(o, torch.Tensor)]
    wanted = [w for w in want if isinstance(w, torch.Tensor)]
    for p, o, w in zip(prints, tensors, wanted):
        atol, rtol = _tolerance(job, o)
        p.excess = compare.excess_error(o, w, atol, rtol)
    del want, wanted
    if job.device == "cuda":
        torch.cuda.empty_cache()


def _to_double(x: Any) -> Any:
    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def run_reference(job: Job, progress: _Progress) -> ReferenceResult:
    """Everything that needs no candidate: measured in a process no candidate code ever ran in."""
    module = import_task_module(job.task_path, job.size)
    model = build_model(module.Model, module, job)
    sets = [make_inputs(module, job, i) for i in range(len(job.seeds))]
    progress("reference outputs")
    prints: list[list[TensorPrint] | None] = []
    first_out: Any = None
    exact = _float64_model(model)
    for i, inputs in enumerate(sets):
        out = model(*inputs)
        prints.append(_prints(compare.flat_outputs(out), job))
        if prints[-1] is not None and exact is not None:
            _set_excess(prints[-1], compare.flat_outputs(out), exact, inputs, job)
        if i == 0:
            first_out = out
    if prints[0] is None:
        raise TaskError(f"the reference's output on its own inputs (seed {job.seeds[0]}) is not finite")
    progress("counting work")
    flops = job.declared_flops if job.declared_flops is not None else workload.count_flops(model, sets[0])
    nbytes = (
        job.declared_bytes if job.declared_bytes is not None
        else workload.count_bytes(model, sets[0], first_out)
    )
    del first_out
    result = ReferenceResult(
        device=torch.cuda.get_device_name() if job.device == "cuda" else "cpu",
        output_prints=prints,
        flops=float(flops),
        bytes=float(nbytes),
        torch_version=torch.__version__,
        triton_version=_triton_version(),
    )
    if job.device == "cuda":
        flush = timing.l2_flush_buffer()
        before = telemetry.snapshot()
        progress("timing eager")
        times, _ = timing.time_cuda(model, sets, job.timing, flush)
        result.eager = timing.stats(times)
        if job.measure_compile:
            progress("timing torch.compile")
            try:
                compiled = torch.compile(model)
                times, _ = timing.time_cuda(compiled, sets, job.timing, flush)
                result.compiled = timing.stats(times)
            except Exception as exc:  # a baseline that cannot compile is reported, not fatal
                result.compile_error = _trim(exc, 400)
        result.telemetry = telemetry.around(before, telemetry.snapshot())
        if job.measure_ceilings:
            progress("measuring ceilings")
            del flush, sets
            torch.cuda.empty_cache()
            from kernelevo.sandbox.ceilings import measure_ceilings

            result.ceilings = measure_ceilings()
    else:
        result.eager = timing.stats(timing.time_cpu(model, sets))
    return result


def _triton_version() -> str | None:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return None


def _import_candidate(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("candidate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


class _Checks:
    def __init__(self, items: list[Check]) -> None:
        self.items = items

    def add(self, name: str, passed: bool, detail: str = "") -> bool:
        self.items.append(Check(name=name, passed=passed, detail=detail))
        return passed

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.items)


def _tolerance(job: Job, out: torch.Tensor) -> tuple[float, float]:
    default = default_tolerance(job.dtype or str(out.dtype).removeprefix("torch."))
    return (job.atol if job.atol is not None else default, job.rtol if job.rtol is not None else default)


def _match(outs: list[Any], refs: list[Any], job: Job, index: int) -> str | None:
    """Do the candidate's outputs on input set ``index`` match the reference's?"""
    if len(outs) != len(refs):
        return f"returned {len(outs)} outputs, the reference returns {len(refs)}"
    excess = job.excess[index] if index < len(job.excess) else []
    for k, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(r, torch.Tensor):
            continue
        atol, rtol = _tolerance(job, r)
        slack = compare.SLACK_FACTOR * (excess[k] if k < len(excess) else 0.0)
        problem = compare.describe_mismatch(o, r, atol, rtol, slack)
        if problem:
            return (f"output {k}: " if len(refs) > 1 else "") + problem
    return None


def _integrity() -> str | None:
    changed = [f"{getattr(o, '__name__', o)}.{n}" for o, n, f in _ORIGINALS if getattr(o, n) is not f]
    if changed:
        return f"the candidate replaced {', '.join(changed)}"
    c = torch._C
    if c._len_torch_function_stack() or c._len_torch_dispatch_stack():
        return "a torch function or dispatch mode was left active"
    return None


def run_candidate(job: Job, progress: _Progress) -> CandidateResult:
    """Judge the candidate; the reference and every comparison were set up before its import."""
    assert job.candidate_path is not None
    device = job.device
    module = import_task_module(job.task_path, job.size)
    reference = build_model(module.Model, module, job)
    sets = [make_inputs(module, job, i) for i in range(len(job.seeds))]
    recorder = LaunchRecorder()
    recorder.install()
    threads_before = _active_threads()
    result = CandidateResult(device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
                             compiled=False, checks=[])
    checks = _Checks(result.checks)  # appends land in the result's own list

    progress("importing the candidate")
    try:
        candidate_module = _import_candidate(job.candidate_path)
        if not hasattr(candidate_module, "ModelNew"):
            checks.add("import", False, "the candidate defines no ModelNew")
            return result
        candidate = build_model(candidate_module.ModelNew, module, job)
    except Exception as exc:
        checks.add("import", False, f"importing the candidate or building ModelNew failed: {_trim(exc)}")
        return result
    checks.add("import", True, "imported; ModelNew built with the task's init inputs and seed")

    ops = OpRecorder(recorder)

    def call(inputs: list[Any], record: bool = True) -> list[Any]:
        if record:
            with ops:
                out = candidate(*inputs)
        else:
            out = candidate(*inputs)
        _sync(device)
        return compare.flat_outputs(out)

    def unchanged(inputs: list[Any], copies: list[Any]) -> str | None:
        for k, (x, c) in enumerate(zip(inputs, copies)):
            if isinstance(x, torch.Tensor) and not compare._equal(x, c):
                return f"input {k} was modified by the call"
        return None

    _poison(True)
    progress("first call")
    inputs = sets[0]
    copies = [_clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    began = _perf_counter()
    try:
        outs0 = call(inputs)
    except Exception as exc:
        checks.add("first call", False, f"the first call raised: {_trim(exc)}")
        return result
    result.first_call_ms = (_perf_counter() - began) * 1e3
    result.compiled = True
    launched = dict(recorder.launches)
    failed = dict(recorder.failed)
    checks.add(
        "custom kernel launched",
        recorder.total > 0,
        ", ".join(f"{k} x{v}" for k, v in launched.items())
        or ("no custom kernel ran" + (f"; failed launches: {failed}" if failed else "")),
    )
    plain = all(type(o) is torch.Tensor and o.device.type == device for o in outs0)
    checks.add("plain tensors", plain, "outputs are plain torch.Tensors on the device" if plain else
               "outputs must be plain torch.Tensors on the task's device (no subclasses, lazy or meta tensors)")
    problem = unchanged(inputs, copies)
    del copies

    progress("correctness")
    refs: list[list[Any] | None] = []
    ref_prints: list[list[TensorPrint] | None] = []
    out_prints: list[list[TensorPrint] | None] = []
    with torch.no_grad():
        for i, inputs in enumerate(sets):
            label = f"set {i} ({VARIANTS[i % len(VARIANTS)][0]}, seed {job.seeds[i]})"
            if i == 0:
                outs = outs0
            else:
                copies = [_clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]
                outs = call(inputs)
                problem = problem or unchanged(inputs, copies)
                del copies
            ref = compare.flat_outputs(reference(*inputs))
            _sync(device)
            rp = _prints(ref, job)
            ref_prints.append(rp)
            if rp is None:
                refs.append(None)
                out_prints.append(None)
                checks.add(f"correct: {label}", True, "skipped: the reference itself is not finite here")
                continue
            refs.append(ref)
            out_prints.append([compare.fingerprint(o, job.sample_seed) for o in outs
                               if isinstance(o, torch.Tensor)] if plain else None)
            mismatch = _match(outs, ref, job, i)
            note = " (candidate ran before the reference)" if i == 0 else ""
            checks.add(f"correct: {label}", mismatch is None, mismatch or f"within tolerance{note}")
        checks.add("inputs unchanged", problem is None, problem or "every input equals its private copy")

        if refs[0] is not None:
            outs = call(sets[0])
            mismatch = _match(outs, refs[0], job, 0)
            checks.add("candidate after reference", mismatch is None, mismatch or "same answer after the reference ran")
        if len(sets) > 1 and refs[1] is not None and refs[0] is not None:
            progress("refilled buffers")
            tensors = [k for k, x in enumerate(sets[0]) if isinstance(x, torch.Tensor)]
            saved = {k: _clone(sets[0][k]) for k in tensors}
            for k in tensors:
                _copy_(sets[0][k], sets[1][k])
            outs = call(sets[0])
            mismatch = _match(outs, refs[1], job, 1)
            checks.add("buffer refilled", mismatch is None,
                       mismatch or "new values in the same buffers gave the new answer")
            for k in tensors:
                _copy_(sets[0][k], saved[k])
            del saved
        progress("ghost replay")
        real = call(sets[0], record=False)
        recorder.ghost = True
        try:
            ghost = call(sets[0], record=False)
        except Exception as exc:
            ghost = None
            checks.add("ghost replay", True, f"with its kernels turned off the candidate failed ({_trim(exc, 200)})")
        finally:
            recorder.ghost = False
        if ghost is not None:
            changed = len(ghost) != len(real) or any(
                compare.differs(g, r) for g, r in zip(ghost, real) if isinstance(r, torch.Tensor)
            )
            checks.add("ghost replay", changed, "the output changes when the custom kernels do nothing"
                       if changed else "with every custom kernel turned into a no-op the output is the same: "
                       "the kernels' work never reaches the output (or outputs are reused across calls)")
        del real, ghost
    compute = ops.compute_ops()
    result.torch_ops = dict(ops.ops)
    if job.allow_partial:
        checks.add("no torch compute", True, "partial replacement allowed" +
                   (f"; torch computed: {', '.join(sorted(compute))}" if compute else ""))
    else:
        checks.add("no torch compute", not compute,
                   "only glue ran in torch" if not compute else
                   f"torch computed {', '.join(f'aten.{k}' for k in sorted(compute))}; this task is strict: "
                   "the work must run in custom kernels")
    new_threads = _active_threads() - threads_before
    checks.add("no new threads", new_threads <= 0,
               "no threads left running" if new_threads <= 0 else f"{new_threads} new thread(s) left running")
    tampered = _integrity()
    checks.add("harness integrity", tampered is None, tampered or "timers, comparers and torch functions intact")
    result.launches = dict(recorder.launches)
    result.output_prints = out_prints
    result.reference_prints = ref_prints
    _poison(False)
    if not checks.ok:
        return result

    progress("timing")
    _time_candidate(job, candidate, reference, sets, refs, result, checks)
    tampered = _integrity()
    checks.add("harness integrity after timing", tampered is None, tampered or "intact")
    return result


def _time_candidate(job: Job, candidate: torch.nn.Module, reference: torch.nn.Module, sets: list,
                    refs: list, result: CandidateResult, checks: _Checks) -> None:
    usable = [s for s, r in zip(sets, refs) if r is not None]
    index = [i for i, r in enumerate(refs) if r is not None]
    with torch.no_grad():
        if job.device != "cuda":
            interpreted = os.environ.get("TRITON_INTERPRET") == "1"
            result.timing = "cpu-interpreter" if interpreted else "cpu"
            result.candidate = timing.stats(timing.time_cpu(candidate, usable))
            result.reference = timing.stats(timing.time_cpu(reference, usable))
            return
        result.timing = "cuda-events"
        flush = timing.l2_flush_buffer()
        rng = random.Random(int.from_bytes(_urandom(8), "little"))
        before = telemetry.snapshot()
        block_a, kept_a = timing.time_cuda(candidate, usable, job.timing, flush, keep=job.timing.spot_checks, rng=rng)
        ref_times, _ = timing.time_cuda(reference, usable, job.timing, flush)
        block_b, kept_b = timing.time_cuda(candidate, usable, job.timing, flush, keep=job.timing.spot_checks, rng=rng)
        result.telemetry = telemetry.around(before, telemetry.snapshot())
    result.candidate = timing.stats(block_a + block_b)
    result.candidate_blocks = [timing.stats(block_a).median_ms, timing.stats(block_b).median_ms]
    result.reference = timing.stats(ref_times)
    problems = []
    for run, (which, out) in {**kept_a, **{k + 10_000: v for k, v in kept_b.items()}}.items():
        mismatch = _match(compare.flat_outputs(out), refs[index[which]], job, index[which])
        if mismatch:
            problems.append(f"timed run {run % 10_000} on set {index[which]}: {mismatch}")
    checks.add("timed runs correct", not problems,
               "; ".join(problems[:2]) or f"{len(kept_a) + len(kept_b)} timed runs chosen at random matched")


def main(argv: list[str] | None = None) -> int:
    started_at = time.time()
    argv = sys.argv[1:] if argv is None else argv
    # Started (Python, torch, triton imported): take the key, then wait until the sandbox lets this
    # job onto the GPU. The Docker sandbox's key file is gone before any candidate code runs.
    write_signed = signed_writer(receive_key_and_go())
    job = Job.model_validate_json(Path(argv[0]).read_text())
    faulthandler.enable(all_threads=False)
    progress = _Progress(Path(argv[0]).with_name("progress"))
    torch.set_grad_enabled(False)
    _set_precision()
    run: Callable[[Job, _Progress], Any] = run_reference if job.mode == "reference" else run_candidate
    progress("loading the task")
    try:
        outcome = run(job, progress)
        progress("done")
        outcome.phases = {k: round(v, 4) for k, v in progress.phases.items()}
        outcome.started_at = started_at
        result = HarnessResult(mode=job.mode, **{job.mode: outcome})
    except TaskError as exc:
        result = HarnessResult(mode=job.mode, error=str(exc))
    except Exception as exc:
        result = HarnessResult(mode=job.mode, error=f"the harness failed: {_trim(exc, 3000)}")
    write_signed(job.result_path, result.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
