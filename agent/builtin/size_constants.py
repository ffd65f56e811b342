"""Numbers in ``forward`` that change with the task's size.

A reference is traced at a small size, and tracing writes every Python number ``forward`` computes
into the graph as a constant: ``x * dim ** -0.5`` with a module-level ``dim`` becomes ``x * 0.0156``
traced at the small size, but ``x * 0.0078`` at the size being optimised. A kernel holding the first
would be wrong at the task's own size. This compares the arithmetic of the graphs traced at both
sizes and refuses, with the reason, a graph whose arithmetic uses a number that differs; sizes that
views, slices and factories take are left to the planners, which read them at run time or check them
at the full size.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import (
    BINARY_METHODS,
    BINARY_TARGETS,
    COMPARE_METHODS,
    COMPARE_TARGETS,
    UNARY_TARGETS,
)

ARITHMETIC_TARGETS = {*BINARY_TARGETS, *COMPARE_TARGETS, *UNARY_TARGETS, operator.floordiv, operator.mod,
                      torch.clamp, torch.clip, torch.where, torch.masked_fill, F.hardtanh, F.softplus, F.elu,
                      F.leaky_relu, F.threshold}
ARITHMETIC_METHODS = {*BINARY_METHODS, *COMPARE_METHODS, "clamp", "clamp_min", "clamp_max", "clip",
                      "masked_fill", "where", "fill_"}
"""Calls whose numbers become constants of a kernel."""


def _numbers(node: torch.fx.Node) -> list[float]:
    leaves: list[Any] = []
    torch.fx.node.map_aggregate((node.args, node.kwargs), leaves.append)
    return [v for v in leaves if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _arithmetic(node: torch.fx.Node) -> bool:
    if node.op == "call_function":
        return node.target in ARITHMETIC_TARGETS
    return node.op == "call_method" and node.target in ARITHMETIC_METHODS


def refuse_numbers_that_change(small: torch.nn.Module, full: torch.nn.Module | None) -> None:
    """CannotCover if an arithmetic call of ``small``'s forward uses a number that is another at the
    size being optimised (``full``: the model there, None where it cannot be built); nothing where
    the two graphs cannot be traced or matched node for node (the judge still checks every kernel at
    the task's own size)."""
    if full is None:
        return
    try:
        nodes = list(torch.fx.symbolic_trace(small).graph.nodes), list(torch.fx.symbolic_trace(full).graph.nodes)
    except Exception:  # noqa: BLE001 (a forward fx cannot trace is refused with its reason elsewhere)
        return
    traced, there = nodes
    if len(traced) != len(there):
        return
    for node, other in zip(traced, there, strict=True):
        if (node.op, node.target) != (other.op, other.target):
            return
        if not _arithmetic(node):
            continue
        for value, full_value in zip(_numbers(node), _numbers(other), strict=False):
            if value != full_value:
                raise CannotCover(f"`{node.name}` uses the number {value!r} at the traced size and {full_value!r} "
                                  "at the size being optimised (a value read in forward that follows the task's "
                                  "sizes); a kernel holds its numbers as constants")
