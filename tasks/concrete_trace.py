"""Tracing a forward with its shapes fixed: ``torch.fx`` tracing that also runs the model on example
inputs, so that sizes read in Python are plain numbers.

``torch.fx.symbolic_trace`` turns every value into a proxy, sizes included, and fails on code that
real models are full of: ``B, T, C = x.size()``, ``math.sqrt(k.size(-1))``, ``self.bias[:, :, :T, :T]``
with ``T`` read from a shape, ``if x.dim() == 4``. Here each proxy carries the real value the op
produced on the example inputs, and what only depends on shapes (``size``, ``shape``, ``dim``,
``numel``, ``dtype``, ``device``, ``len``) is answered with that value's own, so the graph is recorded
for these shapes. That is all a captured region needs: it is written as a task with the captured
shapes anyway. Branching on tensor values (``if x.sum() > 0``) still cannot be traced: it would bake
one example's path into the graph.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import operator
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
import torch.nn as nn

from kernelevo.tasks.einops_trace import teach_einops
from kernelevo.tasks.module_ops import ModulesAsOps

SHAPE_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "layout", "is_floating_point",
                              "is_complex", "size", "dim", "numel", "nelement", "stride", "element_size",
                              "is_contiguous", "get_device"})
"""Tensor attributes and methods that depend only on shapes, types and placement: answered from the
example run's value instead of recorded (``is_contiguous`` and ``stride`` depend on layout, which
the same code at the same shapes reproduces)."""


_MODULE_CALL, _MODULE_GETATTR = nn.Module.__call__, nn.Module.__getattr__
"""Taken at import: while tracing, ``torch.fx`` replaces both to record module calls and parameter
reads; an example value must come from the real ones."""


@contextlib.contextmanager
def _untraced() -> Iterator[None]:
    """``nn.Module`` as it is outside a trace, while an example value is computed."""
    traced = nn.Module.__call__, nn.Module.__getattr__
    nn.Module.__call__, nn.Module.__getattr__ = _MODULE_CALL, _MODULE_GETATTR  # type: ignore[method-assign]
    try:
        yield
    finally:
        nn.Module.__call__, nn.Module.__getattr__ = traced  # type: ignore[method-assign]


VALUE_SHAPED_FUNCTIONS = frozenset({torch.nonzero, torch.masked_select, torch.unique, torch.unique_consecutive,
                                    torch.bincount, torch.argwhere, torch.repeat_interleave})
VALUE_SHAPED_METHODS = frozenset({"nonzero", "masked_select", "unique", "unique_consecutive", "bincount",
                                  "argwhere", "repeat_interleave", "tolist", "item"})
"""Ops whose result's size depends on the input's values (and reads of values into Python): a shape
read from their result, or from anything computed from it, would hold for one example only."""
SIZE_ATTRIBUTES = frozenset({"shape", "size", "numel", "nelement", "stride"})


class ShapeDependentTrace(Exception):
    """The forward cannot be recorded even with its shapes fixed."""


class _ConcreteProxy(torch.fx.Proxy):
    """A proxy that knows the value it stands for in the example run."""

    tracer: ConcreteTracer

    def __getattr__(self, name: str) -> Any:
        if name in SHAPE_ATTRIBUTES:
            if name in SIZE_ATTRIBUTES:
                self.tracer.refuse_if_value_shaped(self.node)
            return getattr(self.tracer.value_of(self.node), name)
        return super().__getattr__(name)

    def __len__(self) -> int:
        self.tracer.refuse_if_value_shaped(self.node)
        return len(self.tracer.value_of(self.node))

    def __iter__(self) -> Iterator[Any]:
        self.tracer.refuse_if_value_shaped(self.node)
        value = self.tracer.value_of(self.node)
        if not isinstance(value, (tuple, list, torch.Tensor)):
            raise ShapeDependentTrace(f"iterating over {type(value).__name__} {self.node.name}")
        return iter([self[i] for i in range(len(value))])

    def __bool__(self) -> bool:
        raise ShapeDependentTrace(f"the forward branches on the value of {self.node.name} (data-dependent "
                                  "control flow): one example's branch would be recorded for every input")


class ConcreteTracer(ModulesAsOps):
    """``torch.fx.Tracer`` whose proxies carry example values (see the module)."""

    def __init__(self, inputs: list[Any], defaults: dict[str, Any] | None = None, fake_mode: Any = None) -> None:
        super().__init__()
        self.fake_mode = fake_mode
        """A ``FakeTensorMode`` the example values are computed in (shapes and dtypes, no data, no
        kernels), or None to compute them for real."""
        self.inputs = list(inputs)
        self.defaults = dict(defaults or {})
        self.values: dict[torch.fx.Node, Any] = {}
        self.value_shaped: set[torch.fx.Node] = set()
        self._placeholders = 0

    def refuse_if_value_shaped(self, node: torch.fx.Node) -> None:
        if node in self.value_shaped:
            raise ShapeDependentTrace(f"the forward reads the size of {node.name}, which depends on the values of "
                                      "its inputs (nonzero, a boolean mask, unique...): it would hold for one example")

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _ConcreteProxy(node, self)

    def value_of(self, node: torch.fx.Node) -> Any:
        if node not in self.values and node.op == "get_attr":
            with _untraced():
                self.values[node] = fetch_attribute(self.root, str(node.target))
        if node not in self.values:
            raise ShapeDependentTrace(f"no example value for {node.name}")
        return self.values[node]

    def _concrete(self, arg: Any) -> Any:
        return torch.fx.node.map_aggregate(arg, lambda a: self.value_of(a) if isinstance(a, torch.fx.Node) else a)

    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr: Any = None, *rest: Any, **more: Any) -> torch.fx.Proxy:
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, *rest, **more)
        node = proxy.node
        if kind == "placeholder":
            if self._placeholders < len(self.inputs):
                self.values[node] = self.inputs[self._placeholders]
            elif self._placeholders - len(self.inputs) < len(self.defaults):
                # a parameter fixed at its default (``unpassed_defaults``), in order (fx renames them)
                self.values[node] = list(self.defaults.values())[self._placeholders - len(self.inputs)]
            else:
                raise ShapeDependentTrace(f"forward takes more inputs than the {len(self.inputs)} given")
            self._placeholders += 1
            return proxy
        if (kind == "call_function" and target in VALUE_SHAPED_FUNCTIONS) or (
                kind == "call_method" and target in VALUE_SHAPED_METHODS) or any(
                a in self.value_shaped for a in node.all_input_nodes):
            self.value_shaped.add(node)
        values_args, values_kwargs = self._concrete(node.args), self._concrete(node.kwargs)
        if kind == "call_function" and target is operator.getitem and _boolean_index(values_args):
            self.value_shaped.add(node)
        with torch.no_grad(), _untraced(), self.fake_mode or contextlib.nullcontext():
            if kind == "get_attr":
                self.values[node] = fetch_attribute(self.root, str(target))
            elif kind == "call_function":
                self.values[node] = target(*values_args, **values_kwargs)
            elif kind == "call_method":
                self.values[node] = getattr(values_args[0], target)(*values_args[1:], **values_kwargs)
            elif kind == "call_module":
                self.values[node] = self.root.get_submodule(str(target))(*values_args, **values_kwargs)
        return proxy


def _boolean_index(args: tuple) -> bool:
    """``x[mask]`` with a boolean tensor among the indices: as many results as the mask has Trues."""
    index = args[1] if len(args) > 1 else None
    parts = index if isinstance(index, (tuple, list)) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


def fetch_attribute(root: nn.Module, qualified: str) -> Any:
    """``root``'s attribute at a dotted name (``blocks.0.scale``), read as nn.Module reads it."""
    value: Any = root
    for part in qualified.split("."):
        value = builtins.getattr(value, part)
    return value


def unpassed_defaults(model: nn.Module, inputs: list[Any]) -> dict[str, Any]:
    """``forward``'s parameters past the ``inputs`` given, at their defaults (``mask=None``): fixed
    while tracing, so ``if mask is not None`` takes the branch a call with these inputs takes."""
    parameters = list(inspect.signature(model.forward).parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    later = positional[len(inputs):] + [p for p in parameters if p.kind == p.KEYWORD_ONLY]
    # only plain values: a tuple or a tensor as a fixed argument does not survive torch.fx's code generation
    return {p.name: p.default for p in later if p.default is None or isinstance(p.default, (bool, int, float, str))}


def refuse_variable_arguments(model: nn.Module) -> None:
    """``forward(*xs)`` or ``forward(**kw)``: the example inputs cannot be matched to what the graph
    would record, so the trace at fixed shapes is not attempted."""
    for p in inspect.signature(model.forward).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ShapeDependentTrace(f"forward takes {'*' if p.kind == p.VAR_POSITIONAL else '**'}{p.name}: "
                                      "its inputs cannot be matched to a recorded graph")


def concrete_graph(model: nn.Module, inputs: list[Any], fake_mode: Any = None) -> torch.fx.Graph:
    """``model``'s forward as a graph recorded at the shapes of ``inputs`` (see the module); with
    ``fake_mode``, the traced values are computed in it (``inputs`` are its fake tensors). Code of
    the forward that touches no traced value (a constant mask built from sizes) still runs for real:
    its result is a constant of the graph and must hold data."""
    refuse_variable_arguments(model)
    teach_einops(_ConcreteProxy)
    defaults = unpassed_defaults(model, inputs)
    return ConcreteTracer(inputs, defaults, fake_mode).trace(model, concrete_args=defaults or None)


def concrete_trace(model: nn.Module, inputs: list[Any]) -> torch.fx.GraphModule:
    """:func:`concrete_graph` as a GraphModule over ``model``."""
    return torch.fx.GraphModule(model, concrete_graph(model, inputs), model.__class__.__name__)
