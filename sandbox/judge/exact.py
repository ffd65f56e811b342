"""The float64 reference, in the oracle: the task's model copied to float64 and run on the same
inputs, for the precision rule and the comparison's slack.

Where it runs: on the GPU when the float64 run fits in the memory free there; otherwise, if the
candidate's process holds more than its share of the GPU, nowhere (the candidate is the one
crowding the judge, and is rejected for it, so filling the GPU cannot switch the precision rule
off); otherwise on the host, whose memory is larger and whose float64 is exact, only slower. A
model that cannot run in float64 at all (an op without float64 support, a copy that fails) has no
float64 reference, and the verdict says so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from kernelevo.sandbox.child.timed import flat_outputs
from kernelevo.sandbox.judge import device_memory


@dataclass
class ExactOutcome:
    outputs: list[Any] | None = None
    """The float64 outputs (on the GPU or on the host), or None."""
    note: str | None = None
    """Why there are none, or where they were made when not on the GPU."""
    crowded: dict[str, int] | None = None
    """The candidate's process left no room: the GPU's total and what the other processes held."""


def _widened(args: list[Any], device: str) -> list[Any]:
    return [a.to(device=device, dtype=torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point()
            else (a.to(device) if isinstance(a, torch.Tensor) else a) for a in args]


class ExactReference:
    """Float64 copies of one reference model, made on first use, one per device."""

    def __init__(self) -> None:
        self.copies: dict[str, torch.nn.Module | None] = {}

    def _copy(self, model: torch.nn.Module, device: str) -> torch.nn.Module | None:
        """The float64 copy on ``device``; None where the model cannot be copied or cast (kept: that
        will not change), while running out of memory is retried the next time."""
        if device not in self.copies:
            try:
                exact = copy.deepcopy(model).to(device=device, dtype=torch.float64)
            except torch.OutOfMemoryError:
                return None
            except Exception:  # no float64 run: the plain tolerance holds, the precision rule cannot
                exact = None
            self.copies[device] = exact
        return self.copies[device]

    def _run(self, model: torch.nn.Module, args: list[Any], count: int, device: str) -> list[Any] | None:
        exact = self._copy(model, device)
        if exact is None:
            return None
        with torch.no_grad():
            outputs = flat_outputs(exact(*_widened(args, device)))
        return outputs if len(outputs) == count else None

    def compute(self, model: torch.nn.Module, args: list[Any], count: int, working: int | None,
                footprint: int | None) -> ExactOutcome:
        """Float64 outputs for ``args``. ``working``: what the eager call allocated beyond its inputs
        (None off the GPU); ``footprint``: the task's one-call peak, for the candidate's share."""
        if working is not None:
            placed = self._on_gpu(model, args, count, working, footprint)
            if placed is not None:
                return placed
        try:
            outputs = self._run(model, args, count, "cpu")
        except Exception as exc:  # an op without float64 support on the host, or no memory there either
            return ExactOutcome(note=f"no float64 reference: the float64 run failed ({type(exc).__name__})")
        if outputs is None:
            return ExactOutcome(note="no float64 reference: the model cannot be copied to float64")
        where = None if working is None else "the float64 reference was made on the host (the GPU had no room for it)"
        return ExactOutcome(outputs=outputs, note=where)

    def _on_gpu(self, model: torch.nn.Module, args: list[Any], count: int, working: int,
                footprint: int | None) -> ExactOutcome | None:
        """The float64 run on the GPU where it fits; an outcome that rejects where the candidate's
        process left it no room; None to go to the host."""
        widened = sum(a.numel() * 8 for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        need = int(device_memory.EXACT_SHARE * working) + widened
        free, total = torch.cuda.mem_get_info()
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        if device_memory.exact_fits(need, free + cached):
            try:
                outputs = self._run(model, args, count, "cuda")
            except torch.OutOfMemoryError:
                outputs = None
            except Exception:  # an op without float64 support on the GPU: the host may have it
                return None
            if outputs is not None:
                return ExactOutcome(outputs=outputs)
            torch.cuda.empty_cache()
            free, total = torch.cuda.mem_get_info()
        others = max(total - free - torch.cuda.memory_reserved(), 0)
        if device_memory.candidate_crowded_out(others, footprint):
            return ExactOutcome(crowded={"total": total, "others": others})
        return None
