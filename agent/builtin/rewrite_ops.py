"""The node builder and tests the graph rewrites share (``rewrite_pointwise``, ``rewrite_unary``)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.rewrite_in_place import is_number

Node = torch.fx.Node
Value = Any  # a Node or a Python number


class Ops:
    """Builds nodes before the node being rewritten; each method is the torch op of its name."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph

    def call(self, target: Any, *args: Any, **kwargs: Any) -> Node:
        return self.graph.call_function(target, args, kwargs)

    def add(self, a: Value, b: Value) -> Node:
        return self.call(operator.add, a, b)

    def sub(self, a: Value, b: Value) -> Node:
        return self.call(operator.sub, a, b)

    def mul(self, a: Value, b: Value) -> Node:
        return self.call(operator.mul, a, b)

    def div(self, a: Value, b: Value) -> Node:
        return self.call(operator.truediv, a, b)

    def where(self, condition: Node, a: Value, b: Value) -> Node:
        return self.call(torch.where, condition, a, b)

    def both(self, a: Node, b: Node) -> Node:
        return self.call(torch.logical_and, a, b)

    def unary(self, target: Any, x: Value) -> Node:
        return self.call(target, x)


def operand(value: Any) -> bool:
    return isinstance(value, Node) or is_number(value)


def signed_negative(o: Ops, v: Node) -> Node:
    """``v``'s sign bit as a truth value: below 0, or -0.0 (whose reciprocal is -inf); NaN is not."""
    zero = o.call(operator.eq, v, 0.0)
    return o.call(torch.logical_or, o.call(operator.lt, v, 0.0),
                  o.both(zero, o.call(operator.lt, o.div(1.0, v), 0.0)))


def rank(x: Any) -> int | None:
    """The number of dims of ``x`` (a node with its shape propagated), None where it is not known."""
    shape = getattr(x.meta.get("tensor_meta"), "shape", None) if isinstance(x, Node) else None
    return None if shape is None else len(shape)


def replace_each(gm: torch.fx.GraphModule, rewrite: Callable[[torch.fx.Graph, Node], Node | None]) -> bool:
    """Each node of ``gm`` for which ``rewrite(graph, node)`` (building before the node) gives a value
    replaced by it; True when one was."""
    changed = False
    for node in list(gm.graph.nodes):
        with gm.graph.inserting_before(node):
            result = rewrite(gm.graph, node)
        if result is None:
            continue
        node.replace_all_uses_with(result)
        gm.graph.erase_node(node)
        changed = True
    return changed


def float_node(x: Any) -> bool:
    meta = getattr(x, "meta", {}).get("tensor_meta")
    return meta is not None and meta.dtype.is_floating_point
