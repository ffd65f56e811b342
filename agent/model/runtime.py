"""The run-time half of whole-model optimization: build a network from its spec, reassemble it with
verified kernels, and put them into a user's model (``optimize(model)`` of an exported module).

It imports torch and kernelevo's graph code only, never langgraph or langchain: an exported module,
and the sandboxed processes that judge a reassembled network, load it and nothing of the optimizer.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn as nn
from pydantic import BaseModel

from kernelevo.tasks import regions as rg
from kernelevo.tasks.loader import import_task_module


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


def _parts(spec: ModelSpec) -> tuple[Callable[..., nn.Module], Callable[[], Any], list[Any], str | None]:
    """(factory, input function, constructor arguments, dtype name) of a spec."""
    if spec.inputs is None:  # a KernelBench file: Model, get_inputs, get_init_inputs, maybe SMALL and DTYPE
        if not Path(spec.path).is_file():
            raise FileNotFoundError(f"no such file: {spec.path}")
        module = import_task_module(Path(spec.path), spec.size)
        init_args = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
        declared = getattr(module, "DTYPE", None)
        dtype = spec.dtype or (str(declared).removeprefix("torch.") if declared is not None else None)
        return getattr(module, spec.attr), module.get_inputs, init_args, dtype
    factory, _ = _load_attr(f"{spec.path}:{spec.attr}")
    make_inputs, _ = _load_attr(spec.inputs)
    init_args = list(_load_attr(spec.init)[0]()) if spec.init else []
    return factory, make_inputs, init_args, spec.dtype


def _cast_inputs(values: list[Any], device: str, dtype: str | None) -> list[Any]:
    values = [x.to(device) if isinstance(x, torch.Tensor) else x for x in values]
    if dtype:
        cast = getattr(torch, dtype)
        values = [x.to(cast) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in values]
    return values


def build(spec: ModelSpec, device: str = "cpu", seed: int = 0, inputs: bool = True) -> tuple[nn.Module, list[Any]]:
    """The model (eval mode, on ``device``) and one set of example inputs (none if ``inputs`` is False)."""
    torch.manual_seed(seed)
    factory, make_inputs, init_args, dtype = _parts(spec)
    with torch.device(device):
        model = factory(*init_args)
        values = list(make_inputs()) if inputs else []
    model = model.to(device).eval()
    if dtype:
        model = model.to(getattr(torch, dtype))
    return model, _cast_inputs(values, device, dtype)


def example_inputs(spec: ModelSpec, device: str = "cpu") -> list[Any]:
    """One set of the model's example inputs, from the random state as it is (callers seed it)."""
    _, make_inputs, _, dtype = _parts(spec)
    with torch.device(device):
        values = list(make_inputs())
    return _cast_inputs(values, device, dtype)


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


class KernelRegion(nn.Module):
    """A region replaced by a verified kernel module; the original runs instead whenever the inputs'
    shapes or dtypes differ from those the kernel was verified on."""

    def __init__(self, kernel: nn.Module, original: nn.Module, order: list[int],
                 signature: list[tuple[tuple[int, ...], str]]) -> None:
        super().__init__()
        self.kernel, self.original, self.order, self.signature = kernel, original, order, signature
        self.enabled = True
        """False: the original runs (the end-to-end check times the region both ways in context)."""
        self.train(original.training)

    def matches(self, args: tuple[Any, ...]) -> bool:
        return all(isinstance(a, torch.Tensor) and tuple(a.shape) == shape and str(a.dtype) == dtype
                   for a, (shape, dtype) in zip((args[i] for i in self.order), self.signature, strict=True))

    def forward(self, *args: Any) -> Any:
        # in training the original runs: a kernel was verified at inference (BatchNorm's running
        # statistics, dropout off)
        if not self.enabled or self.training or not self.matches(args):
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
    # a size that depends on the values (a symbol, recorded on fake inputs) matches no call: -1
    signature = [(tuple(d if isinstance(d, int) else -1 for d in by_name[i].meta["tensor_meta"].shape),
                  str(by_name[i].meta["tensor_meta"].dtype)) for i in region.inputs]
    return KernelRegion(kernel, split_child, order, signature)


def capture_split(model: nn.Module, inputs: list[Any], region_nodes: list[list[str]], fake_mode: Any = None
                  ) -> tuple[torch.fx.GraphModule, list[rg.Region], torch.fx.GraphModule]:
    """Capture and partition ``model`` again and split it into its regions: (graph, regions, split);
    ValueError if it no longer partitions into ``region_nodes`` (the regions it was optimized as).
    ``fake_mode``: ``inputs`` are its fake tensors and the capture runs on shapes alone."""
    gm = rg.capture(model, inputs, fake_mode)
    found = rg.partition(gm)
    if [r.nodes for r in found] != region_nodes:
        raise ValueError("the model's graph no longer partitions as it did when it was optimized")
    return gm, found, rg.split(gm, found).train(model.training)  # fx builds its modules in training mode


def assemble(model: nn.Module, inputs: list[Any], region_nodes: list[list[str]],
             kernels: dict[int, tuple[str, str]], fake_mode: Any = None) -> torch.fx.GraphModule:
    """The network with region ``i`` replaced by ``kernels[i] = (source, name)``."""
    gm, found, split_gm = capture_split(model, inputs, region_nodes, fake_mode)
    for index, (source, name) in kernels.items():
        child = getattr(split_gm, f"submod_{index}")
        setattr(split_gm, f"submod_{index}", kernel_region(gm, found[index], child, source, name))
    return split_gm


def shape_inputs(spec: ModelSpec, device: str) -> tuple[Any, list[Any]]:
    """A ``FakeTensorMode`` and the model's example inputs as its fake tensors: shapes, dtypes and
    device, no data, nothing launched."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    _, make_inputs, _, dtype = _parts(spec)  # the user's file imported for real, outside the mode
    # the shape environment gives a size that depends on values (``nonzero``) a symbol instead of failing
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())
    with mode, torch.device(device):
        values = _cast_inputs(list(make_inputs()), device, dtype)
    return mode, values


def reassemble(spec: ModelSpec, device: str, region_nodes: list[list[str]],
               kernels: dict[int, tuple[str, str]]) -> torch.fx.GraphModule:
    """The network of ``spec``, built as its task's ``Model`` builds it (the same parameters from the
    same draws), with its regions' kernels put in, its graph recorded on fake inputs. Building it
    runs no forward on data: on a GPU it launches the network constructor's kernels, those of the
    kernels' own modules, and at most a few small ones for constants a forward builds from sizes
    (a mask), so that the forensic pass, which counts every kernel after the network's constructor
    as the calls' work, reads the calls' time and not a capture's."""
    model, _ = build(spec, device, inputs=False)
    mode, inputs = shape_inputs(spec, device)
    try:
        return assemble(model, inputs, region_nodes, kernels, fake_mode=mode)
    except rg.CannotCapture as exc:
        raise rg.CannotCapture(f"the network's graph could not be recorded again on shapes alone: {exc}") from None


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


def arbitrate(assembled: torch.fx.GraphModule, fresh: list[Any], device: str, replaced: list[int]
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


def _random_like(meta: dict[str, Any], device: torch.device) -> torch.Tensor:
    dtype = getattr(torch, meta["dtype"])
    if dtype.is_floating_point:
        return torch.randn(tuple(meta["shape"]), device=device).to(dtype)
    return torch.randint(0, 8, tuple(meta["shape"]), device=device, dtype=dtype)


def apply(model: nn.Module, spec: dict[str, Any], example_inputs: list[Any] | None = None) -> nn.Module:
    """``model`` with the exported kernels in place of its regions (see the module docstring)."""
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    inputs = example_inputs or [_random_like(m, device) for m in spec["model_inputs"]]
    try:
        gm, found, split_gm = capture_split(model.eval(), inputs, spec["regions"])
    except ValueError:
        warnings.warn("kernelevo: this model does not partition as the optimized one did; returning it unchanged",
                      stacklevel=2)
        return model
    for entry in spec["kernels"]:
        index = entry["index"]
        region = found[index]
        child = getattr(split_gm, f"submod_{index}")
        try:
            wrapped = kernel_region(gm, region, child, entry["source"], entry["name"])
            problem = self_check(wrapped, child, gm, region, device)
        except Exception as exc:  # a kernel that cannot even load: the original region runs
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            warnings.warn(f"kernelevo: region {region.name} keeps its original code: {problem}", stacklevel=2)
            continue
        setattr(split_gm, f"submod_{index}", wrapped)
    signature = getattr(gm, "fixed_signature", None)
    return split_gm if signature is None else FixedShapes(split_gm, model, signature)


class FixedShapes(nn.Module):
    """A network captured at fixed shapes (its forward read sizes into Python): the optimized graph
    runs for calls with the captured inputs' shapes and dtypes, the user's own model for any other."""

    def __init__(self, optimized: nn.Module, original: nn.Module, signature: list[Any]) -> None:
        super().__init__()
        self.optimized, self.original, self.signature = optimized, original, signature

    def forward(self, *args: Any) -> Any:
        if rg.input_signature(args) == self.signature:
            return self.optimized(*args)
        return self.original(*args)


def self_check(wrapped: KernelRegion, original: nn.Module, gm: Any, region: rg.Region,
               device: torch.device) -> str | None:
    """None when the kernel agrees with the original region on fresh random inputs of its shapes."""
    by_name = {n.name: n for n in gm.graph.nodes}
    placeholders = [n.name for n in original.graph.nodes if n.op == "placeholder"]
    args = []
    for name in placeholders:
        meta = by_name[name].meta["tensor_meta"]
        args.append(_random_like({"shape": list(meta.shape), "dtype": str(meta.dtype).removeprefix("torch.")},
                                 device))
    with torch.no_grad():
        expected, got = original(*args), wrapped(*args)
    ok, error = compare(expected, got)
    return None if ok else f"its self-check differs from the original by up to {error:.3g}"
