"""First filters inside the candidate's process: which custom kernels launched, which torch ops ran,
and a ghost mode in which the custom kernels do nothing.

A candidate can read and patch everything here, so these records can only reject: a launch count of
zero, a torch compute op, or an output that stays correct without the kernels is a verdict; a clean
record is not proof (the oracle, the session's clock and, on a GPU, the forensic kernel trace are).

- Every Triton launch (``JITFunction.run``, or ``InterpretedFunction.run`` under the interpreter) and
  every call into a ``load_inline`` extension is counted once it returns; a launch that raised is
  counted as failed, never as a launch.
- In ghost mode a Triton launch is skipped, as if its kernel wrote nothing, in one of two replays the
  judge asks for; only an output wrong in both shows the kernels' work:
  - ``blank``: every tensor it was given is zeroed (the storages of tensors from before the call,
    inputs and parameters among them, put back after the call). Stale state linked to the output
    (NaN kept from an earlier call) is wiped, and a tensor torch filled that the kernel only
    overwrites stops mattering. Zeros, not NaN: a kernel whose only link to the output is
    ``0 * scratch`` leaves it correct.
  - ``keep``: only a tensor still uninitialised (every value the poison of the checked call's fresh
    allocations) is zeroed; the rest stay as they are. A kernel handed a finished output, or the
    weights torch computes with, and writing nothing, leaves the output correct.
  A fault of the replay's own (a tensor it cannot zero) is reported to the judge as such, never as
  the candidate failing without its kernels. An extension call runs, then its returned tensors are
  zeroed and its tensor arguments zeroed or put back as they were by the same rule.
- :class:`OpRecorder` records the aten ops a forward runs, on every thread, through torch's profiler
  (which also sees ops called from C++ extensions and from a jitted body under the interpreter);
  strict tasks allow only :data:`GLUE_OPS`, and read at most a few values into Python.
"""

from __future__ import annotations

import functools
import gc
from collections import Counter
from typing import Any

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd.profiler import profile as _profile

# aten ops that allocate, view, copy or cast: the glue a strict candidate may run in torch.
GLUE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_",
    "zero_", "arange", "scalar_tensor", "lift", "lift_fresh", "lift_fresh_copy", "detach", "detach_", "alias",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "reshape_as", "view_as", "as_strided", "as_strided_",
    "expand", "expand_as", "permute", "transpose", "transpose_", "t", "t_", "numpy_T", "mT", "mH",
    "matrix_H", "adjoint", "swapaxes", "swapdims", "movedim", "moveaxis", "squeeze", "squeeze_", "unsqueeze",
    "unsqueeze_", "flatten", "unflatten", "select", "slice", "narrow", "diagonal", "unfold", "split",
    "split_with_sizes", "chunk", "unbind", "contiguous", "clone", "copy_", "_to_copy", "to", "conj", "_conj",
    "resolve_conj", "resolve_neg", "positive", "_local_scalar_dense", "resize_", "set_", "record_stream",
    "is_same_size", "_has_compatible_shallow_copy_type", "is_pinned", "_pin_memory", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "dim", "numel", "item",
    "requires_grad_",
})

# Ops that move a tensor's values into Python (``float(t)``, ``t.item()``, ``t.tolist()``,
# ``t.numpy()``): arithmetic done there is not done in a kernel.
# ``tolist`` and ``numpy`` begin with a ``resolve_neg`` of the whole tensor; ``item`` and ``float``
# run ``item`` (or ``_local_scalar_dense``) once per value.
MAX_HOST_READ_ELEMENTS = 16
"""A strict candidate may read this many values into Python per call (an epsilon held as a tensor,
a size): reading more is computing outside the kernels."""


GHOST_MODES = ("blank", "keep")
"""The ghost replay's two calls: tensors from before the call zeroed, or kept (see the module)."""


class LaunchRecorder:
    """Counts custom kernel launches; in ghost mode turns them into no-ops (see the module)."""

    def __init__(self) -> None:
        self.launches: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.ghosted: Counter[str] = Counter()
        self.ghost = False
        self.earlier: set[int | None] = set()
        """In ghost mode, the storage of every tensor alive when the call began."""
        self.blank_all = False
        self.saved: dict[int, tuple[Any, Any]] = {}
        """Storages from before the call zeroed in a ``blank`` replay, with their bytes, put back after it."""
        self.fault: str | None = None
        """What went wrong in the replay's own work (the judge's, not the candidate's failure)."""
        self.installed: list[str] = []

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

    def start_ghost(self, mode: str) -> None:
        """Ghost mode from here on (``mode``: one of :data:`GHOST_MODES`)."""
        if mode not in GHOST_MODES:
            raise ValueError(f"ghost mode {mode!r}: one of {GHOST_MODES}")
        self.blank_all, self.saved, self.fault, self.ghost = mode == "blank", {}, None, True
        try:
            self.earlier = {_storage(o) for o in gc.get_objects() if issubclass(type(o), torch.Tensor)}
        except Exception as exc:  # noqa: BLE001 - the replay's own fault is reported, never the candidate's pass
            self.fault = f"listing the tensors alive: {type(exc).__name__}: {exc}"

    def stop_ghost(self) -> None:
        """Out of ghost mode, every storage from before the call that was zeroed put back."""
        try:
            with torch.inference_mode():
                for storage, values in self.saved.values():
                    storage.copy_(values)
        except Exception as exc:  # noqa: BLE001
            self.fault = self.fault or f"putting back what it zeroed: {type(exc).__name__}: {exc}"
        finally:
            self.ghost, self.earlier, self.saved = False, set(), {}

    def to_zero(self, tensor: torch.Tensor) -> bool:
        """Does a skipped kernel leave ``tensor`` zeroed (see the module)?"""
        if not tensor.numel() or _storage(tensor) is None:
            return False
        return self.blank_all or _uninitialised(tensor)

    def zero(self, tensor: torch.Tensor) -> None:
        """Zero ``tensor``, its storage's bytes kept first if it existed before the call (every view of
        it is then put back whole, however the views overlap)."""
        key = _storage(tensor)
        with torch.inference_mode():  # an inference tensor too
            if key in self.earlier and key not in self.saved:
                storage = tensor.untyped_storage()
                self.saved[key] = (storage, storage.clone())
            tensor.zero_()

    def blank(self, values: list[Any]) -> None:
        """Zero the tensors among ``values`` a skipped kernel leaves zeroed (see the module); a fault of
        the replay's own is noted (``fault``) for the judge, not raised into the candidate's code."""
        for value in values:
            try:
                if isinstance(value, torch.Tensor) and self.to_zero(value):
                    self.zero(value)
            except Exception as exc:  # noqa: BLE001
                self.fault = self.fault or f"zeroing a kernel's tensor: {type(exc).__name__}: {exc}"

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
                recorder.blank([*args, *kwargs.values()])
                return None
            try:
                result = original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            except BaseException:
                recorder.failed[name] += 1
                raise
            recorder.launches[name] += 1
            return result

        cls.run = run

    def call_extension(self, name: str, fn: Any, args: tuple, kwargs: dict) -> Any:
        """Call one function of a ``load_inline`` extension, recording (or ghosting) it."""
        if not self.ghost:
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                self.failed[name] += 1
                raise
            self.launches[name] += 1
            return result
        self.ghosted[name] += 1
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        try:
            zeroed = [t for t in tensors if self.to_zero(t)]
            kept = [(t, t.clone()) for t in tensors if not any(t is z for z in zeroed)]
        except Exception as exc:  # noqa: BLE001 - the replay's own fault, for the judge
            self.fault = self.fault or f"reading an extension's tensors: {type(exc).__name__}: {exc}"
            zeroed, kept = [], []
        result = fn(*args, **kwargs)
        returned = [r for r in (result if isinstance(result, (tuple, list)) else [result])
                    if isinstance(r, torch.Tensor) and not any(r is t for t in tensors)]
        try:
            with torch.inference_mode():
                for tensor, copy in kept:  # as if the call had not run
                    tensor.copy_(copy)
        except Exception as exc:  # noqa: BLE001
            self.fault = self.fault or f"putting back an extension's tensors: {type(exc).__name__}: {exc}"
        self.blank_all, was = True, self.blank_all
        try:
            self.blank([*zeroed, *returned])
        finally:
            self.blank_all = was
        return result


def _uninitialised(t: torch.Tensor) -> bool:
    """Does every value of ``t`` hold the poison of a fresh allocation (NaN, or an integer's maximum)?"""
    if t.is_floating_point() or t.is_complex():
        return bool(torch.isnan(t).all())
    if t.dtype == torch.bool:
        return False
    return bool((t == torch.iinfo(t.dtype).max).all())


def _storage(t: torch.Tensor) -> int | None:
    """The address of ``t``'s storage, or None for a tensor without one (sparse, nested, meta)."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        try:
            return t.data_ptr()
        except (RuntimeError, NotImplementedError, TypeError):
            return None


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
    """Records the aten ops run while active, on every thread, launches included.

    Uses torch's profiler rather than a TorchDispatchMode: entering a dispatch mode imports
    torch._dynamo, which costs seconds in every evaluation process.
    """

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        """Every op recorded so far."""
        self.call_ops: Counter[str] = Counter()
        """The ops of the last recorded call."""
        self.host_reads = 0
        """Elements read into Python during the last recorded call."""

    def __enter__(self) -> OpRecorder:
        self._profile = _profile(use_cpu=True, record_shapes=True,
                                 experimental_config=_ExperimentalConfig(profile_all_threads=True))
        self._profile.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._profile.__exit__(*exc)
        self.host_reads = 0
        self.call_ops = Counter()
        for event in self._profile.function_events:
            if not event.name.startswith("aten::") or self._inside_glue(event):
                continue
            op = event.name[len("aten::"):]
            self.call_ops[op] += 1
            if op in ("_local_scalar_dense", "item"):
                self.host_reads += 1
            elif op == "resolve_neg":
                self.host_reads += _numel(event)
        self.ops.update(self.call_ops)
        del self._profile

    @staticmethod
    def _inside_glue(event: Any) -> bool:
        """The internals of a glue op (e.g. the fill of a poisoned ``empty``) are the glue op's."""
        parent = event.cpu_parent
        while parent is not None:
            if parent.name.startswith("aten::") and parent.name[6:] in GLUE_OPS:
                return True
            parent = parent.cpu_parent
        return False

    def compute_ops(self) -> dict[str, int]:
        """The last call's ops that are not glue."""
        return {op: n for op, n in self.call_ops.items() if op not in GLUE_OPS}


def _numel(event: Any) -> int:
    shapes = getattr(event, "input_shapes", None) or []
    if not shapes or not shapes[0]:
        return 1
    count = 1
    for d in shapes[0]:
        count *= int(d)
    return count
