"""The float64 reference, in the oracle: the task's model copied to float64 and run on the same
inputs, for the precision rule and the comparison's slack.

Where it runs: on the GPU when the float64 run fits in the memory free there, otherwise on the
host, whose memory is larger and whose float64 is exact, only slower. It is never skipped for lack
of room, so a candidate's process that fills the GPU cannot switch the precision rule off. A model
that cannot run in float64 at all (an op without float64 support, a copy that fails) has no float64
reference, and the verdict says so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelevo.sandbox.child.timed import flat_outputs
from kernelevo.sandbox.judge import device_memory


@dataclass
class ExactOutcome:
    outputs: list[Any] | None = None
    """The float64 outputs (on the GPU or on the host), or None."""
    note: str | None = None
    """Why there are none, or where they were made when not on the GPU."""


def _widened(args: list[Any], device: str, dtype: torch.dtype) -> list[Any]:
    return [a.to(device=device, dtype=dtype) if isinstance(a, torch.Tensor) and a.is_floating_point()
            else (a.to(device) if isinstance(a, torch.Tensor) else a) for a in args]


_NARROWING = {torch.Tensor.float: torch.float32, torch.Tensor.half: torch.float16,
              torch.Tensor.bfloat16: torch.bfloat16}


class KeepsWide(TorchFunctionMode):
    """While the wide run runs, a floating dtype narrower than ``dtype`` that the model asks for (``x.float()``,
    ``x.to(torch.float32)``, ``dtype=torch.float32``, a new tensor of the default dtype) is ``dtype``
    instead. Mixed-precision code writes such casts (an attention computed "in fp32"); followed, they
    would make the float64 run round where eager does, bit for bit, eager's error against it would read
    0, and the precision rule would demand eager's own order of sums from every honest kernel."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def _wide(self, value: Any) -> Any:
        if isinstance(value, torch.dtype) and value.is_floating_point and \
                torch.finfo(value).bits < torch.finfo(self.dtype).bits:
            return self.dtype
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's signature
        kwargs = kwargs or {}
        if func in _NARROWING and self._wide(_NARROWING[func]) is self.dtype:
            return args[0].to(self.dtype)
        args = tuple(self._wide(a) for a in args)
        kwargs = {k: self._wide(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def __enter__(self):  # noqa: ANN204 - TorchFunctionMode's
        self.default = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch.set_default_dtype(self.default)
        super().__exit__(*exc)


def _host_copy(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of ``model`` in ``dtype`` on the host, made without a second copy on the GPU first (the
    host is where the float64 run goes when the GPU has no room)."""
    memo: dict[int, Any] = {}
    for name, tensors in (("parameters", model.parameters()), ("buffers", model.buffers())):
        for t in tensors:
            moved = t.detach().to("cpu", dtype if t.is_floating_point() else t.dtype)
            memo[id(t)] = torch.nn.Parameter(moved, requires_grad=False) if name == "parameters" else moved
    return copy.deepcopy(model, memo)


class ExactReference:
    """Float64 copies of one reference model, made on first use, one per device (``dtype``: float32
    copies instead, for what a half-precision task's model gives computed in float32)."""

    def __init__(self, dtype: torch.dtype = torch.float64) -> None:
        self.dtype = dtype
        self.copies: dict[str, torch.nn.Module | None] = {}

    def _copy(self, model: torch.nn.Module, device: str) -> torch.nn.Module | None:
        """The float64 copy on ``device``; None where the model cannot be copied or cast (kept: that will
        not change). Running out of memory raises, and is retried the next time."""
        if device not in self.copies:
            try:
                exact = _host_copy(model, self.dtype) if device == "cpu" else \
                    copy.deepcopy(model).to(device, self.dtype)
            except torch.OutOfMemoryError:
                raise
            except Exception:  # no float64 run: the plain tolerance holds, the precision rule cannot
                exact = None
            self.copies[device] = exact
        return self.copies[device]

    def _run(self, model: torch.nn.Module, args: list[Any], count: int, device: str) -> list[Any] | None:
        exact = self._copy(model, device)
        if exact is None:
            return None
        with torch.no_grad(), KeepsWide(self.dtype):
            outputs = flat_outputs(exact(*_widened(args, device, self.dtype)))
        return outputs if len(outputs) == count else None

    def drop_gpu_copy(self) -> None:
        """Free the float64 copy on the GPU (a kept oracle between sessions)."""
        if self.copies.get("cuda") is not None:
            del self.copies["cuda"]

    def compute(self, model: torch.nn.Module, args: list[Any], count: int, working: int | None,
                scale: float = 2.0, reserve: int = 0) -> ExactOutcome:
        """Float64 outputs for ``args``: on the GPU where they fit, else on the host. ``working``: what
        the eager call allocated beyond its inputs (None off the GPU); ``scale``: how many times larger
        a float64 value is than the task's (2 for float32, 4 for bfloat16); ``reserve``: room to keep
        free beside them (the candidate's outputs, read into the oracle to be compared)."""
        gpu_can_cast = self.copies.get("cuda", True) is not None  # not known to fail the cast on the GPU
        if working is not None and gpu_can_cast:
            outputs = self._on_gpu(model, args, count, int(scale * working) + reserve)
            if outputs is not None:
                return ExactOutcome(outputs=outputs)
        try:
            outputs = self._run(model, args, count, "cpu")
        except Exception as exc:  # an op without float64 support on the host, or no memory there either
            return ExactOutcome(note=f"no float64 reference: the float64 run failed ({type(exc).__name__})")
        if outputs is None:
            return ExactOutcome(note="no float64 reference: the model cannot be copied to float64")
        where = None if working is None else "the float64 reference was made on the host (the GPU had no room for it)"
        return ExactOutcome(outputs=outputs, note=where)

    def _on_gpu(self, model: torch.nn.Module, args: list[Any], count: int, need: int) -> list[Any] | None:
        """The float64 run on the GPU where ``need`` bytes (and the widened inputs) fit; None to go to
        the host (no room, out of memory, or an op without float64 support on the GPU)."""
        need += sum(a.numel() * 8 for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        free, _ = torch.cuda.mem_get_info()
        if not device_memory.exact_fits(need, free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()):
            return None
        try:
            return self._run(model, args, count, "cuda")
        except torch.OutOfMemoryError:
            self.drop_gpu_copy()
            torch.cuda.empty_cache()
            return None
        except Exception:  # an op without float64 support on the GPU: the host may have it
            return None
