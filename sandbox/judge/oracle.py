"""The oracle: ``python -m kernelevo.sandbox.judge.oracle``, a sandboxed process that runs the task's
own ``Model`` and never imports candidate code.

For a judgement it builds the reference, makes each input set from a seed the session keeps secret
from the candidate, computes eager's outputs (and a float64 run of the same model, where the checks
need one), and compares the raw outputs the candidate's process wrote with them. It also re-times
the reference through the same protocol the candidate is timed with. For the cache of baselines it
counts the work one call does, times eager and ``torch.compile`` and measures the GPU's ceilings.
"""

from __future__ import annotations

import errno
import faulthandler
import os
import secrets
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from kernelevo.sandbox import tensor_files, wire
from kernelevo.sandbox.child import inputs, trained_constants
from kernelevo.sandbox.child.cached_blocks import release_cached_blocks
from kernelevo.sandbox.child.timed import (
    GraphTimedCall,
    TimedCall,
    call_ms,
    flat_outputs,
    paced_ms,
    tensor_digest,
    timed_calls,
    warm_host,
    warm_up,
)
from kernelevo.sandbox.judge import compare, sampled, slack, telemetry, ties, workload
from kernelevo.sandbox.judge.exact import ExactOutcome, ExactReference
from kernelevo.sandbox.judge.level_groups import level_groups
from kernelevo.sandbox.judge.timing import PACE_MEASUREMENTS, stats
from kernelevo.sandbox.models import OutputStats, ReferenceResult, TimingPolicy
from kernelevo.tasks.loader import TaskError, import_task_module


def _not_finite(values: list[Any]) -> int:
    """How many values of the floating outputs are infinities or NaN."""
    return sum(compare.count_not_finite(v) for v in values if isinstance(v, torch.Tensor))


def _finite(values: list[Any]) -> bool:
    return _not_finite(values) == 0


def _device_use() -> dict[str, int]:
    """The GPU's memory as the driver sees it, and this process's share, after freeing its cache
    (empty where there is no GPU in use: the error is then reported as any other)."""
    if not torch.cuda.is_initialized():
        return {}
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return {"total": total, "free": free, "own": torch.cuda.memory_reserved()}


class Oracle:
    """Serves one session: the reference's outputs on chosen inputs, and comparisons with them."""

    def __init__(self) -> None:
        self.task: Any = None
        self.model: torch.nn.Module | None = None
        self.exact = ExactReference()
        self.exact_before: ExactReference | None = None
        self.changes = trained_constants.Changes()
        self.job: dict[str, Any] = {}
        self.expected: dict[str, tuple[list[Any], list[Any] | None]] = {}
        self.tie_orders: dict[str, list[Any]] = {}
        """Outputs with the order among ties stable, by key, where they differ from eager's (``ties.py``)."""
        self.unspecified_ties: bool | None = None
        self.buffers = inputs.InputBuffers()
        self.timer: TimedCall | None = None
        self.graph: GraphTimedCall | None = None
        self.peak = 0
        """Peak device memory since the last ``memory`` request, over the counter's resets."""
        self.input_files: dict[str, list[Path]] = {}
        """Input sets written as files (the forensic pass), by key, until compared or dropped."""

    def _peak_from_here(self) -> int | None:
        """Bytes this process holds on the GPU now, the peak counter reset to it (None on the CPU)."""
        if self.job.get("device") != "cuda" or not torch.cuda.is_initialized():
            return None
        self.peak = max(self.peak, torch.cuda.max_memory_allocated())
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        same = {k: msg.get(k) for k in ("task", "size", "dtype", "device", "init_seed")}
        if self.model is not None and same == {k: self.job.get(k) for k in same}:
            return {"ok": True}  # a kept oracle: the reference is built already
        self.job = msg
        self.task = import_task_module(Path(msg["task"]), msg["size"])
        self.model = inputs.build_model(self.task.Model, self.task, msg["device"], msg.get("dtype"),
                                        int(msg["init_seed"]))
        self.exact, self.exact_before, self.changes = ExactReference(), None, trained_constants.Changes()
        self.unspecified_ties = None
        return {"ok": True}

    def _inputs(self, msg: dict[str, Any], row_levels: list | None = None) -> list[Any]:
        return inputs.generate(self.task, int(msg["seed"]), int(msg.get("variant", 0)), self.job["device"],
                               self.job.get("dtype"), row_levels)

    def expect(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Eager's outputs (and float64's, if asked) on the input set of ``seed``, kept under ``key``."""
        assert self.model is not None
        row_levels: list = []
        args = self._inputs(msg, row_levels)
        before = self._peak_from_here()
        with torch.no_grad():
            want = flat_outputs(self.model(*args))
        working = None if before is None else torch.cuda.max_memory_allocated() - before
        exact, sensitivity = ExactOutcome(), [0.0] * len(want)
        floating = [w for w in want if isinstance(w, torch.Tensor) and w.is_floating_point()]
        if msg.get("exact") and floating:
            scale = 8.0 / min(w.element_size() for w in floating)  # a float64 value against the task's
            exact = self.exact.compute(self.model, args, len(want), working, scale,
                                       reserve=sum(w.numel() * w.element_size() for w in floating))
            groups = [_groups_or_none(w, row_levels) for w in want] if row_levels else None
            far = inputs.far_from_generated(int(msg.get("variant", 0)))
            sensitivity = slack.sensitivity(self.model, args, want, int(msg["seed"]), self.job["device"], groups,
                                            draws=slack.FAR_NUDGES if far else 1)
            sensitivity = slack.past_eager_overflow(self.model, args, want, exact.outputs, sensitivity, working,
                                                    self.job.get("dtype"), seed=int(msg["seed"]),
                                                    device=self.job["device"], float64=self.exact, scale=scale)
        scaled_up = inputs.far_from_generated(int(msg.get("variant", 0)))
        self.expected[str(msg["key"])] = (want, exact.outputs, sensitivity, scaled_up)
        if self.unspecified_ties is not False:
            other, self.unspecified_ties = ties.stable_tie_outputs(self.model, args, want)
            if other is not None:
                self.tie_orders[str(msg["key"])] = other
        reply: dict[str, Any] = {"ok": True, "not_finite": _not_finite(want), "exact": exact.outputs is not None,
                                 "exact_note": exact.note,
                                 "outputs": [{"dtype": str(w.dtype).removeprefix("torch."), "shape": list(w.shape),
                                              "bytes": w.numel() * w.element_size()}
                                             for w in want if isinstance(w, torch.Tensor)],
                                 "count": len(want)}
        if msg.get("fingerprint"):  # the same bits on every set: the reference ignores its inputs
            # row-major: a padded output's gaps are no part of what the reference computed
            reply["fingerprint"] = [tensor_digest(v, 0, k, None) for k, v in enumerate(flat_outputs(want))]
        if msg.get("write_inputs"):
            outbox = Path(self.job["outbox"])
            reply["inputs"] = [{"tensor": tensor_files.write_tensor(a, outbox, f"in-{msg['key']}-{k}.bin",
                                                                      zero_gaps=True).model_dump()}
                               if isinstance(a, torch.Tensor) else {"value": a} for k, a in enumerate(args)]
            self.input_files[str(msg["key"])] = [outbox / f"in-{msg['key']}-{k}.bin" for k, a in enumerate(args)
                                                 if isinstance(a, torch.Tensor)]
        del args
        release_cached_blocks()
        return reply

    def parameters(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference's parameters changed as the worker's are (``trained_constants.change``), or put
        back; the float64 copies follow them (the one from before the change kept for the put-back)."""
        assert self.model is not None
        self.changes.request(self.model, msg.get("change"))
        self.exact, self.exact_before = (ExactReference(), self.exact) if msg.get("change") is not None else \
            (self.exact_before or ExactReference(), None)
        self.job["init_seed"] = None  # changed since built: never kept for another session as built
        return {"ok": True}

    def compare(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Compare the candidate's outputs (files in its outbox) with those expected under ``key``.

        Everything in ``outputs`` comes from the candidate's process: a description that does not parse,
        or a file that cannot be read as described, is the candidate's problem, reported as such; a
        failure of the oracle itself (out of memory, say) stays the oracle's."""
        return self._against_expected(msg, self._compare)

    def compare_leaves(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Compare leaves of a large timed output, shipped with the hashes that tie them to the call's
        digest, with the output expected under ``key`` (``sampled.py``)."""
        return self._against_expected(msg, sampled.compare_leaves)

    def _against_expected(self, msg: dict[str, Any], how: Callable[..., dict[str, Any]]) -> dict[str, Any]:
        """The expectation under ``key``, taken; the candidate's description of its outputs parsed (one that
        does not parse is its problem); then ``how``'s comparison of the two."""
        self._forget_inputs(str(msg["key"]))
        want, exact, sensitivity, scaled_up = self.expected.pop(str(msg["key"]))
        msg = {**msg, "scaled_up": scaled_up, "tie_order": self.tie_orders.pop(str(msg["key"]), None)}
        try:
            metas = [tensor_files.TensorFile.model_validate(m) for m in msg["outputs"]]
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            return {"ok": True, "problem": f"the candidate's process described its outputs in a way that cannot be "
                    f"read: {wire.describe_exception(exc, 300)}", "stats": []}
        reply = how(msg, metas, want, exact, sensitivity)
        del want, exact
        release_cached_blocks()
        return reply

    def _compare(self, msg: dict[str, Any], metas: list[tensor_files.TensorFile], want: list[Any],
                 exact: list[Any] | None, sensitivity: list[float | compare.Scale]) -> dict[str, Any]:
        if len(metas) != len(want):
            return {"ok": True, "problem": f"returned {len(metas)} outputs, the reference returns {len(want)}",
                    "stats": []}
        folder = Path(msg["folder"])
        found: list[dict[str, Any]] = []
        digests: list[float] = []
        for k, (meta, w) in enumerate(zip(metas, want)):
            problem = compare.problem_in_description(meta, w)
            if problem:
                found.append(OutputStats(problem=problem).model_dump())
                continue
            try:
                got = tensor_files.read_tensor(meta, folder, w.device.type, w.numel() * w.element_size())
            except (OSError, ValueError) as exc:
                found.append(OutputStats(problem=f"the output's file is unusable: {exc}").model_dump())
                continue
            w = ties.order_matched(got, w, (msg.get("tie_order") or want)[k])
            result = compare.compare_output(got, w, exact[k] if exact is not None else None, float(msg["atol"]),
                                            float(msg["rtol"]), sensitivity[k], bool(msg.get("scale_atol")),
                                            scaled_up=bool(msg.get("scaled_up")))
            if result.problem is None and msg.get("strict_layout"):
                result.problem = compare.layout_problem(meta.strides, w)
            if msg.get("digest_seed") is not None:
                # hashed at the layout the call hashed: the file's, which ``got`` was read back at
                digests.append(tensor_digest(got, int(msg["digest_seed"]), k, list(meta.strides)))
            del got
            found.append(result.model_dump())
        problems = [f"output {k}: {s['problem']}" if len(found) > 1 else s["problem"]
                    for k, s in enumerate(found) if s["problem"]]
        reply = {"ok": True, "problem": problems[0] if problems else None, "stats": found, "digests": digests}
        if msg.get("zeros") and not problems:
            reply["zeros_pass"] = _zeros_pass(msg, want, exact, sensitivity)
            reply["another_set_passes"] = not reply["zeros_pass"] and self._another_set_passes(msg, want, exact,
                                                                                              sensitivity)
        return reply

    def _another_set_passes(self, msg: dict[str, Any], want: list[Any], exact: list[Any] | None,
                            sensitivity: list[float | compare.Scale]) -> bool:
        """Would the reference's own output on another input set pass for ``want``? Then its output barely
        depends on its inputs (a deep stack whose signal vanishes into its biases, say), and no output
        tells a kernel's work from none (asked only where the ghost replay's output passed)."""
        assert self.model is not None
        try:
            with torch.no_grad():
                other = flat_outputs(self.model(*self._inputs({"seed": secrets.randbits(31), "variant": 0})))
        except Exception:  # the reference refuses another set: its inputs matter as far as can be told
            return False
        return _all_pass(msg, other, want, exact, sensitivity)

    def _forget_inputs(self, key: str) -> None:
        """Delete the input files written for ``key`` (the forensic pass's): each can be gigabytes."""
        for path in self.input_files.pop(key, []):
            path.unlink(missing_ok=True)

    def drop(self, msg: dict[str, Any]) -> dict[str, Any]:
        self._forget_inputs(str(msg["key"]))
        self.expected.pop(str(msg["key"]), None)
        self.tie_orders.pop(str(msg["key"]), None)
        release_cached_blocks()
        return {"ok": True}

    def reset(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Forget every expectation (a session ended, perhaps before comparing all it asked for), and
        the inputs refilled for re-timing: a kept oracle waits between sessions holding little more
        than the reference, so another evaluation's processes on the same GPU have the room."""
        self.expected.clear()
        self.tie_orders.clear()
        for key in list(self.input_files):
            self._forget_inputs(key)
        self.graph = None
        self.buffers = inputs.InputBuffers()
        self.exact.drop_gpu_copy()
        release_cached_blocks()
        return {"ok": True}

    def warmup(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.timer = self.timer or TimedCall(self.job["device"])  # compiles the cover before any timed request
        args = self.buffers.fill(self._inputs(msg))
        with torch.no_grad():
            calls = warm_up(self.model, args, self.job["device"], int(msg.get("calls", 3)),
                            float(msg.get("seconds", 0.0)))
        return {"ok": True, "calls": calls}

    def timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The request's timed calls of the reference, made as the candidate's process makes its own."""
        self.timer = self.timer or TimedCall(self.job["device"])
        return timed_calls(msg, self._refilled, partial(self.timer, self.model), self.timer, None)

    def _refilled(self, seed: int) -> list[Any]:
        return self.buffers.fill(self._inputs({"seed": seed}))

    def warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The untimed call before each timed one, as the candidate's process makes it."""
        with torch.no_grad():
            warm_host(self.model, self.buffers.tensors, self.job["device"])
        return {"ok": True}

    def memory(self, msg: dict[str, Any]) -> dict[str, Any]:
        """This process's peak device memory since the last ``memory`` request (None on the CPU)."""
        if self.job["device"] != "cuda":
            return {"ok": True, "peak_bytes": None}
        peak = max(self.peak, torch.cuda.max_memory_allocated())
        torch.cuda.reset_peak_memory_stats()
        self.peak = 0
        return {"ok": True, "peak_bytes": peak}

    def paced(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Back-to-back calls of the reference, as the candidate's process makes them."""
        if self.job["device"] != "cuda" or not self.buffers.tensors:
            return {"ok": False, "error": "a pace is measured on a GPU, after a timed call"}
        with torch.no_grad():
            pace, calls = paced_ms(self.model, self.buffers.tensors, float(msg.get("estimate_ms", 0.1)))
        return {"ok": True, "pace_ms": pace, "calls": calls}

    def graph_timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference replayed as a CUDA graph, timed as the candidate's replays are."""
        if self.job["device"] != "cuda":
            return {"ok": False, "error": "CUDA graphs need a GPU"}
        self.timer = self.timer or TimedCall("cuda")
        if self.graph is None:
            with torch.no_grad():
                self.graph = GraphTimedCall(self.timer, self.model, self.buffers.tensors or [])
        return timed_calls(msg, self._refilled, self.graph, self.timer, None)

    def baseline(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The cached baselines: work per call, eager and torch.compile times, the GPU's ceilings."""
        assert self.model is not None
        device = self.job["device"]
        policy = TimingPolicy.model_validate(msg["timing"])
        seeds = [int(s) for s in msg["seeds"]]
        args = self._inputs({"seed": seeds[0]})
        phases: dict[str, float] = {}
        began = time.perf_counter()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            first_out = self.model(*args)
        eager_peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
        if not _finite(flat_outputs(first_out)):
            raise TaskError(f"the reference's output on its own inputs (seed {seeds[0]}) is not finite")
        flops = msg.get("declared_flops")
        flops = float(flops) if flops is not None else float(workload.count_flops(self.model, args))
        nbytes = msg.get("declared_bytes")
        nbytes = float(nbytes) if nbytes is not None else float(workload.count_bytes(self.model, args, first_out))
        described = [describe_value(a) for a in args]
        del args
        phases["counting work"] = time.perf_counter() - began
        result = ReferenceResult(device=torch.cuda.get_device_name() if device == "cuda" else "cpu", flops=flops,
                                 bytes=nbytes, torch_version=torch.__version__, triton_version=_triton_version(),
                                 output_dtypes=[str(o.dtype).removeprefix("torch.") for o in flat_outputs(first_out)
                                                if isinstance(o, torch.Tensor)], inputs=described,
                                 eager_peak_bytes=eager_peak,
                                 device_total_bytes=torch.cuda.mem_get_info()[1] if device == "cuda" else None)
        before = telemetry.snapshot() if device == "cuda" else {}
        result.eager = self._time_locally(self.model, policy, seeds, phases, "timing eager")
        if device == "cuda" and msg.get("measure_compile", True):
            began = time.perf_counter()
            try:
                compiled = torch.compile(self.model)
                result.compiled = self._time_locally(compiled, policy, seeds, phases, "timing torch.compile")
            except Exception as exc:  # a baseline that cannot compile is reported, not fatal
                result.compile_error = wire.describe_exception(exc, 400)
            phases.setdefault("timing torch.compile", time.perf_counter() - began)
        if device == "cuda":
            result.telemetry = telemetry.around(before, telemetry.snapshot())
            if msg.get("measure_ceilings"):
                began = time.perf_counter()
                torch.cuda.empty_cache()
                from kernelevo.sandbox.judge.ceilings import measure_ceilings

                result.ceilings = measure_ceilings()
                phases["measuring ceilings"] = time.perf_counter() - began
        result.phases = {k: round(v, 4) for k, v in phases.items()}
        release_cached_blocks()
        return {"ok": True, "result": result.model_dump(mode="json")}

    def _time_locally(self, fn: Any, policy: TimingPolicy, seeds: list[int], phases: dict[str, float],
                      phase: str) -> Any:
        """Time ``fn`` with the same timed call the candidate gets, each call on a fresh input set."""
        device = self.job["device"]
        began = time.perf_counter()
        buffers = inputs.InputBuffers()
        timer = TimedCall(device)
        with torch.no_grad():
            warm_up(fn, buffers.fill(self._inputs({"seed": seeds[0]})), device,
                    policy.warmup if device == "cuda" else 1, policy.warmup_s if device == "cuda" else 0.0)
            times: list[float] = []
            timed_began = time.perf_counter()
            runs = policy.max_runs if device == "cuda" else 3
            while len(times) < runs and (len(times) < (policy.min_runs if device == "cuda" else 3)
                                         or time.perf_counter() - timed_began < policy.budget_s):
                warm_host(fn, buffers.tensors, device)
                args = buffers.fill(self._inputs({"seed": seeds[len(times) % len(seeds)] + 7919 * len(times)}))
                out, gpu_ms, _, lag_ms = timer(fn, args)
                del out
                times.append(call_ms(gpu_ms, lag_ms))
            paces = [paced_ms(fn, buffers.tensors, statistics.median(times))[0]
                     for _ in range(PACE_MEASUREMENTS)] if device == "cuda" else []
        phases[phase] = time.perf_counter() - began
        return stats(times, min(paces) if paces else None)


def describe_value(value: object) -> str:
    """An input as ``dtype[shape]`` (a tensor) or its Python type's name."""
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    return type(value).__name__


def _triton_version() -> str | None:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return None


def _groups_or_none(output: Any, row_levels: list) -> Any:
    """The output's groups by shift level (``level_groups``), or None where they cannot be had: groups
    only tighten a check, and their failure must never read as the reference's."""
    try:
        return level_groups(output, row_levels)
    except Exception:
        return None


def _zeros_pass(msg: dict[str, Any], want: list[Any], exact: list[Any] | None,
                sensitivity: list[float | compare.Scale]) -> bool:
    """Would outputs of zeros be within tolerance of ``want``? Then no output tells a kernel's work from
    buffers left zeroed (asked only where the ghost replay's output passed, so rarely paid for)."""
    zeros = [torch.zeros_like(w) if isinstance(w, torch.Tensor) and w.is_floating_point() else None for w in want]
    return _all_pass(msg, zeros, want, exact, sensitivity)


def _all_pass(msg: dict[str, Any], outputs: list[Any], want: list[Any], exact: list[Any] | None,
              sensitivity: list[float | compare.Scale]) -> bool:
    """Would ``outputs`` pass for ``want`` under the task's tolerance, every one of them?"""
    return len(outputs) == len(want) and all(
        isinstance(w, torch.Tensor) and isinstance(o, torch.Tensor) and o.shape == w.shape
        and compare.compare_output(o, w, exact[k] if exact is not None else None, float(msg["atol"]),
                                   float(msg["rtol"]), sensitivity[k], bool(msg.get("scale_atol")),
                                   scaled_up=bool(msg.get("scaled_up"))).problem is None
        for k, (o, w) in enumerate(zip(outputs, want)))


HANDLERS = {"load": Oracle.load, "expect": Oracle.expect, "compare": Oracle.compare, "parameters": Oracle.parameters,
            "compare_leaves": Oracle.compare_leaves, "drop": Oracle.drop,
            "reset": Oracle.reset,
            "warmup": Oracle.warmup, "warm": Oracle.warm, "paced": Oracle.paced, "memory": Oracle.memory,
            "timed": Oracle.timed, "graph_timed": Oracle.graph_timed,
            "baseline": Oracle.baseline}


def serve(channel: wire.Channel) -> None:
    oracle = Oracle()
    channel.send({"ok": True, "hello": "oracle", "pid": os.getpid()})
    while True:
        try:
            msg = channel.recv()
        except wire.ChannelError:
            return
        op = str(msg.get("op"))
        if op == "finish":
            channel.send({"ok": True})
            return
        handler = HANDLERS.get(op)
        try:
            reply = handler(oracle, msg) if handler else {"ok": False, "error": f"unknown request {op!r}"}
        except TaskError as exc:
            reply = {"ok": False, "error": str(exc), "task_error": True}
        except torch.OutOfMemoryError as exc:  # whose fault it is depends on who holds the rest
            reply = {"ok": False, "error": f"at {wire.innermost_frames(exc)}: {wire.describe_exception(exc, 600)}",
                     "out_of_memory": _device_use()}
        except OSError as exc:  # a full disk is the machine's or the candidate's doing, not the reference's
            reply = {"ok": False, "error": wire.describe_exception(exc, 600),
                     "disk_full": exc.errno in (errno.ENOSPC, errno.EDQUOT)}
        except Exception as exc:  # the reference failed: the session says so in words
            reply = {"ok": False, "error": wire.describe_exception(exc, 3000)}
        channel.send(reply)


def main() -> int:
    faulthandler.enable(all_threads=False)
    torch.set_grad_enabled(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 references and baselines in IEEE fp32
        torch.backends.cudnn.allow_tf32 = False
    serve(wire.connect())
    return 0


if __name__ == "__main__":
    sys.exit(main())
