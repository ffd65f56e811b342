"""Tracing a ``forward`` that builds tensors from sizes it reads (``torch.ones(x.size(1), x.size(1))``,
``torch.arange(x.shape[-1])``).

torch.fx records a torch function when a tensor proxy is among its arguments, but a factory's
arguments are sizes, so the call runs eagerly on proxies and fails. While this tracer runs, the
factories below are replaced in the ``torch`` namespace by wrappers that record a call whose
arguments hold a proxy as a node of the graph, and call the factory otherwise. Only the trusted
planner traces; a lock keeps two such traces (islands planning in threads) from patching at once,
and the factories found at import are put back however tracing ends.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx
import torch.nn as nn
from torch.utils import _pytree

from kernelevo.agent.builtin.attention_positions import attention_with_positions
from kernelevo.agent.builtin.keyword_arguments import leading_arguments_by_position
from kernelevo.agent.builtin.parametrized import expand_weight_norm
from kernelevo.agent.builtin.vocabulary import TRACED_CONSTANT

FACTORIES = ("ones", "zeros", "full", "empty", "arange", "eye", "linspace")
"""Deterministic factories: the random ones make nothing a candidate could reproduce."""
TYPE_INFOS = ("finfo", "iinfo")
"""``torch.finfo(x.dtype).min``: a limit of a dtype read in forward, recorded as :func:`type_info`."""
_ORIGINALS = {name: getattr(torch, name) for name in FACTORIES + TYPE_INFOS}
_PATCHING = threading.Lock()
LEAVES = (attention_with_positions,)
"""Calls the rewrites put in a graph, kept as calls when a part of it is traced again."""


class _AssignableProxy(torch.fx.Proxy):
    """A proxy that records an item assignment (``mask[:, 0] = True``) as an ``operator.setitem`` node,
    which :func:`rewrite_in_place.item_assignment` makes plain."""

    def __setitem__(self, index: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, index, value), {})


class SizeTracer(torch.fx.Tracer):
    """A tracer that also records the :data:`FACTORIES` called with sizes read from proxies, and
    buffers as graph values, so that a buffer sliced by a size read in forward
    (``self.bias[:, :, :t, :t]``) is recorded rather than sliced in Python."""

    proxy_buffer_attributes = True

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _AssignableProxy(node, self)

    def trace(self, root: nn.Module | Callable[..., Any],
              concrete_args: dict[str, Any] | None = None) -> torch.fx.Graph:
        with _factories_recorded(self):
            return super().trace(root, concrete_args)


def traced(model: nn.Module) -> torch.fx.GraphModule:
    """``model`` traced by torch.fx, or where a factory is called with sizes read in forward (a
    TypeError there), traced again with the factories recorded; calls given their leading arguments
    by keyword are rewritten with them by position (:mod:`keyword_arguments`). Where plain tracing
    computed a tensor during the trace (``self.slopes[:, None, None]``: torch.fx reads buffers as
    values), the model is traced again with buffers recorded, so the graph reads the module's own."""
    try:
        tracer = torch.fx.Tracer(autowrap_functions=LEAVES)
        graph = tracer.trace(model)
        gm = torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__)
        if _holds_folded_tensors(gm):
            with contextlib.suppress(Exception):  # where it cannot be traced so, the plain graph serves
                gm = symbolic_trace(model)  # a buffer's view recorded, not a copy of its values at trace time
    except TypeError:
        gm = symbolic_trace(model)
    expanded = expand_weight_norm(gm)
    if leading_arguments_by_position(gm.graph) or expanded:
        gm.recompile()
    return gm


def _holds_folded_tensors(gm: torch.fx.GraphModule) -> bool:
    """Whether tracing stored a tensor of more than one value it computed as a constant of the graph."""
    for node in gm.graph.nodes:
        if node.op == "get_attr" and str(node.target).startswith(TRACED_CONSTANT):
            value = getattr(gm, str(node.target), None)
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                return True
    return False


def symbolic_trace(model: nn.Module) -> torch.fx.GraphModule:
    """``model`` traced, its factories of traced sizes recorded as nodes."""
    tracer = SizeTracer(autowrap_functions=LEAVES)
    graph = tracer.trace(model)
    return torch.fx.GraphModule(tracer.root, graph, model.__class__.__name__)


def type_info(dtype: torch.dtype, kind: str, field: str) -> float | int:
    """``torch.finfo(dtype).field`` (``kind`` "finfo") or ``torch.iinfo(dtype).field``: the graph's form
    of a dtype's limit read in forward; :func:`shape_reads.fold_dtypes` folds it to its number."""
    return getattr(_ORIGINALS[kind](dtype), field)


class _TypeInfoRead:
    """What ``torch.finfo(proxy)`` returns while tracing: each field read is a :func:`type_info` node."""

    def __init__(self, tracer: torch.fx.Tracer, kind: str, dtype: torch.fx.Proxy) -> None:
        self._tracer, self._kind, self._dtype = tracer, kind, dtype

    def __getattr__(self, field: str) -> torch.fx.Proxy:
        if field.startswith("_"):
            raise AttributeError(field)
        return self._tracer.create_proxy("call_function", type_info, (self._dtype, self._kind, field), {})


def _type_info_recording(tracer: torch.fx.Tracer, kind: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], torch.fx.Proxy):
            return _TypeInfoRead(tracer, kind, args[0])
        return _ORIGINALS[kind](*args, **kwargs)

    return call


def _recording(tracer: torch.fx.Tracer, factory: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if any(isinstance(leaf, torch.fx.Proxy) for leaf in _pytree.tree_leaves((args, kwargs))):
            return tracer.create_proxy("call_function", factory, args, kwargs)
        return factory(*args, **kwargs)

    return call


@contextlib.contextmanager
def _factories_recorded(tracer: torch.fx.Tracer) -> Iterator[None]:
    with _PATCHING:
        try:
            for name in FACTORIES:
                setattr(torch, name, _recording(tracer, _ORIGINALS[name]))
            for name in TYPE_INFOS:
                setattr(torch, name, _type_info_recording(tracer, name))
            yield
        finally:
            for name, factory in _ORIGINALS.items():
                setattr(torch, name, factory)
