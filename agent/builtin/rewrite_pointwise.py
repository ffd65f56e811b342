"""Pointwise functions written in the traced graph as the primitives the lowering knows, computed as
torch computes them, so that a reference using ``lerp``, ``hypot``, ``fmod``, ``asinh`` or ``x ** 1.5``
is covered like one using ``add`` and ``exp``. Each rewrite is plain torch (a part kept in torch still
runs as written); a call whose options a rewrite does not follow, or that writes in place, is left as
it was, and the lowering then says it is not covered.

Accuracy: every rewrite follows torch's own formula where torch has one (``lerp`` switches form at a
weight of 0.5, ``remainder`` and ``floor_divide`` start from ``fmod``), and otherwise mostly uses a
form without cancellation (``sinh`` from ``expm1``, ``asinh`` and ``atanh`` from ``log1p``); ``erfc`` is
``1 - erf``, exact in absolute terms but not relative past x of about 3. ``pow`` with an exponent
that is not a small integer goes through ``exp2(y * log2|x|)``: a relative error of about
``|y log2 x|`` units in the last place. In bf16 and fp16 a rewrite computes in fp32 and rounds once,
as torch's own kernel for the function does. Edge values follow torch for NaN and the infinities
where it matters to a comparison; the sign of a zero result is not always torch's.

In-place arithmetic and tensors of one value are handled first (``rewrite_in_place``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.rewrite_in_place import (
    fold_filled_like,
    is_number,
    item_assignment,
    option,
    out_of_place,
    remove_dead_values,
    scatter_numbers,
    writes_in_place,
)
from kernelevo.agent.builtin.rewrite_ops import Node, Ops, Value, float_node, operand, signed_negative
from kernelevo.agent.builtin.rewrite_unary import UNARY_COMPOSITES, atan2, composite
from kernelevo.agent.builtin.vocabulary import LOW_PRECISION


# -- two inputs ------------------------------------------------------------------------------------
def _lerp(o: Ops, node: Node) -> Node | None:
    """torch's form: ``a + w (b - a)`` for ``|w| < 0.5``, else ``b - (b - a)(1 - w)``."""
    a, b, w = option(node, "input", 0, None), option(node, "end", 1, None), option(node, "weight", 2, None)
    if not (isinstance(a, Node) and operand(b) and operand(w)):
        return None
    diff = o.sub(b, a)
    low = o.add(a, o.mul(w, diff))
    high = o.sub(b, o.mul(diff, o.sub(1.0, w)))
    if is_number(w):
        return low if abs(w) < 0.5 else high
    return o.where(o.call(operator.lt, o.unary(torch.abs, w), 0.5), low, high)


def _addc(o: Ops, node: Node) -> Node | None:
    """``addcmul``: ``x + value * t1 * t2``; ``addcdiv``: ``x + value * (t1 / t2)``."""
    x, t1, t2 = (option(node, name, k, None) for k, name in enumerate(("input", "tensor1", "tensor2")))
    value = node.kwargs.get("value", 1.0)
    if not (isinstance(x, Node) and operand(t1) and operand(t2) and is_number(value)):
        return None
    term = o.mul(t1, t2) if node.target is torch.addcmul else o.div(t1, t2)
    return o.add(x, o.mul(value, term) if value != 1 else term)


def _hypot(o: Ops, node: Node) -> Node | None:
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (operand(a) and operand(b)):
        return None
    return o.unary(torch.sqrt, o.add(o.mul(a, a), o.mul(b, b)))


def _logaddexp(o: Ops, node: Node) -> Node | None:
    """``max(a, b) + log1p(exp(-|a - b|))``: no exp of a large value."""
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(a, Node) and operand(b)):
        return None
    tail = o.unary(torch.log1p, o.unary(torch.exp, o.unary(torch.neg, o.unary(torch.abs, o.sub(a, b)))))
    result = o.add(o.call(torch.maximum, a, b) if isinstance(b, Node) else o.call(torch.clamp, a, min=b), tail)
    # two equal infinities: their difference is NaN, their log-sum-exp the infinity itself
    same_infinity = o.both(o.call(operator.eq, a, b), o.call(operator.eq, o.unary(torch.abs, a), float("inf")))
    return o.where(same_infinity, a, result)


def _xlogy(o: Ops, node: Node) -> Node | None:
    """``x log y``, 0 where ``x`` is 0 (unless ``y`` is NaN)."""
    x, y = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(x, Node) and operand(y)) or x is y:
        return None  # x log x is a primitive of its own
    zero = o.call(operator.eq, x, 0.0)
    if isinstance(y, Node):
        zero = o.both(zero, o.call(operator.eq, y, y))
    log_y = o.unary(torch.log, y) if isinstance(y, Node) else (math.log(y) if y > 0 else
                                                               float("-inf") if y == 0 else float("nan"))
    return o.where(zero, 0.0, o.mul(x, log_y))


def _copysign(o: Ops, node: Node) -> Node | None:
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(a, Node) and operand(b)):
        return None
    size = o.unary(torch.abs, a)
    if is_number(b):
        return size if math.copysign(1.0, b) > 0 else o.unary(torch.neg, size)
    return o.where(signed_negative(o, b), o.unary(torch.neg, size), size)


def _heaviside(o: Ops, node: Node) -> Node | None:
    x, at_zero = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(x, Node) and operand(at_zero)):
        return None
    return o.where(o.call(operator.eq, x, 0.0), at_zero, o.where(o.call(operator.gt, x, 0.0), 1.0, 0.0))


def _fmax_fmin(o: Ops, node: Node) -> Node | None:
    """The larger (smaller) of the two, a NaN counting only where both are NaN."""
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(a, Node) and isinstance(b, Node)):
        return None
    pick = o.call(torch.maximum if node.target is torch.fmax else torch.minimum, a, b)
    return o.where(o.call(operator.ne, a, a), b, o.where(o.call(operator.ne, b, b), a, pick))


def _remainder(o: Ops, node: Node) -> Node | None:
    """torch's: ``fmod``, moved by the divisor where its sign differs from the divisor's."""
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(a, Node) and operand(b)):
        return None
    mod = o.call(torch.fmod, a, b)
    differs = o.both(o.call(operator.ne, mod, 0.0),
                     o.call(operator.ne, o.call(operator.lt, mod, 0.0), o.call(operator.lt, b, 0.0))
                     if isinstance(b, Node) else o.call(operator.lt if b > 0 else operator.gt, mod, 0.0))
    return o.where(differs, o.add(mod, b), mod)


def _floor_divide(o: Ops, a: Node, b: Value) -> Node:
    """torch's floor division of floats: from ``fmod``, exact where ``a / b`` is an integer."""
    mod = o.call(torch.fmod, a, b)
    div = o.div(o.sub(a, mod), b)
    below = o.call(operator.lt, b, 0.0) if isinstance(b, Node) else (b < 0)
    moved = o.call(operator.ne, o.call(operator.lt, mod, 0.0), below) if isinstance(below, Node) else \
        o.call(operator.gt if below else operator.lt, mod, 0.0)
    div = o.where(o.both(o.call(operator.ne, mod, 0.0), moved), o.sub(div, 1.0), div)
    floor = o.unary(torch.floor, div)
    floor = o.where(o.call(operator.gt, o.sub(div, floor), 0.5), o.add(floor, 1.0), floor)
    result = o.where(o.call(operator.eq, div, 0.0), o.mul(div, 0.0), floor)  # keeps div's zero
    if isinstance(b, Node):  # by zero: the quotient itself (an infinity, or NaN for 0 / 0), as torch gives
        result = o.where(o.call(operator.eq, b, 0.0), o.div(a, b), result)
    return result


def _floor_divide_by(o: Ops, a: Node, b: Value) -> Node:
    return o.div(a, b) if is_number(b) and b == 0 else _floor_divide(o, a, b)


def _floor_divide_call(o: Ops, node: Node) -> Node | None:
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not (isinstance(a, Node) and operand(b)) or not float_node(a):
        return None
    return _floor_divide_by(o, a, b)


def _div_rounded(o: Ops, node: Node) -> Node | None:
    """``div`` with ``rounding_mode``: ``trunc`` of the quotient, or the floor division."""
    mode = node.kwargs.get("rounding_mode")
    a, b = option(node, "input", 0, None), option(node, "other", 1, None)
    if mode not in ("trunc", "floor") or not (isinstance(a, Node) and operand(b)) or not float_node(a):
        return None
    return o.unary(torch.trunc, o.div(a, b)) if mode == "trunc" else _floor_divide_by(o, a, b)


def _add_alpha(o: Ops, node: Node) -> Node | None:
    """``add``/``sub`` with ``alpha``: the other operand scaled first."""
    alpha = node.kwargs.get("alpha")
    a, b = option(node, "input", 0, None), option(node, "other", 1, None)
    if alpha is None or not is_number(alpha) or not (isinstance(a, Node) and operand(b)):
        return None
    scaled = o.mul(b, alpha) if isinstance(b, Node) else b * alpha
    return o.add(a, scaled) if node.target is torch.add else o.sub(a, scaled)


# -- powers ----------------------------------------------------------------------------------------
def _power(o: Ops, x: Node, y: Value) -> Node:
    """``x ** y`` for any ``y``: small integers by multiplication, else ``exp2(y log2|x|)`` with the
    sign of an odd integer power and NaN for a negative base to a fraction, as torch gives."""
    if is_number(y) and float(y).is_integer() and 0 < abs(y) <= 8:
        result, base, n = None, x, abs(int(y))
        while n:
            if n & 1:
                result = base if result is None else o.mul(result, base)
            n >>= 1
            if n:
                base = o.mul(base, base)
        return result if y > 0 else o.div(1.0, result)
    size = o.unary(torch.exp2, o.mul(y, o.unary(torch.log2, o.unary(torch.abs, x))))
    negative = o.call(operator.lt, x, 0.0)
    if is_number(y):
        if not float(y).is_integer():
            return o.where(negative, float("nan"), size)
        return o.where(negative, o.unary(torch.neg, size), size) if int(y) % 2 else size
    whole = o.call(operator.eq, y, o.unary(torch.floor, y))
    odd = o.call(operator.ne, o.call(torch.fmod, y, 2.0), 0.0)
    signed = o.where(odd, o.unary(torch.neg, size), size)
    result = o.where(negative, o.where(whole, signed, float("nan")), size)
    return o.where(o.call(operator.eq, y, 0.0), 1.0, result)  # 0 ** 0 and NaN ** 0 are 1


KNOWN_EXPONENTS = {2.0, 3.0, 0.5, -0.5, -1.0, 1.0}
"""Exponents the lowering computes itself (``vocabulary.POW_EXPONENTS``)."""


def _pow(o: Ops, node: Node) -> Node | None:
    x, y = option(node, "input", 0, None), option(node, "exponent", 1, None)
    if isinstance(x, Node) and is_number(y) and float(y) not in KNOWN_EXPONENTS | {0.0}:
        return _power(o, x, y) if float_node(x) else None
    if isinstance(x, Node) and isinstance(y, Node) and float_node(x):
        return _power(o, x, y)
    if is_number(x) and isinstance(y, Node) and x > 0 and float_node(y):  # c ** y
        return o.unary(torch.exp2, o.mul(y, math.log2(x)))
    return None


# -- one input -------------------------------------------------------------------------------------
def _logit(o: Ops, node: Node) -> Node | None:
    x, eps = option(node, "input", 0, None), option(node, "eps", 1, None)
    if not isinstance(x, Node) or not (eps is None or is_number(eps)):
        return None
    z = x if eps is None else o.call(torch.clamp, x, min=float(eps), max=1.0 - float(eps))
    return o.unary(torch.log, o.div(z, o.sub(1.0, z)))


def _nan_to_num(o: Ops, node: Node) -> Node | None:
    x = option(node, "input", 0, None)
    nan, pos, neg = (option(node, name, k, None) for k, name in ((1, "nan"), (2, "posinf"), (3, "neginf")))
    if not isinstance(x, Node) or not float_node(x) or not all(v is None or is_number(v) for v in (nan, pos, neg)):
        return None
    largest = torch.finfo(x.meta["tensor_meta"].dtype).max
    out = o.where(o.call(operator.eq, x, float("inf")), largest if pos is None else float(pos), x)
    out = o.where(o.call(operator.eq, x, float("-inf")), -largest if neg is None else float(neg), out)
    return o.where(o.call(operator.ne, x, x), 0.0 if nan is None else float(nan), out)


def _shrink(o: Ops, node: Node) -> Node | None:
    """``hardshrink``: ``x`` outside ``[-l, l]``, else 0; ``softshrink``: moved towards 0 by ``l``."""
    x, lambd = option(node, "input", 0, None), option(node, "lambd", 1, 0.5)
    if not isinstance(x, Node) or not is_number(lambd):
        return None
    inside = o.both(o.call(operator.ge, x, -lambd), o.call(operator.le, x, lambd))
    if node.target is F.hardshrink:
        return o.where(inside, 0.0, x)
    inner = o.where(o.call(operator.ne, x, x), x, 0.0)  # NaN passes through, as torch's does
    return o.where(o.call(operator.gt, x, lambd), o.sub(x, lambd),
                   o.where(o.call(operator.lt, x, -lambd), o.add(x, lambd), inner))


def _threshold(o: Ops, node: Node) -> Node | None:
    x, limit, value = option(node, "input", 0, None), option(node, "threshold", 1, None), \
        option(node, "value", 2, None)
    if not isinstance(x, Node) or not is_number(limit) or not is_number(value):
        return None
    return o.where(o.call(operator.le, x, limit), float(value), x)


def _celu(o: Ops, node: Node) -> Node | None:
    x, alpha = option(node, "input", 0, None), option(node, "alpha", 1, 1.0)
    if not isinstance(x, Node) or not is_number(alpha) or alpha == 0:
        return None
    return o.where(o.call(operator.gt, x, 0.0), x, o.mul(o.unary(torch.expm1, o.div(x, alpha)), alpha))


def _rrelu(o: Ops, node: Node) -> Node | None:
    """Out of training, the slope is the middle of ``[lower, upper]``."""
    x = option(node, "input", 0, None)
    lower, upper = option(node, "lower", 1, 1.0 / 8), option(node, "upper", 2, 1.0 / 3)
    if not isinstance(x, Node) or option(node, "training", 3, False) is not False or \
            not (is_number(lower) and is_number(upper)):
        return None
    return o.call(F.leaky_relu, x, (lower + upper) / 2)


def _softmin(o: Ops, node: Node) -> Node | None:
    x, dim = option(node, "input", 0, None), option(node, "dim", 1, None)
    if not isinstance(x, Node) or not isinstance(dim, int) or node.kwargs.get("dtype") is not None:
        return None
    return o.call(F.softmax, o.unary(torch.neg, x), dim=dim)


def _clamp_tensors(o: Ops, node: Node) -> Node | None:
    """``clamp`` with a tensor bound: ``maximum`` with the lower, then ``minimum`` with the upper."""
    x, low, high = option(node, "input", 0, None), option(node, "min", 1, None), option(node, "max", 2, None)
    if not isinstance(x, Node) or not (isinstance(low, Node) or isinstance(high, Node)):
        return None
    if not all(v is None or operand(v) for v in (low, high)):
        return None
    out = x
    if low is not None:
        out = o.call(torch.maximum, out, low) if isinstance(low, Node) else o.call(torch.clamp, out, min=low)
    if high is not None:
        out = o.call(torch.minimum, out, high) if isinstance(high, Node) else o.call(torch.clamp, out, max=high)
    return out


def _dropout_off(o: Ops, node: Node) -> Node | None:
    """Dropout out of training, or of probability 0: its input."""
    x, p, training = option(node, "input", 0, None), option(node, "p", 1, 0.5), option(node, "training", 2, True)
    if not isinstance(x, Node) or (training is not False and p != 0) or option(node, "inplace", 3, False):
        return None
    return o.call(torch.clone, x)


def _clamp_one_side(o: Ops, node: Node) -> Node | None:
    x, bound = node.args[:2] if len(node.args) >= 2 else (None, None)
    if not isinstance(x, Node) or not is_number(bound):
        return None
    return o.call(torch.clamp, x, **{"min" if node.target is torch.clamp_min else "max": bound})


INPLACE_POSITION = {F.threshold: 3, F.celu: 2, F.rrelu: 4, F.dropout: 3}
"""Where a function takes ``inplace`` by position."""
REWRITES: dict[Any, Callable[[Ops, Node], Node | None]] = {
    torch.lerp: _lerp, torch.addcmul: _addc, torch.addcdiv: _addc, torch.hypot: _hypot,
    torch.logaddexp: _logaddexp, torch.xlogy: _xlogy, torch.copysign: _copysign, torch.heaviside: _heaviside,
    torch.fmax: _fmax_fmin, torch.fmin: _fmax_fmin, torch.remainder: _remainder,
    torch.floor_divide: _floor_divide_call, torch.div: _div_rounded, torch.add: _add_alpha, torch.sub: _add_alpha,
    torch.pow: _pow, operator.pow: _pow, torch.atan2: atan2, torch.arctan2: atan2,
    torch.logit: _logit, torch.special.logit: _logit, torch.nan_to_num: _nan_to_num,
    F.hardshrink: _shrink, F.softshrink: _shrink, F.threshold: _threshold, F.celu: _celu,
    torch.celu: _celu, F.rrelu: _rrelu, F.softmin: _softmin, torch.clamp_min: _clamp_one_side,
    torch.clamp_max: _clamp_one_side, torch.clamp: _clamp_tensors, torch.clip: _clamp_tensors,
    F.dropout: _dropout_off, torch.dropout: _dropout_off,
    **{target: composite(build) for target, build in UNARY_COMPOSITES.items()},
}

METHOD_FUNCTIONS = {name: target for name, target in (
    ("lerp", torch.lerp), ("addcmul", torch.addcmul), ("addcdiv", torch.addcdiv), ("hypot", torch.hypot),
    ("logaddexp", torch.logaddexp), ("xlogy", torch.xlogy), ("copysign", torch.copysign),
    ("heaviside", torch.heaviside), ("fmax", torch.fmax), ("fmin", torch.fmin), ("remainder", torch.remainder),
    ("floor_divide", torch.floor_divide), ("div", torch.div), ("add", torch.add), ("sub", torch.sub),
    ("atan2", torch.atan2), ("arctan2", torch.atan2), ("logit", torch.logit), ("nan_to_num", torch.nan_to_num),
    ("tan", torch.tan), ("asin", torch.asin), ("arcsin", torch.asin), ("acos", torch.acos),
    ("arccos", torch.acos), ("sinh", torch.sinh), ("cosh", torch.cosh), ("asinh", torch.asinh),
    ("arcsinh", torch.asinh), ("acosh", torch.acosh), ("arccosh", torch.acosh), ("atanh", torch.atanh),
    ("arctanh", torch.atanh), ("frac", torch.frac), ("round", torch.round), ("log10", torch.log10),
    ("erfc", torch.erfc), ("sgn", torch.sgn), ("deg2rad", torch.deg2rad), ("rad2deg", torch.rad2deg),
    ("sinc", torch.sinc), ("isnan", torch.isnan), ("isinf", torch.isinf), ("isposinf", torch.isposinf),
    ("isneginf", torch.isneginf), ("isfinite", torch.isfinite), ("signbit", torch.signbit),
    ("clamp_min", torch.clamp_min), ("clamp_max", torch.clamp_max), ("pow", torch.pow), ("clamp", torch.clamp),
    ("clip", torch.clip),
) if target is not None}
"""Methods that are the function of the same name with the tensor first; they are rewritten as it is."""
ALIASES = {torch.arcsin: torch.asin, torch.arccos: torch.acos, torch.arcsinh: torch.asinh,
           torch.arccosh: torch.acosh, torch.arctanh: torch.atanh, torch.special.erfc: torch.erfc,
           torch.special.sinc: torch.sinc, torch.true_divide: torch.div, torch.divide: torch.div,
           torch.subtract: torch.sub}


def _rewritten(graph: torch.fx.Graph, node: Node, target: Any) -> Node | None:
    """``node`` as :data:`REWRITES` writes it. Where it computes in bf16 or fp16, its tensor inputs are
    widened to fp32 first and the result rounded once at the end, as torch computes such a function
    inside one kernel: the ops of a rewrite each rounded to 8 bits would lose what torch keeps
    (``x ** 1.5`` through ``exp2(1.5 log2 x)`` off by several percent)."""
    meta = node.meta.get("tensor_meta")
    low = meta.dtype if meta is not None and getattr(meta, "dtype", None) in LOW_PRECISION else None
    args = node.args
    if low is not None:
        args = tuple(_widened(graph, a) if isinstance(a, Node) and _dtype(a) in LOW_PRECISION else a
                     for a in node.args)
    result = REWRITES[target](Ops(graph), SimpleNamespace(target=target, args=args, kwargs=node.kwargs))
    if result is None or low is None:
        return result
    return graph.call_method("to", (result, low))


def _widened(graph: torch.fx.Graph, value: Node) -> Node:
    wide = graph.call_method("float", (value,))
    wide.meta = {"tensor_meta": value.meta["tensor_meta"]._replace(dtype=torch.float32)}
    return wide


def _dtype(node: Node) -> torch.dtype | None:
    meta = node.meta.get("tensor_meta")
    return getattr(meta, "dtype", None)


def _number_over_tensor(gm: torch.fx.GraphModule, node: Node) -> bool:
    """``n / t`` as torch computes it: ``Tensor.__rtruediv__`` is ``t.reciprocal() * n``, rounded twice
    (in ``t``'s dtype each time), where ``torch.div(n, t)`` rounds once. A quantiser's
    ``round(w * (127 / amax))`` lands on eager's level only this way."""
    if node.op != "call_function" or node.target is not operator.truediv or len(node.args) != 2 or \
            not is_number(node.args[0]) or not isinstance(node.args[1], Node) or \
            getattr(node.args[1].meta.get("tensor_meta"), "dtype", None) is None:
        return False  # a number over a number (a scale from sizes) is Python's division
    with gm.graph.inserting_before(node):
        inverse = gm.graph.call_function(torch.reciprocal, (node.args[1],))
        product = gm.graph.call_function(operator.mul, (inverse, node.args[0]))
    inverse.meta, product.meta = dict(node.meta), dict(node.meta)
    node.replace_all_uses_with(product)
    gm.graph.erase_node(node)
    return True


def rewrite_pointwise(gm: torch.fx.GraphModule) -> bool:
    """In-place arithmetic on values of ``forward`` alone as out of place, then each call of
    :data:`REWRITES` (or its method or alias) as the ops it is made of; True when something changed
    (shapes must be propagated: some rewrites read an input's dtype)."""
    order = {n: k for k, n in enumerate(gm.graph.nodes)}
    changed = fold_filled_like(gm)
    for node in list(gm.graph.nodes):
        changed |= out_of_place(gm, node, order) or item_assignment(gm, node, order) or \
            scatter_numbers(gm, node, order) or _number_over_tensor(gm, node)
    for node in list(gm.graph.nodes):
        if node.op == "call_method" and node.target in METHOD_FUNCTIONS:
            target = METHOD_FUNCTIONS[str(node.target)]
        elif node.op == "call_function":
            target = ALIASES.get(node.target, node.target)
        else:
            continue
        if target not in REWRITES or node.kwargs.get("out") is not None or writes_in_place(node) or \
                option(node, "inplace", INPLACE_POSITION.get(target, 99), False):
            continue  # a write in place keeps its statement: the value written is read through its input
        with gm.graph.inserting_before(node):
            result = _rewritten(gm.graph, node, target)
        if result is None:
            continue
        result.meta = dict(node.meta)  # what the next rewrite reads of its input (its dtype)
        node.replace_all_uses_with(result)
        gm.graph.erase_node(node)
        changed = True
    return remove_dead_values(gm) or changed  # a widening left behind where a rewrite declined
