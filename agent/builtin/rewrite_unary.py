"""Functions of one tensor written as the ops they are made of (used by ``rewrite_pointwise``): the
inverse trig and hyperbolic functions, ``atan2``, rounding and its relatives, and tests of a value
(``isnan``, ``signbit``). Accuracy as that module says."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from kernelevo.agent.builtin.rewrite_in_place import option
from kernelevo.agent.builtin.rewrite_ops import Node, Ops, signed_negative


def composite(build: Callable[[Ops, Node], Node]) -> Callable[[Ops, Node], Node | None]:
    """A rewrite of a function of one tensor and no options."""
    def rewrite(o: Ops, node: Node) -> Node | None:
        x = option(node, "input", 0, None)
        if not isinstance(x, Node) or len(node.args) > 1 or set(node.kwargs) - {"input"}:
            return None
        return build(o, x)
    return rewrite


def _asin(o: Ops, x: Node) -> Node:
    """``atan(x / sqrt((1 - x)(1 + x)))``: +-pi/2 at +-1, NaN beyond."""
    return o.unary(torch.atan, o.div(x, o.unary(torch.sqrt, o.mul(o.sub(1.0, x), o.add(1.0, x)))))


def atan2(o: Ops, node: Node) -> Node | None:
    """The angle of the point (x, y) as IEEE defines it, signed zeros included: ``atan(y / x)``, turned
    by pi where ``x`` is negative or -0.0 (towards ``y``'s sign bit), and ``y`` itself where both are 0
    (``0 / 0`` would be NaN)."""
    y, x = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(y, Node) and isinstance(x, Node)):
        return None
    both_zero = o.both(o.call(operator.eq, y, 0.0), o.call(operator.eq, x, 0.0))
    base = o.unary(torch.atan, o.where(both_zero, y, o.div(y, x)))
    turned = o.where(signed_negative(o, y), o.sub(base, math.pi), o.add(base, math.pi))
    return o.where(signed_negative(o, x), turned, base)


def _asinh(o: Ops, x: Node) -> Node:
    """``sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))``: no cancellation near 0."""
    a = o.unary(torch.abs, x)
    square = o.mul(a, a)
    inner = o.add(a, o.div(square, o.add(1.0, o.unary(torch.sqrt, o.add(square, 1.0)))))
    return o.mul(o.unary(torch.sign, x), o.unary(torch.log1p, inner))


def _acosh(o: Ops, x: Node) -> Node:
    """``log1p((x - 1) + sqrt((x - 1)(x + 1)))``."""
    below = o.sub(x, 1.0)
    return o.unary(torch.log1p, o.add(below, o.unary(torch.sqrt, o.mul(below, o.add(x, 1.0)))))


LN2 = math.log(2.0)
LARGE_EXP = 88.0
"""Past this, exp(x) is near fp32's largest value: e^x / 2 is taken as exp(x - ln 2), which stays finite
as far as sinh and cosh do."""


def _sinh(o: Ops, x: Node) -> Node:
    """``(expm1(x) - expm1(-x)) / 2`` (no cancellation near 0), ``sign(x) exp(|x| - ln 2)`` far out."""
    a = o.unary(torch.abs, x)
    near = o.mul(o.sub(o.unary(torch.expm1, x), o.unary(torch.expm1, o.unary(torch.neg, x))), 0.5)
    far = o.mul(o.unary(torch.sign, x), o.unary(torch.exp, o.sub(a, LN2)))
    return o.where(o.call(operator.gt, a, LARGE_EXP), far, near)


def _cosh(o: Ops, x: Node) -> Node:
    """``exp(|x| - ln 2) + exp(-|x|) / 2``: finite wherever cosh is."""
    a = o.unary(torch.abs, x)
    return o.add(o.unary(torch.exp, o.sub(a, LN2)), o.mul(o.unary(torch.exp, o.unary(torch.neg, a)), 0.5))


def _atanh(o: Ops, x: Node) -> Node:
    """``sign(x) log1p(2|x| / (1 - |x|)) / 2``: odd, so ``1 - |x|`` never rounds away a negative x's digits."""
    a = o.unary(torch.abs, x)
    half = o.mul(o.unary(torch.log1p, o.div(o.mul(a, 2.0), o.sub(1.0, a))), 0.5)
    return o.mul(o.unary(torch.sign, x), half)


def _round(o: Ops, x: Node) -> Node:
    """Half to even; values of 2^23 and more are integers already (``x + 0.5`` would round there)."""
    up = o.unary(torch.floor, o.add(x, 0.5))
    tie = o.call(operator.eq, o.sub(up, x), 0.5)
    odd = o.call(operator.ne, o.call(torch.fmod, up, 2.0), 0.0)
    even = o.where(o.both(tie, odd), o.sub(up, 1.0), up)
    return o.where(o.call(operator.ge, o.unary(torch.abs, x), 2.0**23), x, even)


UNARY_COMPOSITES: dict[Any, Callable[[Ops, Node], Node]] = {
    torch.tan: lambda o, x: o.div(o.unary(torch.sin, x), o.unary(torch.cos, x)),
    torch.asin: _asin,
    torch.acos: lambda o, x: o.sub(math.pi / 2, _asin(o, x)),
    torch.sinh: _sinh,
    torch.cosh: _cosh,
    torch.asinh: _asinh,
    torch.acosh: _acosh,
    torch.atanh: _atanh,
    torch.frac: lambda o, x: o.sub(x, o.unary(torch.trunc, x)),
    torch.round: _round,
    torch.log10: lambda o, x: o.mul(o.unary(torch.log, x), 1.0 / math.log(10.0)),
    torch.erfc: lambda o, x: o.sub(1.0, o.unary(torch.erf, x)),
    torch.sgn: lambda o, x: o.unary(torch.sign, x),
    torch.deg2rad: lambda o, x: o.mul(x, math.pi / 180.0),
    torch.rad2deg: lambda o, x: o.mul(x, 180.0 / math.pi),
    torch.sinc: lambda o, x: o.where(o.call(operator.eq, x, 0.0), 1.0, o.div(
        o.unary(torch.sin, o.mul(x, math.pi)), o.mul(x, math.pi))),
    torch.isnan: lambda o, x: o.call(operator.ne, x, x),
    torch.isinf: lambda o, x: o.call(operator.eq, o.unary(torch.abs, x), float("inf")),
    torch.isposinf: lambda o, x: o.call(operator.eq, x, float("inf")),
    torch.isneginf: lambda o, x: o.call(operator.eq, x, float("-inf")),
    torch.isfinite: lambda o, x: o.call(operator.lt, o.unary(torch.abs, x), float("inf")),
    torch.signbit: signed_negative,
}
