"""Recognise a task's op family from the structure of ``Model.forward`` (torch.fx), never its name."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.tasks.loader import import_task_module
from kernelevo.tasks.task import Task

UNARY = {
    torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh",
    F.tanh: "tanh", F.silu: "silu", torch.exp: "exp", torch.abs: "abs", torch.neg: "neg", operator.neg: "neg",
    F.gelu: "gelu",
}
UNARY_METHODS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "abs": "abs", "neg": "neg"}
UNARY_MODULES = {nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.GELU: "gelu"}
ROW_FUNCTIONS = {torch.softmax: "softmax", F.softmax: "softmax", torch.log_softmax: "log_softmax",
                 F.log_softmax: "log_softmax", torch.sum: "sum", torch.amax: "max"}
ROW_METHODS = {"softmax": "softmax", "log_softmax": "log_softmax", "sum": "sum", "amax": "max"}
ROW_MODULES = {nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax"}


@dataclass
class Family:
    """What the built-in policy recognised: ``kind`` is unary, softmax, log_softmax, sum or max."""

    kind: str
    dtype: str
    rank: int
    op: str | None = None
    """For ``unary``: which op (relu, sigmoid, ...)."""


class CannotCover(Exception):
    """The built-in policy has no template for this task; the message says why."""


def _dim_is_last(node: torch.fx.Node, rank: int, position: int = 1) -> bool:
    dim = node.kwargs.get("dim", node.args[position] if len(node.args) > position else None)
    return dim in (-1, rank - 1)


def recognise(task: Task) -> Family:
    """Trace the reference and match it against the families the built-in templates cover."""
    module = import_task_module(task.path, "small")
    try:
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        graph = torch.fx.symbolic_trace(model).graph
    except Exception as exc:
        raise CannotCover(f"the reference could not be traced with torch.fx ({type(exc).__name__}: {exc})") from None
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if len(tensors) != 1 or len(inputs) != 1 or not tensors[0].is_floating_point():
        raise CannotCover("the built-in templates cover single-input floating-point ops; this task takes "
                          f"{len(inputs)} input(s)")
    x = tensors[0]
    dtype = task.dtype or str(x.dtype).removeprefix("torch.")
    calls = [n for n in graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    if len(calls) != 1:
        raise CannotCover(f"the reference runs {len(calls)} ops; the built-in templates cover one op "
                          "(a unary elementwise op, softmax or log-softmax, or a sum or max over the last dim)")
    node = calls[0]
    rank = x.dim()
    kind = None
    if node.op == "call_function":
        kind = UNARY.get(node.target) or ROW_FUNCTIONS.get(node.target)
        if node.target is F.gelu and node.kwargs.get("approximate", "none") != "none":
            kind = None
    elif node.op == "call_method":
        kind = UNARY_METHODS.get(node.target) or ROW_METHODS.get(node.target)
    else:
        sub = model.get_submodule(node.target)
        kind = UNARY_MODULES.get(type(sub)) or ROW_MODULES.get(type(sub))
        if kind in ("softmax", "log_softmax") and sub.dim not in (-1, rank - 1):
            kind = None
        if isinstance(sub, nn.GELU) and sub.approximate != "none":
            kind = None
        if kind:
            return _family(kind, dtype, rank)
    if kind is None:
        target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
        raise CannotCover(f"no built-in template for `{target}`")
    if kind in ("softmax", "log_softmax", "sum", "max"):
        keepdim = node.kwargs.get("keepdim", False)
        if not _dim_is_last(node, rank) or keepdim or node.kwargs.get("dtype") is not None:
            raise CannotCover(f"{kind} is covered over the last dimension only (without keepdim or dtype)")
    return _family(kind, dtype, rank)


def _family(kind: str, dtype: str, rank: int) -> Family:
    if kind in ("softmax", "log_softmax", "sum", "max"):
        return Family(kind=kind, dtype=dtype, rank=rank)
    return Family(kind="unary", dtype=dtype, rank=rank, op=kind)
