"""Runtime record of custom kernel launches and of the torch ops a candidate runs.

Installed by the harness before any candidate code is imported:

- every Triton launch (``JITFunction.run``, or ``InterpretedFunction.run`` under the interpreter) and
  every call into a ``load_inline`` extension is counted once it returns; a launch that raised is
  counted as failed, never as a launch;
- in *ghost* mode the launches do nothing (extension calls are undone: tensor arguments restored,
  returned tensors poisoned), so the harness can check that the kernels' work reaches the output;
- :class:`OpRecorder` records the aten ops a candidate's forward runs outside of launches, through
  torch's profiler (which also sees ops called from C++ extensions); strict tasks allow only the glue
  in :data:`GLUE_OPS`. Launches run inside a profiler range named with a random nonce, so candidate
  code cannot fake one to hide torch work.
"""

from __future__ import annotations

import functools
import secrets
from collections import Counter
from typing import Any

import torch
from torch.autograd.profiler import profile as _profile
from torch.autograd.profiler import record_function as _record_function

# aten ops that allocate, view, copy or cast: the glue a strict candidate may run in torch.
GLUE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_",
    "zero_", "arange", "scalar_tensor", "lift_fresh", "lift_fresh_copy", "detach", "alias", "view",
    "_unsafe_view", "reshape", "_reshape_alias", "view_as", "as_strided", "expand", "expand_as",
    "permute", "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten", "select", "slice",
    "narrow", "split", "split_with_sizes", "chunk", "unbind", "contiguous", "clone", "copy_",
    "_to_copy", "to", "_local_scalar_dense", "resize_", "set_", "record_stream", "is_same_size",
    "_has_compatible_shallow_copy_type", "is_pinned", "_pin_memory", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset", "size", "stride", "dim", "numel", "item",
})


class LaunchRecorder:
    """Counts custom kernel launches; in ghost mode turns them into no-ops."""

    def __init__(self) -> None:
        self.launches: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.ghosted: Counter[str] = Counter()
        self.ghost = False
        self.in_launch = 0
        self.installed: list[str] = []
        self.marker = f"kernelevo::launch::{secrets.token_hex(8)}"

    @property
    def total(self) -> int:
        return sum(self.launches.values())

    def install(self) -> None:
        """Wrap Triton's launch entry points and ``load_inline`` (idempotent)."""
        if self.installed:
            return
        try:
            from triton.runtime.jit import JITFunction

            self._wrap_triton(JITFunction)
            self.installed.append("triton")
        except ImportError:
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction

            self._wrap_triton(InterpretedFunction)
            self.installed.append("triton-interpreter")
        except ImportError:
            pass
        import torch.utils.cpp_extension as cpp_extension

        original = cpp_extension.load_inline

        @functools.wraps(original)
        def load_inline(*args: Any, **kwargs: Any) -> Any:
            return _ExtensionProxy(original(*args, **kwargs), self)

        cpp_extension.load_inline = load_inline
        self.installed.append("load_inline")

    def _wrap_triton(self, cls: type) -> None:
        original = cls.run
        recorder = self

        @functools.wraps(original)
        def run(fn_self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if warmup:
                return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            name = _kernel_name(fn_self)
            if recorder.ghost:
                recorder.ghosted[name] += 1
                return None
            recorder.in_launch += 1
            try:
                with _record_function(recorder.marker):
                    result = original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            except BaseException:
                recorder.failed[name] += 1
                raise
            finally:
                recorder.in_launch -= 1
            recorder.launches[name] += 1
            return result

        cls.run = run

    def call_extension(self, name: str, fn: Any, args: tuple, kwargs: dict) -> Any:
        """Call one function of a ``load_inline`` extension, recording (or ghosting) it."""
        if self.ghost:
            self.ghosted[name] += 1
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            saved = [t.clone() for t in tensors]
            result = fn(*args, **kwargs)
            for tensor, copy in zip(tensors, saved):
                tensor.copy_(copy)
            for out in result if isinstance(result, (tuple, list)) else [result]:
                if isinstance(out, torch.Tensor):
                    out.fill_(float("nan") if out.is_floating_point() else -1)
            return result
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            self.failed[name] += 1
            raise
        self.launches[name] += 1
        return result


def _kernel_name(fn: Any) -> str:
    inner = getattr(fn, "fn", None)
    return getattr(inner, "__name__", None) or getattr(fn, "__name__", None) or repr(fn)


class _ExtensionProxy:
    """Stands in for a compiled extension module: calls through it are recorded launches."""

    def __init__(self, module: Any, recorder: LaunchRecorder) -> None:
        self._module = module
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._module, name)
        if name.startswith("_") or not callable(attr):
            return attr
        recorder = self._recorder
        label = f"{getattr(self._module, '__name__', 'ext')}.{name}"

        def launch(*args: Any, **kwargs: Any) -> Any:
            return recorder.call_extension(label, attr, args, kwargs)

        return launch


class OpRecorder:
    """Records the aten ops run while active, except inside custom kernel launches.

    Uses torch's profiler rather than a TorchDispatchMode: entering a dispatch mode imports
    torch._dynamo, which costs seconds in every evaluation process.
    """

    def __init__(self, launches: LaunchRecorder) -> None:
        self.launches = launches
        self.ops: Counter[str] = Counter()

    def __enter__(self) -> OpRecorder:
        self._profile = _profile(use_cpu=True)
        self._profile.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._profile.__exit__(*exc)
        for event in self._profile.function_events:
            if event.name.startswith("aten::") and not self._excluded(event):
                self.ops[event.name[len("aten::"):]] += 1
        del self._profile

    def _excluded(self, event: Any) -> bool:
        """Inside a launch, or the internals of a glue op (e.g. the fill of a poisoned ``empty``)."""
        parent = event.cpu_parent
        while parent is not None:
            name = parent.name
            if name == self.launches.marker or (name.startswith("aten::") and name[6:] in GLUE_OPS):
                return True
            parent = parent.cpu_parent
        return False

    def compute_ops(self) -> dict[str, int]:
        """The recorded ops that are not glue."""
        return {op: n for op, n in self.ops.items() if op not in GLUE_OPS}
