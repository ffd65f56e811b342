"""The reference's ops the lowering knows, by target, method name or module type, and the primitive
each lowers to (``expressions.elementwise`` names the primitives)."""

from __future__ import annotations

import operator
from collections.abc import Collection
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

LOW_PRECISION = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


# Elementwise ops of the reference, by target, as the primitive they lower to.
UNARY_TARGETS: dict[Any, str] = {
    torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh",
    F.tanh: "tanh", F.silu: "silu", torch.exp: "exp", torch.log: "log", torch.abs: "abs", torch.neg: "neg",
    operator.neg: "neg", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.erf: "erf", torch.square: "square",
    torch.reciprocal: "reciprocal", F.mish: "mish", F.softplus: "softplus", F.hardswish: "hardswish",
    F.hardsigmoid: "hardsigmoid", F.elu: "elu", torch.nn.functional.relu6: "relu6", F.leaky_relu: "leaky_relu",
    torch.selu: "selu", F.selu: "selu", F.logsigmoid: "logsigmoid", F.softsign: "softsign",
    F.tanhshrink: "tanhshrink", torch.sin: "sin", torch.cos: "cos", torch.floor: "floor", torch.ceil: "ceil",
    torch.sign: "sign", torch.expm1: "expm1", torch.log1p: "log1p", torch.log2: "log2", torch.exp2: "exp2",
    torch.atan: "atan", torch.arctan: "atan", torch.trunc: "trunc", torch.fix: "trunc",
}
UNARY_METHODS = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "abs": "abs", "neg": "neg",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf", "square": "square", "reciprocal": "reciprocal",
    "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil", "sign": "sign", "expm1": "expm1",
    "log1p": "log1p", "log2": "log2", "exp2": "exp2", "atan": "atan", "arctan": "atan", "trunc": "trunc",
    "fix": "trunc",
}
UNARY_MODULES: dict[type, str] = {
    nn.ReLU: "relu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu", nn.Mish: "mish",
    nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.ReLU6: "relu6", nn.SELU: "selu",
    nn.LogSigmoid: "logsigmoid", nn.Softsign: "softsign", nn.Tanhshrink: "tanhshrink",
}
BINARY_TARGETS: dict[Any, str] = {
    operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub", operator.mul: "mul",
    torch.mul: "mul", operator.truediv: "div", torch.div: "div", torch.maximum: "maximum",
    torch.minimum: "minimum", operator.pow: "pow", torch.pow: "pow", torch.multiply: "mul", torch.subtract: "sub",
    torch.divide: "div", torch.true_divide: "div", torch.fmod: "fmod",
}
BINARY_METHODS = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow", "maximum": "maximum",
                  "minimum": "minimum", "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
                  "fmod": "fmod"}
COMPARE_TARGETS: dict[Any, str] = {
    operator.gt: "gt", torch.gt: "gt", torch.greater: "gt", operator.lt: "lt", torch.lt: "lt", torch.less: "lt",
    operator.ge: "ge", torch.ge: "ge", torch.greater_equal: "ge", operator.le: "le", torch.le: "le",
    torch.less_equal: "le", operator.eq: "eq", torch.eq: "eq", operator.ne: "ne", torch.ne: "ne",
    torch.not_equal: "ne", torch.logical_and: "logical_and", torch.logical_or: "logical_or",
    torch.logical_xor: "logical_xor",
}
"""Comparisons and logic: each gives a truth value, which the kernels hold as 1.0 or 0.0."""
COMPARE_METHODS = {"gt": "gt", "lt": "lt", "ge": "ge", "le": "le", "eq": "eq", "ne": "ne", "greater": "gt",
                   "less": "lt", "logical_and": "logical_and", "logical_or": "logical_or",
                   "logical_xor": "logical_xor"}
BITWISE_ON_BOOL = {operator.and_: "logical_and", operator.or_: "logical_or", operator.xor: "logical_xor",
                   torch.bitwise_and: "logical_and", torch.bitwise_or: "logical_or"}
"""``&``, ``|`` and ``^``: logic where both sides are truth values (bitwise arithmetic on integers is not
covered)."""
PASS_METHODS = {"contiguous", "float", "to", "type_as", "half", "bfloat16", "double", "clone", "detach", "long", "bool"}
IDENTITY_MODULES = (nn.Identity, nn.Dropout)
REDUCE_TARGETS = {torch.sum: "sum", torch.mean: "mean", torch.amax: "amax", torch.amin: "amin",
                  torch.argmax: "argmax", torch.argmin: "argmin", torch.max: "max", torch.min: "min",
                  torch.var: "var", torch.std: "std", torch.logsumexp: "logsumexp"}
REDUCE_METHODS = {"sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin", "argmax": "argmax",
                  "argmin": "argmin", "max": "max", "min": "min", "var": "var", "std": "std",
                  "logsumexp": "logsumexp"}
ROW_FUNCTIONS = {torch.softmax: "softmax", F.softmax: "softmax", torch.log_softmax: "log_softmax",
                 F.log_softmax: "log_softmax", F.layer_norm: "layer_norm"}
if hasattr(F, "rms_norm"):
    ROW_FUNCTIONS[F.rms_norm] = "rms_norm"
POW_EXPONENTS = {2.0: "square", 3.0: "cube", 0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal", 1.0: "identity"}

# Views: a new shape on the same elements, by method name or by torch function.
VIEW_METHODS = {"view", "reshape", "unsqueeze", "squeeze", "flatten"}
VIEW_FUNCTIONS = {torch.unsqueeze: "unsqueeze", torch.squeeze: "squeeze", torch.reshape: "reshape",
                  torch.flatten: "flatten"}


def view_method(node: torch.fx.Node) -> str | None:
    """The view ``node`` takes, as its method's name, whether called as a method or a torch function; else None."""
    if node.op == "call_method":
        return node.target if node.target in VIEW_METHODS else None
    return VIEW_FUNCTIONS.get(node.target) if node.op == "call_function" else None


def reads_metadata(node: torch.fx.Node) -> bool:
    """``x.size(1)``, ``x.shape``, ``x.dim()``, ``x.dtype``: a read of what a tensor is, not of its values."""
    if node.op == "call_method":
        return node.target in ("size", "dim")
    return node.op == "call_function" and node.target is getattr and len(node.args) > 1 and \
        node.args[1] in ("shape", "dtype", "device", "ndim")


def is_call(node: Any, functions: Collection[Any], methods: Collection[str] = ()) -> bool:
    """Is ``node`` a call of one of ``functions``, or of one of ``methods`` on a tensor?"""
    if not isinstance(node, torch.fx.Node):
        return False
    return (node.op == "call_function" and node.target in functions) or (
        node.op == "call_method" and node.target in methods)


def plain_int(a: Any) -> bool:
    """``a`` is an int and not a bool: bool is a subclass of int, and ``True`` is no size or dimension."""
    return isinstance(a, int) and not isinstance(a, bool)


TRACED_CONSTANT = "_tensor_constant"
"""How torch.fx names a tensor made in ``forward`` (``torch.tensor(0.5)``): kept on the traced module,
which a generated ModelNew is not, so it is never read through ``self``."""


def attribute_at(module: Any, path: str) -> Any:
    """``module``'s attribute at a dotted path (``blocks.0.weight``), or None where there is none."""
    value: Any = module
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


def graph_calls(gm: torch.fx.GraphModule) -> tuple[list[torch.fx.Node], list[torch.fx.Node]]:
    """(the graph's calls in order, its inputs): what a template of one whole op reads first."""
    nodes = list(gm.graph.nodes)
    return ([n for n in nodes if n.op not in ("placeholder", "output", "get_attr")],
            [n for n in nodes if n.op == "placeholder"])


def returns_only(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Does the graph return ``node`` and nothing else (no tuple, no input beside or instead of it)?"""
    return next(n for n in gm.graph.nodes if n.op == "output").args[0] is node


def drop_unused_ancestors(gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """Erase the calls ``node`` was computed from (and ``node``) that nothing reads any more, once a
    rewrite has replaced it: the scores and weights of attention written by hand, a mask and the sizes
    it was made of."""
    made_of, pending = {node}, list(node.all_input_nodes)
    while pending:
        n = pending.pop()
        if n not in made_of:
            made_of.add(n)
            pending.extend(n.all_input_nodes)
    for dead in reversed([n for n in gm.graph.nodes if n in made_of]):
        if not dead.users and dead.op in ("call_function", "call_method", "call_module"):
            gm.graph.erase_node(dead)


class _Reached(Exception):
    """The node a :class:`Capture` stops before was reached."""


class Capture(torch.fx.Interpreter):
    """Runs a graph keeping every node's value by name (``seen``; an Interpreter frees each value after
    its last use); with ``stop``, runs up to that node and no further (:meth:`run_up_to`)."""

    def __init__(self, gm: torch.fx.GraphModule, stop: torch.fx.Node | None = None) -> None:
        super().__init__(gm)
        self.seen: dict[str, Any] = {}
        self.stop = stop

    def run_node(self, n: torch.fx.Node) -> Any:
        if n is self.stop:
            raise _Reached
        self.seen[n.name] = value = super().run_node(n)
        return value

    def run_up_to(self, *args: Any) -> dict[str, Any]:
        """Every value up to ``stop`` (or all of them), by name."""
        try:
            self.run(*args)
        except _Reached:
            pass
        return self.seen
