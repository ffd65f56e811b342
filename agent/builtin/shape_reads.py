"""Reads of a tensor's sizes in the reference, answered with the traced sizes.

Real code writes ``F.layer_norm(x, x.shape[1:])``, ``(x.size(-1),)`` or ``x.size(-1) ** -0.5``.
``torch.fx`` records these reads as graph nodes; here each is answered with the value it had when the
reference was traced, and integer arithmetic on such values is carried out.

The reference is traced at a small size, and the kernels run at the task's own. A size is therefore
used in two ways. Where only structure counts (a normalized shape, checked against the input's last
dimensions and not copied into the kernel), any traced size serves. As a number in a kernel
(``x.size(-1) ** -0.5``) a size serves only if it is the same at the size being optimised; one that
is not, or not known to be, is :class:`Varying`, and the lowering refuses to use it as a number.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch.fx

NOT_A_SHAPE_READ = object()
"""What :func:`traced_value` returns for any other call."""
INTEGER_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                      operator.pow, operator.neg, operator.mod}
"""Pure arithmetic on numbers: folded when every argument is a number already known."""


@dataclass(frozen=True)
class Varying:
    """A size as traced that is not the same (or not known to be) at the size being optimised."""

    value: int | float


@dataclass(frozen=True)
class FullSizes:
    """What is known of the sizes being optimised: the inputs' shapes there, by placeholder name, and
    whether every input has there the shape it was traced with (then so does every value)."""

    inputs: dict[str, tuple[int, ...]]
    all_same: bool = False


def _shape_of(value: Any, full: FullSizes | None) -> tuple[int | Varying, ...] | None:
    meta = value.meta.get("tensor_meta") if isinstance(value, torch.fx.Node) else None
    if meta is None or not hasattr(meta, "shape"):
        return None
    traced = tuple(int(s) for s in meta.shape)
    if full is not None and full.all_same:
        return traced
    there = full.inputs.get(value.name) if full is not None and value.op == "placeholder" else None
    if there is None or len(there) != len(traced):
        return tuple(Varying(s) for s in traced)
    return tuple(s if s == t else Varying(s) for s, t in zip(traced, there, strict=True))


def _number(value: Any) -> int | float | None:
    if isinstance(value, Varying):
        return value.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def known_number(value: Any, values: dict[str, Any]) -> int | float | Varying | None:
    """``value`` as a number (or a :class:`Varying` one) if it is one, or names a node already folded
    to one; else None."""
    if isinstance(value, torch.fx.Node):
        value = values.get(value.name)
    return value if _number(value) is not None else None


def constant(value: Any, values: dict[str, Any]) -> Any:
    """``value`` with every node folded to a number or a tuple of numbers put in its place, at the
    traced size (a normalized shape written ``x.shape[1:]`` or ``(x.size(-1),)``: structure only);
    other nodes are left as they are."""
    if isinstance(value, Varying):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(constant(v, values) for v in value)
    if isinstance(value, torch.fx.Node):
        folded = values.get(value.name)
        if isinstance(folded, tuple) and all(_number(v) is not None for v in folded):
            return tuple(constant(v, values) for v in folded)
        if _number(folded) is not None:
            return constant(folded, values)
    return value


def traced_value(target: Any, name: str, method: bool, args: list[Any], kwargs: dict[str, Any],
                 values: dict[str, Any], full: FullSizes | None = None) -> Any:
    """The traced value of ``x.shape``, ``x.size()``, ``x.size(d)``, ``x.dim()``, ``x.ndim``,
    ``x.numel()``, ``len`` of a folded shape, or integer arithmetic on folded numbers (each size
    :class:`Varying` unless ``full`` shows it is the same at the size being optimised);
    :data:`NOT_A_SHAPE_READ` for any other call."""
    shape = _shape_of(args[0], full) if args else None
    if shape is not None:
        if target is getattr and args[1] in ("shape", "ndim"):
            return shape if args[1] == "shape" else len(shape)
        if method and name == "size":
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            return shape if dim is None else shape[dim] if isinstance(dim, int) else NOT_A_SHAPE_READ
        if method and name in ("dim", "ndimension"):
            return len(shape)
        if method and name in ("numel", "nelement"):
            total = math.prod(_number(s) for s in shape)
            return Varying(total) if any(isinstance(s, Varying) for s in shape) else total
    if target is len and args and isinstance(folded := constant(args[0], values), tuple):
        return len(folded)
    if target in INTEGER_ARITHMETIC and args and not kwargs:
        numbers = [known_number(a, values) for a in args]
        if all(n is not None for n in numbers) and any(isinstance(a, torch.fx.Node) for a in args):
            try:
                result = target(*(_number(n) for n in numbers))
            except (ArithmeticError, ValueError):
                return NOT_A_SHAPE_READ
            return Varying(result) if any(isinstance(n, Varying) for n in numbers) else result
    return NOT_A_SHAPE_READ
