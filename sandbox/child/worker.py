"""The candidate's process: ``python -m kernelevo.sandbox.child.worker``, inside the sandbox.

It connects to its channel, says hello once Python, torch and Triton are imported, and then does
only what the session asks, one message at a time: build ``ModelNew``; call it on inputs made from
a seed the session reveals with that call (or read from files the oracle wrote); time one call;
write an output's raw bytes for the oracle; call it with the custom kernels turned off; report its
first filters. It holds no key, no reference output and no tolerance, and decides nothing: whatever
it reports is raw data the trusted side checks, or a finding that can only reject.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any


def _not_attachable() -> None:
    """No other process of the sandbox's user may attach to this one (ptrace, /proc/PID/mem): without
    a PID namespace of its own, an earlier candidate could otherwise patch the spare process that
    will judge the next one."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


_not_attachable()  # first of all: importing torch takes a second, in which the process would be open

import torch  # noqa: E402

from kernelevo.sandbox import tensor_files, wire  # noqa: E402
from kernelevo.sandbox.child import autotune, confine, digest, inputs, trained_constants  # noqa: E402
from kernelevo.sandbox.child.cached_blocks import release_cached_blocks  # noqa: E402
from kernelevo.sandbox.child.importing import import_candidate  # noqa: E402
from kernelevo.sandbox.child.launches import LaunchRecorder, OpRecorder  # noqa: E402
from kernelevo.sandbox.child.timed import (  # noqa: E402
    GraphTimedCall,
    TimedCall,
    flat_outputs,
    paced_ms,
    timed_calls,
    warm_host,
    warm_up,
)
from kernelevo.tasks.loader import import_task_module  # noqa: E402

MARKER_CYCLES = 1000
"""The forensic pass's marker: ``torch.cuda._sleep`` launched once the reference's own constructor
ran and before the candidate is imported; every kernel after it is the candidate's."""


def _deterministic(on: bool, warn_only: bool) -> None:
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if setter is not None:  # the eager switch alone: torch.use_deterministic_algorithms imports inductor
            setter(on, warn_only=warn_only)
        else:
            torch.use_deterministic_algorithms(on, warn_only=warn_only)


@contextlib.contextmanager
def _poisoned(on: bool) -> Iterator[None]:
    """Fill fresh ``empty`` allocations with NaN (integers with their max) during a checked call, and
    put back the global state found afterwards: torch's defaults, as in a user's process, so that no
    flag left behind tells a candidate's timed calls from a user's."""
    if not on:
        yield
        return
    fill = torch.utils.deterministic.fill_uninitialized_memory
    was = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.utils.deterministic.fill_uninitialized_memory = True
    _deterministic(True, True)
    try:
        yield
        if not (torch.utils.deterministic.fill_uninitialized_memory and torch.are_deterministic_algorithms_enabled()):
            raise RuntimeError("the call turned off the poisoning of fresh memory (deterministic algorithms or "
                               "fill_uninitialized_memory), which checked calls rely on")
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill
        _deterministic(*was)


def _grad_mode(mode: Any) -> Any:
    """The autograd mode a checked call runs in (:data:`inputs.CALL_MODES`): users call a model with
    gradients on and off, so its output is checked in both."""
    return torch.enable_grad() if mode == "on" else torch.no_grad()


BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}
EARLIER_CHECK_BYTES = 1 << 31
"""Inputs up to this size are kept, with their copies, until the next checked call, which checks
that it left them as they were; larger ones are not (they would double a large task's memory)."""


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to the bit (``torch.equal`` holds -0.0 equal to 0.0, and NaN unequal to itself)."""
    if a.is_floating_point() and a.element_size() in BITS and a.shape == b.shape and a.dtype == b.dtype:
        return torch.equal(a.contiguous().view(BITS[a.element_size()]), b.contiguous().view(BITS[b.element_size()]))
    return torch.equal(a, b)


def _changed(args: list[Any], kept: list[Any], skip: frozenset[int] = frozenset()) -> list[int]:
    """Inputs whose memory (seen through the aliases taken before their call) no longer holds the
    copies' bits, or whose tensors were pointed elsewhere; inputs in storages ``skip`` are not read."""
    return [k for k, (a, held) in enumerate(zip(args, kept)) if held is not None and held[2][0] not in skip and
            (_geometry(a) != held[2] or not _same_bits(held[1], held[0]))]


def _geometry(t: torch.Tensor) -> tuple[Any, ...]:
    """Where a tensor's values live: storage, offset, shape and strides (``set_`` or ``resize_`` on an
    input changes them, so the caller's tensor no longer shows the memory the call wrote)."""
    return t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride()


class Worker:
    """Serves one session's requests."""

    def __init__(self, channel: wire.Channel) -> None:
        self.channel = channel
        self.recorder = LaunchRecorder()
        self.recorder.install()
        self.autotune_first = autotune.judge_first_config_under_interpreter()
        self.ops = OpRecorder()
        self.buffers = inputs.InputBuffers()
        self.model: torch.nn.Module | None = None
        self.changes = trained_constants.Changes()
        self.task: Any = None
        self.job: dict[str, Any] = {}
        self.timer: TimedCall | None = None
        self.graph: GraphTimedCall | None = None
        self.kept: list[Any] = []
        """The last timed request's outputs, in order, until the session asks for one."""
        self.earlier: tuple[list[Any], list[Any]] | None = None
        """The last checked call's inputs, with their copies and aliases (see :meth:`call`)."""
        self.threads_before = threading.active_count()
        self.shipped = 0

    # requests ---------------------------------------------------------------------------------
    def device(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Start CUDA, asked before the candidate is named (the judge reads this answer as the harness's
        only because no candidate code can have run yet to write it)."""
        if msg.get("device") == "cuda" and (unusable := _cuda_unusable()) is not None:
            return {"ok": False, "device_unusable": unusable}
        return {"ok": True}

    def build(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.job = msg
        device, dtype, seed = msg["device"], msg.get("dtype"), int(msg["init_seed"])
        self.task = import_task_module(Path(msg["task"]), msg["size"])
        if msg.get("reference_first"):
            reference = inputs.build_model(self.task.Model, self.task, device, dtype, seed)
            torch.cuda.synchronize()
            torch.cuda._sleep(MARKER_CYCLES)
            torch.cuda.synchronize()
            del reference
        began = time.perf_counter()
        try:
            module = import_candidate(Path(msg["candidate"]))
            if not hasattr(module, "ModelNew"):
                return {"ok": False, "error": "the candidate defines no ModelNew"}
            self.model = inputs.build_model(module.ModelNew, self.task, device, dtype, seed)
        except Exception as exc:
            return {"ok": False, "error": f"importing the candidate or building ModelNew failed: "
                    f"{wire.describe_exception(exc)}"}
        self.threads_before = threading.active_count()
        return {"ok": True, "seconds": time.perf_counter() - began, "autotune_first_config": self.autotune_first}

    def parameters(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The model's parameters changed, as a user's new checkpoint is loaded, or put back."""
        self.changes.request(self.model, msg.get("change"))
        return {"ok": True}

    def _inputs(self, msg: dict[str, Any]) -> list[Any]:
        with torch.no_grad():  # a task's inputs that need gradients are refilled in place as data
            return self._make_inputs(msg)

    def _make_inputs(self, msg: dict[str, Any]) -> list[Any]:
        device, dtype = self.job["device"], self.job.get("dtype")
        if msg.get("inputs") is not None:  # the forensic pass: the oracle's files, copied in, no kernels
            inbox = Path(self.job["inbox"])
            read = tensor_files.read_tensor
            return [read(tensor_files.TensorFile.model_validate(v["tensor"]), inbox, device, 1 << 40)
                    if "tensor" in v else v["value"] for v in msg["inputs"]]
        if msg.get("fresh"):  # tensors made for this call alone; one set of inputs in memory at a time
            self.buffers.tensors = None
            made = inputs.generate(self.task, int(msg["seed"]), int(msg.get("variant", 0)), device, dtype)
            if msg.get("grad") == "on":  # as a training step passes them: floating inputs that need gradients
                made = [a.requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                        for a in made]
            return made
        values = inputs.generate(self.task, int(msg["seed"]), int(msg.get("variant", 0)), device, dtype)
        return self.buffers.fill(values)

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A checked call: poisoned allocations, ops recorded, inputs compared, outputs shipped."""
        assert self.model is not None
        args = self._inputs(msg)
        recorded = bool(msg.get("record", True))
        # Each input's values as copies, and the memory it names as aliases taken before the call: the
        # aliases keep seeing that memory even if the candidate points the caller's tensor elsewhere.
        copies = [(a.detach().clone(), a.detach(), _geometry(a)) if isinstance(a, torch.Tensor) else None
                  for a in args] if recorded else []
        before, failed_before = dict(self.recorder.launches), dict(self.recorder.failed)
        ghost = msg.get("ghost")
        began, failed = time.perf_counter(), None
        try:
            with _poisoned(bool(msg.get("poison", True))), _grad_mode(msg.get("grad")):
                if ghost:
                    self.recorder.start_ghost(str(ghost))
                if recorded:
                    with self.ops:
                        out = self.model(*args)
                else:
                    out = self.model(*args)
                self._sync()
        except Exception as exc:
            self.recorder.stop_ghost()
            failed = {"ok": False, "error": f"the call raised: {wire.describe_exception(exc)}"}
            if ghost:
                failed["ghost_fault"] = self.recorder.fault
        if failed is not None:  # the copies go back with the rest, as after a call that returned
            del copies
            release_cached_blocks()
            return failed
        host_ms = (time.perf_counter() - began) * 1e3
        changed = _changed(args, copies) if recorded else []
        # The previous checked call's inputs too: a candidate may keep a caller's tensor and write it
        # during a later call, after the check of its own call. Buffers this call's inputs were
        # refilled into were written by the harness, not the candidate.
        refilled = frozenset(_geometry(a)[0] for a in args if isinstance(a, torch.Tensor))
        earlier = _changed(*self.earlier, skip=refilled) if recorded and self.earlier else []
        if recorded:
            held = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
            self.earlier = (args, copies) if held <= EARLIER_CHECK_BYTES else None
        try:
            reply = self._ship(out, str(msg.get("name", "call")))
        finally:  # the output as the ghost call left it, then the earlier tensors it zeroed put back
            self.recorder.stop_ghost()
        if ghost:
            reply["ghost_fault"] = self.recorder.fault
        reply.update(host_ms=host_ms, inputs_changed=changed, earlier_inputs_changed=earlier,
                     launches=_delta(self.recorder.launches, before),
                     failed=_delta(self.recorder.failed, failed_before),
                     compute_ops=self.ops.compute_ops() if recorded else {},
                     host_reads=self.ops.host_reads if recorded else 0)
        # this call's copies and output are done with (unless kept as ``earlier``): the oracle computes
        # the next set's reference while this process waits, and may need the room
        del out, copies, args
        release_cached_blocks()
        return reply

    def warmup(self, msg: dict[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        self.earlier = None  # the checked calls are over: their inputs and copies are not held through timing
        self.kept = []  # a block's checks are drawn right after each request: none is asked for past them
        self.timer = self.timer or TimedCall(self.job["device"])  # compiles the cover before any timed request
        args = self._inputs(msg)
        with torch.no_grad():
            calls = warm_up(self.model, args, self.job["device"], int(msg.get("calls", 3)),
                            float(msg.get("seconds", 0.0)))
        return {"ok": True, "calls": calls}

    def timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The request's timed calls, one after another, each on fresh inputs, with a digest of each
        output under its own seed; the outputs are kept until the next request, in case the session
        asks for one (it decides only after the request, and holds each output it ships to the digest
        given here)."""
        assert self.model is not None
        self.timer = self.timer or TimedCall(self.job["device"])
        self.kept, self.earlier = [], None
        return timed_calls(msg, self._fresh_inputs, partial(self.timer, self.model), self.timer, self.kept)

    def _fresh_inputs(self, seed: int) -> list[Any]:
        return self._inputs({"seed": seed})

    def warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The untimed call the session asks for right before each timed request (:func:`warm_host`)."""
        assert self.model is not None
        with torch.no_grad():
            warm_host(self.model, self.buffers.tensors, self.job["device"])
        return {"ok": True}

    def paced(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Back-to-back calls on the last timed call's inputs (:func:`paced_ms`)."""
        assert self.model is not None
        if self.job["device"] != "cuda" or not self.buffers.tensors:
            return {"ok": False, "error": "a pace is measured on a GPU, after a timed call"}
        self.kept = []  # the block's checks are done: its kept outputs are not held through the pace
        with torch.no_grad():
            pace, calls = paced_ms(self.model, self.buffers.tensors, float(msg.get("estimate_ms", 0.1)))
        return {"ok": True, "pace_ms": pace, "calls": calls}

    def graph_timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Replays of ``forward`` captured once as a CUDA graph (``--cuda-graph``), on fresh values
        refilled into the captured input tensors; digested and kept like timed calls' outputs."""
        assert self.model is not None
        if self.job["device"] != "cuda":
            return {"ok": False, "error": "CUDA graphs need a GPU"}
        self.timer = self.timer or TimedCall("cuda")
        if self.graph is None:
            try:
                with torch.no_grad():
                    self.graph = GraphTimedCall(self.timer, self.model, self.buffers.tensors or [])
            except Exception as exc:
                return {"ok": False, "error": f"capturing forward as a CUDA graph failed: "
                        f"{wire.describe_exception(exc)}"}
        self.kept = []
        return timed_calls(msg, self._fresh_inputs, self.graph, self.timer, self.kept)  # the captured tensors, refilled

    def _kept_output(self, msg: dict[str, Any]) -> tuple[Any, str | None]:
        """The kept output the request names by its place in the last timed request (the last one
        where it names none), handed over once; or why there is none."""
        index = msg.get("index", -1)
        if type(index) is not int or not -len(self.kept) <= index < len(self.kept) or self.kept[index] is None:
            return None, "no output is kept"
        out, self.kept[index] = self.kept[index], None
        return out, None

    def ship(self, msg: dict[str, Any]) -> dict[str, Any]:
        out, missing = self._kept_output(msg)
        if missing:
            return {"ok": False, "error": missing}
        return self._ship(out, str(msg.get("name", "timed")))

    def ship_leaves(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Leaves of a kept output, with the hashes tying them to its digest (``digest.leaf_proof``):
        for each output, the leaves the request names, drawn by the session after the call."""
        kept, missing = self._kept_output(msg)
        if missing:
            return {"ok": False, "error": missing}
        outputs, asked = flat_outputs(kept), msg.get("leaves")
        if not isinstance(asked, list) or len(asked) != len(outputs):
            return {"ok": False, "error": f"leaves asked of {len(asked or [])} outputs; the call returned "
                    f"{len(outputs)}"}
        outbox, name, files = Path(self.job["outbox"]), str(msg.get("name", "timed")), []
        for k, (value, leaves) in enumerate(zip(outputs, asked)):
            if not isinstance(value, torch.Tensor):
                return {"ok": False, "error": f"output {k} is a {type(value).__name__}, not a tensor"}
            if not isinstance(leaves, list) or not all(isinstance(i, int) and i >= 0 for i in leaves):
                return {"ok": False, "error": f"output {k}: leaves asked as {str(leaves)[:100]}"}
            size = tensor_files.file_elements(value.shape, value.stride()) * value.element_size()
            self.shipped += 1
            proof = tensor_files.write_tensor(digest.leaf_proof(value, digest.leaves_within(leaves, size)), outbox,
                                              f"{name}-{self.shipped}-{k}.proof")
            files.append({**proof.model_dump(), "dtype": str(value.dtype).removeprefix("torch."),
                          "shape": list(value.shape), "strides": list(value.stride()), "device": value.device.type,
                          "type_name": type(value).__name__})
        return {"ok": True, "outputs": files}

    def finish(self, msg: dict[str, Any]) -> dict[str, Any]:
        peak = torch.cuda.max_memory_allocated() if self.job["device"] == "cuda" else None
        return {"ok": True, "new_threads": threading.active_count() - self.threads_before, "peak_bytes": peak,
                "launches": dict(self.recorder.launches), "ops": dict(self.ops.ops),
                "modules": sorted(m for m in sys.modules if m.startswith("kernelevo"))}

    # helpers ----------------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.job["device"] == "cuda":
            torch.cuda.synchronize()

    def _ship(self, out: Any, name: str) -> dict[str, Any]:
        outbox = Path(self.job["outbox"])
        files = []
        for k, value in enumerate(flat_outputs(out)):
            if not isinstance(value, torch.Tensor):
                return {"ok": False, "error": f"output {k} is a {type(value).__name__}, not a tensor"}
            self.shipped += 1
            files.append(tensor_files.write_tensor(value, outbox, f"{name}-{self.shipped}-{k}.bin").model_dump())
        return {"ok": True, "outputs": files}


def _cuda_unusable() -> str | None:
    """Why CUDA does not start in this process, asked before any candidate code runs (a sandbox or a
    driver that keeps the GPU out is the judge's fault, not the candidate's); None where it starts."""
    try:
        torch.empty(1, device="cuda")
    except Exception as exc:  # the driver's errors come as RuntimeError, AssertionError and more
        return wire.describe_exception(exc, 600)
    return None


def _delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}


HANDLERS = {"device": Worker.device, "build": Worker.build, "call": Worker.call, "warmup": Worker.warmup,
            "parameters": Worker.parameters,
            "timed": Worker.timed, "warm": Worker.warm, "paced": Worker.paced,
            "graph_timed": Worker.graph_timed, "ship": Worker.ship, "ship_leaves": Worker.ship_leaves,
            "finish": Worker.finish}


def serve(channel: wire.Channel) -> None:
    """Answer requests until ``finish`` (or until the channel closes)."""
    worker = Worker(channel)
    # said before any candidate code runs, so the judge may report it
    channel.send({"ok": True, "hello": "worker", "pid": os.getpid(),
                  "confined": os.environ.get(confine.STATUS_ENV, "not confined: started without the confiner")})
    while True:
        try:
            msg = channel.recv()
        except wire.ChannelError:
            return
        handler = HANDLERS.get(str(msg.get("op")))
        if handler is None:
            channel.send({"ok": False, "error": f"unknown request {msg.get('op')!r}"})
            continue
        try:
            reply = handler(worker, msg)
        except Exception as exc:  # a request that failed is an answer, never a crash of the worker
            reply = {"ok": False, "error": wire.describe_exception(exc, 3000)}
        channel.send(reply)
        if msg.get("op") == "finish":
            return


def main() -> int:
    faulthandler.enable(all_threads=False)
    # Gradients stay on, as torch starts: ModelNew is built as a user's process builds it (a candidate
    # that tells the judge by the mode it is built in must be honest in the mode users build in); each
    # call picks its own mode.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    serve(wire.connect())
    return 0


if __name__ == "__main__":
    sys.exit(main())
