"""Load KernelBench-format task files unchanged, plus kernelevo's optional module-level extras.

Extras a task file may define (all optional):

- ``DESCRIPTION``: one line shown by ``kernelevo tasks``.
- ``DTYPE``: a ``torch.dtype``; floating inputs and the model's parameters are cast to it.
- ``ATOL`` / ``RTOL``: tolerances (defaults: 1e-4 for float32, 1e-2 for bf16/fp16).
- ``SCALE_ATOL``: whether the atol is read in units of an output's mean |value| where that is below 1
  (default: True for the default atol, False for a declared one).
- ``ALLOW_PARTIAL``: True lets torch keep part of the work (default: strict).
- ``SMALL``: a dict of module globals to replace for ``--size small`` (e.g. ``{"batch_size": 4}``);
  without it, the small size is found automatically (``shrink.py``): sizes halved together until the
  inputs and parameters hold about a million values, checked by running the reference.
- ``flops()`` / ``bytes_moved()``: functions returning the work and the minimum traffic of one call;
  when absent, the harness counts them (``torch.utils.flop_counter`` and tensor sizes).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from kernelevo.tasks.registry import builtin_names, builtin_path
from kernelevo.tasks.shrink import automatic_small, module_at
from kernelevo.tasks.task import Size, Task


class TaskError(ValueError):
    """A task file that cannot be used, with a message for the user."""


def resolve_task_path(spec: str) -> tuple[Path, bool]:
    """Turn TASK (a file path or a built-in name) into (path, is_builtin)."""
    path = Path(spec)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise TaskError(f"task file not found: {spec}")
        return path.resolve(), False
    found = builtin_path(spec)
    if found is None:
        raise TaskError(
            f"unknown task {spec!r}: give a path to a KernelBench-format .py file or one of the "
            f"built-in tasks: {', '.join(builtin_names())}"
        )
    return found, True


def import_task_module(path: Path, size: Size) -> types.ModuleType:
    """Execute a task file as a fresh module and apply its ``SMALL`` overrides for the small size."""
    name = f"kernelevo_task_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise TaskError(f"{path}: syntax error at line {exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # the user's file failed while importing
        raise TaskError(f"{path}: importing the task failed: {type(exc).__name__}: {exc}") from None
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, required):
            raise TaskError(f"{path}: a KernelBench task defines `{required}`; this file does not")
    if size == "small":
        overrides = small_overrides(module, path)
        if not hasattr(module, "SMALL"):
            if overrides:  # the file run again with its sizes replaced: derived values follow
                module = module_at(path, name, overrides)
                sys.modules[name] = module
            return module
        for key, value in overrides.items():
            setattr(module, key, value)
    return module


def small_overrides(module: types.ModuleType, path: Path) -> dict[str, Any]:
    """The file's ``SMALL`` dict, or an automatic small size where it declares none (``shrink.py``)."""
    if not hasattr(module, "SMALL"):
        key = (str(path), hashlib.sha256(path.read_bytes()).hexdigest())
        if key not in _AUTOMATIC_SMALL:
            _AUTOMATIC_SMALL[key] = automatic_small(path)
        return dict(_AUTOMATIC_SMALL[key])
    overrides = module.SMALL or {}
    if not isinstance(overrides, dict):
        raise TaskError(f"{path}: SMALL must be a dict of module globals to replace")
    for key in overrides:
        if not hasattr(module, key):
            raise TaskError(f"{path}: SMALL overrides `{key}`, which the module does not define")
    return dict(overrides)


_AUTOMATIC_SMALL: dict[tuple[str, str], dict[str, int]] = {}


def _dtype_name(value: object, path: Path) -> str | None:
    if value is None:
        return None
    text = str(value).removeprefix("torch.")
    if text not in {"float32", "float16", "bfloat16", "float64"}:
        raise TaskError(f"{path}: DTYPE must be torch.float32, float16, bfloat16 or float64, not {value!r}")
    return text


def _optional_float(module: types.ModuleType, name: str, path: Path) -> float | None:
    value = getattr(module, name, None)
    if value is None:
        return None
    try:
        number = float(value() if callable(value) else value)
    except Exception as exc:
        raise TaskError(f"{path}: {name} failed: {type(exc).__name__}: {exc}") from None
    if number < 0:
        raise TaskError(f"{path}: {name} must not be negative")
    return number


def load_task(spec: str, size: Size = "full") -> Task:
    """Load TASK (a path or a built-in name) for ``size`` and validate it."""
    path, builtin = resolve_task_path(spec)
    module = import_task_module(path, size)
    description = getattr(module, "DESCRIPTION", None) or (module.__doc__ or "").strip().split("\n")[0]
    atol = getattr(module, "ATOL", None)
    rtol = getattr(module, "RTOL", None)
    return Task(
        name=path.stem,
        path=path,
        builtin=builtin,
        description=description,
        size=size,
        size_overrides=small_overrides(module, path) if size == "small" else {},
        dtype=_dtype_name(getattr(module, "DTYPE", None), path),
        atol=float(atol) if atol is not None else None,
        rtol=float(rtol) if rtol is not None else None,
        scale_atol=bool(getattr(module, "SCALE_ATOL", atol is None)),
        allow_partial=bool(getattr(module, "ALLOW_PARTIAL", False)),
        declared_flops=_optional_float(module, "flops", path),
        declared_bytes=_optional_float(module, "bytes_moved", path),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
    )


def instantiate(task: Task, device: str = "cpu", seed: int = 0) -> tuple[object, list[object]]:
    """The task's reference model and one input set on ``device``, cast to the task's ``DTYPE``.

    For scripts and tests; the harness builds its own, with seeds and value variants per input set.
    """
    import torch

    module = import_task_module(task.path, task.size)
    torch.manual_seed(seed)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    model = model.to(device)
    if task.dtype:
        dtype = getattr(torch, task.dtype)
        model = model.to(dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    return model, inputs


def instantiate_candidate(task: Task, path: Path, device: str = "cpu", seed: int = 0) -> object:
    """A candidate file's ``ModelNew``, built as :func:`instantiate` builds ``Model`` (the task's init
    inputs under the same seed, so parameters match) and cast to the task's ``DTYPE``.

    For scripts and tests; the harness builds its own, after its checks.
    """
    import torch

    reference = import_task_module(task.path, task.size)
    name = f"kernelevo_candidate_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(seed)
    with torch.device(device):
        model = module.ModelNew(*reference.get_init_inputs())
    model = model.to(device)
    return model.to(getattr(torch, task.dtype)) if task.dtype else model
