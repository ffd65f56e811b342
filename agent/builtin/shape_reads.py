"""Reads of a tensor's sizes in the reference, answered with the traced sizes.

Real code writes ``F.layer_norm(x, x.shape[1:])``, ``(x.size(-1),)`` or ``x.size(-1) ** -0.5``.
``torch.fx`` records these reads as graph nodes; here each is answered with the value it had when the
reference was traced, and integer arithmetic on such values is carried out. The templates then use
them as they use the sizes a file writes out (a normalized shape is checked against the input's last
dimensions, not copied into the kernel), and every candidate is judged at the task's own sizes.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch.fx

NOT_A_SHAPE_READ = object()
"""What :func:`traced_value` returns for any other call."""
INTEGER_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                      operator.pow, operator.neg, operator.mod}
"""Pure arithmetic on numbers: folded when every argument is a number already known."""


def _shape_of(value: Any) -> tuple[int, ...] | None:
    meta = value.meta.get("tensor_meta") if isinstance(value, torch.fx.Node) else None
    return tuple(int(s) for s in meta.shape) if meta is not None and hasattr(meta, "shape") else None


def known_number(value: Any, values: dict[str, Any]) -> int | float | None:
    """``value`` as a number if it is one, or names a node already folded to one; else None."""
    if isinstance(value, torch.fx.Node):
        value = values.get(value.name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def constant(value: Any, values: dict[str, Any]) -> Any:
    """``value`` with every node folded to a number or a tuple of numbers put in its place (a
    normalized shape written ``x.shape[1:]`` or ``(x.size(-1),)``); other nodes are left as they are."""
    if isinstance(value, (list, tuple)):
        return type(value)(constant(v, values) for v in value)
    if isinstance(value, torch.fx.Node):
        folded = values.get(value.name)
        if isinstance(folded, tuple) and all(known_number(v, {}) is not None for v in folded):
            return folded
        if known_number(folded, {}) is not None:
            return folded
    return value


def traced_value(target: Any, name: str, method: bool, args: list[Any], kwargs: dict[str, Any],
                 values: dict[str, Any]) -> Any:
    """The traced value of ``x.shape``, ``x.size()``, ``x.size(d)``, ``x.dim()``, ``x.ndim``,
    ``x.numel()``, ``len`` of a folded shape, or integer arithmetic on folded numbers;
    :data:`NOT_A_SHAPE_READ` for any other call."""
    shape = _shape_of(args[0]) if args else None
    if shape is not None:
        if target is getattr and args[1] in ("shape", "ndim"):
            return shape if args[1] == "shape" else len(shape)
        if method and name == "size":
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            return shape if dim is None else shape[dim] if isinstance(dim, int) else NOT_A_SHAPE_READ
        if method and name in ("dim", "ndimension"):
            return len(shape)
        if method and name in ("numel", "nelement"):
            return math.prod(shape)
    if target is len and args and isinstance(folded := constant(args[0], values), tuple):
        return len(folded)
    if target in INTEGER_ARITHMETIC and args and not kwargs:
        numbers = [known_number(a, values) for a in args]
        if all(n is not None for n in numbers) and any(isinstance(a, torch.fx.Node) for a in args):
            try:
                return target(*numbers)
            except (ArithmeticError, ValueError):
                return NOT_A_SHAPE_READ
    return NOT_A_SHAPE_READ
