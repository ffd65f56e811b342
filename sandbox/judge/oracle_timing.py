"""The oracle's timing of the reference: the same timed call, queued calls and pace the candidate's
process makes (``child/timed.py``), asked for by the session, and the baselines' eager and
torch.compile times, measured in the oracle alone. A mixin of ``Oracle`` (``oracle.py``)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from kernelevo.sandbox.child import inputs
from kernelevo.sandbox.child.timed import (
    GraphTimedCall,
    TimedCall,
    call_ms,
    output_digest,
    paced_ms,
    queued_ms,
    warm_host,
    warm_up,
)
from kernelevo.sandbox.judge.timing import PACE_MEASUREMENTS, QUEUED_MEASUREMENTS, stats
from kernelevo.sandbox.models import TimingPolicy


class ReferenceTiming:
    """The timing requests of the oracle (its ``model``, ``buffers``, ``job`` and ``_inputs`` are the
    oracle's)."""

    timer: TimedCall | None
    graph: GraphTimedCall | None
    model: Any
    buffers: inputs.InputBuffers
    job: dict[str, Any]
    _inputs: Any  # the oracle's: an input set from a request's seed

    def warmup(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.timer = self.timer or TimedCall(self.job["device"])  # compiles the cover before any timed request
        args = self.buffers.fill(self._inputs(msg))
        with torch.no_grad():
            calls = warm_up(self.model, args, self.job["device"], int(msg.get("calls", 3)),
                            float(msg.get("seconds", 0.0)))
        return {"ok": True, "calls": calls}

    def timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self.timer is None:
            self.timer = TimedCall(self.job["device"])
        with torch.no_grad():
            args = self.buffers.fill(self._inputs(msg))
            out, gpu_ms, host_ms, lag_ms = self.timer(self.model, args)
            began = time.perf_counter()
            if "digest_seed" in msg:  # as the candidate's process does, so both walls hold the same work
                output_digest(out, int(msg["digest_seed"]))
            digest_ms = (time.perf_counter() - began) * 1e3
        del out
        return {"ok": True, "gpu_ms": gpu_ms, "host_ms": host_ms, "lag_ms": lag_ms, "parts": self.timer.last_parts,
                "digest_ms": digest_ms}

    def warm(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The untimed call before each timed one, as the candidate's process makes it."""
        with torch.no_grad():
            warm_host(self.model, self.buffers.tensors, self.job["device"])
        return {"ok": True}

    def paced(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Back-to-back calls of the reference, as the candidate's process makes them."""
        if self.job["device"] != "cuda" or not self.buffers.tensors:
            return {"ok": False, "error": "a pace is measured on a GPU, after a timed call"}
        with torch.no_grad():
            pace, calls = paced_ms(self.model, self.buffers.tensors, float(msg.get("estimate_ms", 0.1)))
        return {"ok": True, "pace_ms": pace, "calls": calls}

    def queued(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference's calls queued back to back, as the candidate's process makes them."""
        if self.job["device"] != "cuda" or not self.buffers.tensors or self.timer is None:
            return {"ok": False, "error": "queued calls are timed on a GPU, after a timed call"}
        with torch.no_grad():
            median, calls = queued_ms(self.model, self.buffers.tensors, self.timer.cover.flush,
                                      float(msg.get("estimate_ms", 0.1)))
        return {"ok": True, "queued_ms": median, "calls": calls}

    def graph_timed(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The reference replayed as a CUDA graph, timed as the candidate's replays are."""
        if self.job["device"] != "cuda":
            return {"ok": False, "error": "CUDA graphs need a GPU"}
        self.timer = self.timer or TimedCall("cuda")
        with torch.no_grad():
            if self.graph is None:
                self.graph = GraphTimedCall(self.timer, self.model, self.buffers.tensors or [])
            out, gpu_ms, host_ms, lag_ms = self.graph(self.buffers.fill(self._inputs(msg)))
            if "digest_seed" in msg:
                output_digest(out, int(msg["digest_seed"]))
        return {"ok": True, "gpu_ms": gpu_ms, "host_ms": host_ms, "lag_ms": lag_ms, "parts": self.timer.last_parts}

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
            # as many queued measurements as the candidate's two blocks make
            queued = [queued_ms(fn, buffers.tensors, timer.cover.flush, statistics.median(times))[0]
                      for _ in range(2 * QUEUED_MEASUREMENTS)] if device == "cuda" else []
        phases[phase] = time.perf_counter() - began
        return stats(times, min(paces) if paces else None, min(queued) if queued else None)
