"""The Triton expression of each primitive a row program uses, on fp32 values, and the rounding
that makes a kernel round like eager does after a bf16 or fp16 op."""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelevo.agent.builtin.program import Node

NEG_INF = 'float("-inf")'
POS_INF = 'float("inf")'


def _c(value: float) -> str:
    if value != value:
        return 'float("nan")'
    if value == float("inf"):
        return POS_INF
    if value == float("-inf"):
        return NEG_INF
    return repr(float(value))


def _a(arg: Any) -> str:
    return arg if isinstance(arg, str) else _c(arg)


def _nan_max(a: str, b: str, which: str = "maximum") -> str:
    # torch's max, min, relu and clamp pass a NaN on; the GPU's plain max/min instructions drop it
    return f"tl.{which}({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def elementwise(op: str, args: list[Any]) -> str:
    """The Triton expression of primitive ``op`` on fp32 values ``args`` (names or numbers)."""
    a = [_a(x) for x in args]
    x = a[0]
    binary = {"add": "+", "sub": "-", "mul": "*"}
    if op == "fmod":
        return _fmod(args)
    if op == "div":
        return _divide(args)
    if op == "mean_of":  # a sum over a count, as eager's mean takes it (see DIVIDE_BY_COUNT)
        return f"divide_by_count({a[0]}, {a[1]})"
    if op in binary:
        return f"({a[0]} {binary[op]} {a[1]})"
    # log1p, not log(1 + .): far below 0 softplus is exp(x) itself, which 1 + exp(x) rounds away
    softplus = f"tl.where({x} > 20.0, {x}, {_log1p(f'tl.exp({x})')})"
    if op == "softplus" and len(a) == 3:  # 1/beta log(1 + exp(beta x)), linear past the threshold
        return f"tl.where({x} * {a[1]} > {a[2]}, {x}, {_log1p(f'tl.exp({x} * {a[1]})')} / {a[1]})"
    if op == "elu" and len(a) == 2:
        return f"tl.where({x} > 0.0, {x}, {a[1]} * (tl.exp({x}) - 1.0))"
    compare = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}
    if op in compare:  # a truth value, as 1.0 or 0.0 (comparisons with NaN are false, as in torch)
        return f"tl.where({a[0]} {compare[op]} {a[1]}, 1.0, 0.0)"
    logical = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}
    if op in logical:
        return f"tl.where(({a[0]} != 0.0) {logical[op]} ({a[1]} != 0.0), 1.0, 0.0)"
    if op == "logical_not":
        return f"tl.where({x} == 0.0, 1.0, 0.0)"
    if op == "where":  # where(condition, a, b): the condition's value is a truth value (non-zero: true)
        return f"tl.where({a[0]} != 0.0, {a[1]}, {a[2]})"
    table = {
        "identity": x, "cast": x, "to_bool": f"tl.where({x} != 0.0, 1.0, 0.0)",
        "trunc": f"tl.where({x} < 0.0, -tl.floor(-{x}), tl.floor({x}))", "neg": f"(-{x})", "relu": _nan_max(x, "0.0"),
        "sigmoid": f"(1.0 / (1.0 + tl.exp(-{x})))", "silu": f"({x} / (1.0 + tl.exp(-{x})))",
        "tanh": _tanh(x), "exp": f"tl.exp({x})", "log": f"tl.log({x})",
        "abs": f"tl.abs({x})", "sqrt": f"tl.sqrt({x})", "rsqrt": f"tl.rsqrt({x})", "erf": f"tl.math.erf({x})",
        "square": f"({x} * {x})", "cube": f"({x} * {x} * {x})", "reciprocal": f"true_divide(1.0, {x})",
        "xlogx": f"tl.where({x} == 0.0, 0.0, {x} * tl.log({x}))",
        "gelu": f"(0.5 * {x} * (1.0 + tl.math.erf({x} * 0.7071067811865476)))",
        "gelu_tanh": f"(0.5 * {x} * (2.0 / (1.0 + tl.exp(-2.0 * (0.7978845608028654 * ({x} + 0.044715 * {x} * {x} "
                     f"* {x}))))))",
        "softplus": softplus,
        "mish": f"({x} * {_tanh(softplus)})",
        # as eager computes them: the clamp of x + 3 over 6 (a product with fl(1/6) on a GPU)
        "hardswish": _divide([f"({x} * {_nan_max(_nan_max(f'{x} + 3.0', '0.0'), '6.0', 'minimum')})", 6.0]),
        "hardsigmoid": _divide([_nan_max(_nan_max(f"{x} + 3.0", "0.0"), "6.0", "minimum"), 6.0]),
        "relu6": _nan_max(_nan_max(x, "0.0"), "6.0", "minimum"),
        "inf_to_zero": f"tl.where(tl.abs({x}) == float(\"inf\"), 0.0, {x})",
        "elu": f"tl.where({x} > 0.0, {x}, tl.exp({x}) - 1.0)",
        "selu": f"(1.0507009873554805 * tl.where({x} > 0.0, {x}, 1.6732632423543772 * (tl.exp({x}) - 1.0)))",
        # log(sigmoid(x)) without overflow: min(x, 0) - log1p(exp(-|x|))
        "logsigmoid": f"(tl.where({x} < 0.0, {x}, 0.0) - {_log1p(f'tl.exp(-tl.abs({x}))')})",
        "softsign": f"({x} / (1.0 + tl.abs({x})))",
        "tanhshrink": _tanhshrink(x),
        "sin": f"tl.sin({x})", "cos": f"tl.cos({x})", "floor": f"tl.floor({x})", "ceil": f"tl.ceil({x})",
        # as torch computes it, (0 < x) - (x < 0): NaN and -0.0 give 0
        "sign": f"tl.where({x} > 0.0, 1.0, tl.where({x} < 0.0, -1.0, 0.0))",
        "expm1": _expm1(x), "log1p": _log1p(x), "log2": f"tl.log2({x})", "exp2": f"tl.exp2({x})",
        "atan": _atan(x),
    }
    if op in table:
        return table[op]
    if op in ("maximum", "minimum"):
        return _nan_max(a[0], a[1], op)
    if op == "leaky_relu":
        return f"tl.where({x} >= 0.0, {x}, {x} * {a[1]})"
    if op == "clamp":
        out = x
        if args[1] != float("-inf"):
            out = _nan_max(out, a[1])
        if args[2] != float("inf"):
            out = _nan_max(out, a[2], "minimum")
        return out
    raise KeyError(op)


ATAN_POLYNOMIAL = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
"""atan(t) = t + t z P(z), z = t^2, for |t| <= tan(pi/8): the fp32 minimax fit of the Cephes library,
about 1 ulp; larger arguments are brought there by atan(x) = pi/4 + atan((x - 1) / (x + 1)) and
atan(x) = pi/2 - atan(1 / x)."""


def _atan(x: str) -> str:
    a = f"tl.abs({x})"
    big, mid = f"({a} > 2.414213562373095)", f"({a} > 0.4142135623730950)"
    t = f"tl.where({big}, -1.0 / {a}, tl.where({mid}, ({a} - 1.0) / ({a} + 1.0), {a}))"
    z = f"(({t}) * ({t}))"
    p = repr(ATAN_POLYNOMIAL[0])
    for c in ATAN_POLYNOMIAL[1:]:
        p = f"({p} * {z} + {c!r})"
    base = f"tl.where({big}, 1.5707963267948966, tl.where({mid}, 0.7853981633974483, 0.0))"
    magnitude = f"({base} + ({t}) + ({t}) * {z} * {p})"
    return f"tl.where({x} < 0.0, -{magnitude}, {magnitude})"


def _divide(args: list[Any]) -> str:
    """x / y as eager divides. Triton's fp32 "/" is the GPU's approximate division (off by up to 2 ulp),
    which now and then moves a quotient across a rounding or comparison boundary: a quantiser's
    ``round(w / scale)`` then picks the neighbouring level. Two values: divided rounded once, as torch
    divides them. By a number: see :data:`DIVIDE_BY_NUMBER`."""
    x, y = args
    if not isinstance(x, str) and not isinstance(y, str):
        return _c(float(torch.tensor(float(x), dtype=torch.float32) / float(y)))
    if not isinstance(y, str):
        return f"divide_by_number({x}, {_c(y)}, {_c(reciprocal(y))})"
    return f"true_divide({_a(x)}, {_a(y)})"


def reciprocal(number: float) -> float:
    """1 / ``number`` as torch computes it for a division by a number on a GPU: both in fp32."""
    return torch.tensor(1.0, dtype=torch.float32).div(torch.tensor(float(number), dtype=torch.float32)).item()


TRUE_DIVIDE = '''@triton.jit
def true_divide(x, y):
    # x / y rounded once, as torch divides two values (Triton's fp32 "/" is the GPU's approximate
    # division); a count among them (an int32 argument) is a float first, as in torch
    return tl.math.div_rn(tl.cast(x, tl.float32), tl.cast(y, tl.float32))
'''


DIVIDE_BY_NUMBER = '''@triton.jit
def divide_by_number(x, number: tl.constexpr, inverse: tl.constexpr):
    # x / number as eager computes it where x lives. On a GPU torch multiplies by the number's fp32
    # reciprocal (``inverse``); on the CPU it divides. The two differ in the last place for most x, and
    # a quotient that is then rounded (a quantiser's round(w / 15)) must land on eager's level.
    if RECIPROCAL_DIVISION:
        y = x * inverse
    else:
        y = tl.math.div_rn(tl.cast(x, tl.float32), number)
    return y


@triton.jit
def divide_by_count(total, count):
    # a mean as eager takes it where the values live: torch's reductions on a GPU multiply the sum by
    # fl(1 / count); on the CPU the sum is divided by the count
    if RECIPROCAL_DIVISION:
        y = total * tl.math.div_rn(1.0, tl.cast(count, tl.float32))
    else:
        y = tl.math.div_rn(tl.cast(total, tl.float32), tl.cast(count, tl.float32))
    return y


RECIPROCAL_DIVISION = tl.constexpr(not isinstance(divide_by_number, InterpretedFunction))  # see INTERPRETER_IMPORT
'''


def _fmod(args: list[Any]) -> str:
    """C's fmod, exact for every pair (:data:`FMOD_EXACT`); a number among the two is widened to the
    other's block, since the helper reads its operands' bits."""
    x, y = (_a(v) for v in args)
    if not isinstance(args[0], str) and not isinstance(args[1], str):
        return _c(math.fmod(float(args[0]), float(args[1])) if float(args[1]) != 0.0 else math.nan)
    if not isinstance(args[0], str):
        x = f"(tl.zeros_like({y}) + {x})"
    if not isinstance(args[1], str):
        y = f"(tl.zeros_like({x}) + {y})"
    return f"fmod_exact({x}, {y})"


FMOD_EXACT = '''@triton.jit
def fmod_exact(x, y):
    # C's fmod(x, y) of float32 values, exact for every pair, as torch.fmod is. Triton's float "%" is
    # not: a rounded x - y * trunc(x / y), off in about 4% of pairs on the H200.
    # Quotients below 2^23 (nearly all): the quotient correctly rounded (its integer part is then off
    # by at most one), the remainder from one fma (exact: it is representable) and a quotient rounded
    # up to the next integer corrected by one |y| toward the sign of x.
    # one shape and type for both (a row's value against a row of values, a number passed in)
    x, y = tl.broadcast(tl.cast(x, tl.float32), tl.cast(y, tl.float32))
    v = tl.math.div_rn(x, y)
    q = tl.where(v < 0.0, -tl.floor(-v), tl.floor(v))
    r = tl.fma(-q, y, x)
    ys = tl.where(x < 0.0, -tl.abs(y), tl.abs(y))
    r = tl.where((r != 0.0) & ((r < 0.0) != (x < 0.0)), r + ys, tl.where(tl.abs(r) >= tl.abs(y), r - ys, r))
    # Larger quotients (a divisor tiny beside x, up to 2^277): long division of the significands in
    # 64-bit integers, 39 bits of quotient a step, as many steps as the block's largest exponent gap
    # needs (none in most blocks). The remainder is m_x * 2^gap mod m_y, in units of y's last place.
    finite = (tl.abs(x) < float("inf")) & (tl.abs(y) < float("inf")) & (y != 0.0)
    big = finite & (tl.abs(v) >= 8388608.0)
    xb = x.to(tl.int32, bitcast=True) & 0x7FFFFFFF
    yb = y.to(tl.int32, bitcast=True) & 0x7FFFFFFF
    ex = xb >> 23
    ey = yb >> 23
    mx = tl.where(ex == 0, xb & 0x7FFFFF, (xb & 0x7FFFFF) | 0x800000).to(tl.int64)
    my = tl.where(big, tl.where(ey == 0, yb & 0x7FFFFF, (yb & 0x7FFFFF) | 0x800000), 1).to(tl.int64)
    ey = tl.maximum(ey, 1)
    gap = tl.where(big, tl.maximum(ex, 1) - ey, 0)
    rem = mx
    # Each step ends below m_y < 2^24, so rem << 39 fits. (A one-element block added: a 0-d gap, of two
    # single values, becomes one tl.max can reduce.)
    for _ in range((tl.max(gap + tl.zeros((1,), dtype=tl.int32)) + 38) // 39):
        step = tl.minimum(gap, 39)
        rem = (rem << step.to(tl.int64)) % my
        gap -= step
    # rem * 2^(ey - 150): exact, by powers of two built from their bits, in two factors below 2^-126
    scale = ey - 150
    low = scale < -126
    first = (tl.where(low, scale + 60, scale) + 127) << 23
    second = (tl.where(low, -60, 0) + 127) << 23
    exact = rem.to(tl.float32) * first.to(tl.float32, bitcast=True) * second.to(tl.float32, bitcast=True)
    r = tl.where(big, tl.where(x < 0.0, -exact, exact), r)
    r = tl.where(r == 0.0, x * 0.0, r)  # a zero takes the sign of x
    return tl.where(tl.abs(x) < tl.abs(y), x, r)  # |x| < |y|: x itself (y infinite included)
'''


def _tanh(x: str) -> str:
    """tanh(x) from one exp, saturating to +-1 without overflow (exp(-2x) may be inf: 2 / inf is 0).
    Below |x| = 0.5, x less the series of x - tanh(x) (:data:`TANHSHRINK_SERIES`): there the
    difference of 2 / (1 + exp(-2x)) and 1 cancels, and at |x| near 1e-3 kept only about 1e-4 of
    tanh's relative precision, past the judge's tolerance on its small-values set."""
    return f"tl.where(tl.abs({x}) < 0.5, {x} - {_shrink_series(x)}, {_tanh_by_exp(x)})"


def _tanh_by_exp(x: str) -> str:
    return f"(2.0 / (1.0 + tl.exp(-2.0 * {x})) - 1.0)"


def _shrink_series(x: str) -> str:
    """x - tanh(x) for |x| < 0.5, from :data:`TANHSHRINK_SERIES`."""
    x2 = f"({x} * {x})"
    series = f"{TANHSHRINK_SERIES[-1]!r}"
    for c in reversed(TANHSHRINK_SERIES[:-1]):
        series = f"({c!r} + {x2} * {series})"
    return f"{x} * {x2} * {series}"


def _log1p(x: str) -> str:
    """log(1 + x), accurate for tiny x too: with u = 1 + x rounded, log(u) * x / (u - 1) cancels the
    rounding of u (u == 1 means log1p(x) is x to fp32's precision; an infinite x is its own result)."""
    u = f"(1.0 + {x})"
    return f"tl.where(({u} == 1.0) | ({u} == float(\"inf\")), {x}, tl.log({u}) * ({x}) / ({u} - 1.0))"


def _expm1(x: str) -> str:
    """exp(x) - 1, accurate for tiny x too: with u = exp(x), (u - 1) * (x / log(u)) cancels the rounding
    of u (the quotient first: near fp32's largest exp, u * x would overflow); u == 1 means x, where
    u - 1 is -1 (x very negative) the result is -1 itself, and an infinite u is the result."""
    u = f"tl.exp({x})"
    return (f"tl.where(({u} == 1.0) | ({u} == float(\"inf\")), tl.where({u} == 1.0, {x}, {u}), "
            f"tl.where({u} - 1.0 == -1.0, -1.0, ({u} - 1.0) * (({x}) / tl.log({u}))))")


TANHSHRINK_SERIES = (1 / 3, -2 / 15, 17 / 315, -62 / 2835, 1382 / 155925, -21844 / 6081075, 929569 / 638512875)
"""x - tanh(x) = x^3 (1/3 - 2x^2/15 + ...): below |x| = 0.5 its first seven terms are within about 1e-6
of it; the difference of x and tanh(x) itself would lose most of its digits there."""


def _tanhshrink(x: str) -> str:
    return f"tl.where(tl.abs({x}) < 0.5, {_shrink_series(x)}, {x} - {_tanh_by_exp(x)})"


ROUND_TO_BF16 = '''@triton.jit
def round_to_bf16(x):
    # fp32 -> nearest bf16 (ties to even), kept in fp32: eager rounds after every bf16 op, and so do we.
    # On a GPU, one conversion instruction each way. Under Triton's CPU interpreter, integer
    # arithmetic, so that it rounds there the same way.
    if CAST_ROUNDS:
        y = x.to(tl.bfloat16).to(tl.float32)
    else:
        bits = x.to(tl.uint32, bitcast=True)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        y = bits.to(tl.float32, bitcast=True)
    return y


CAST_ROUNDS = tl.constexpr(not isinstance(round_to_bf16, InterpretedFunction))  # see INTERPRETER_IMPORT
'''


HELPERS = {"round_to_bf16": ROUND_TO_BF16, "fmod_exact": FMOD_EXACT, "divide_by_number": DIVIDE_BY_NUMBER,
           "true_divide": TRUE_DIVIDE, "divide_by_count": DIVIDE_BY_NUMBER}
"""The jitted helpers the expressions call, by name (the device-chosen divisions in one text)."""


def helpers_for(body: str) -> str:
    """The helpers ``body`` calls, each followed by a blank line ("" for none)."""
    # the two divisions chosen by device share one text (and its flag): written once
    texts = dict.fromkeys(text for name, text in HELPERS.items() if f"{name}(" in body)
    return "".join(text + "\n\n" for text in texts)


def checks_interpreter(body: str) -> bool:
    """Does ``body`` call a helper that behaves as eager does on the device it runs on (and so needs
    :data:`INTERPRETER_IMPORT`)?"""
    return any(f"{name}(" in body for name in ("round_to_bf16", "divide_by_number", "divide_by_count"))


INTERPRETER_IMPORT = "from triton.runtime.interpreter import InterpretedFunction\n"
INTERPRETED = '''

# Triton's CPU interpreter multiplies bf16 and fp16 tiles wrongly (triton 3.9), so there the tiles
# are widened to fp32 before tl.dot. On a GPU this is False: the dots run on the tensor cores.
INTERPRETED = isinstance({kernel}, InterpretedFunction)
'''


DOT_PRECISION = '''
# fp32 products on the tensor cores: {precision} splits each fp32 operand into bf16 parts and sums
# their products in fp32, within the judge's precision rule (docs/BENCHMARKS.md measures it against
# cuBLAS's fp32 GEMM). The CPU interpreter has no such mode: there the tiles are multiplied in fp32.
{name} = tl.constexpr("ieee" if INTERPRETED else "{precision}")
'''


def dot_name(precision: str) -> str:
    """The module constant that holds ``tl.dot``'s input precision ``precision`` (one per precision, so
    that segments of a sequence with different precisions keep their own)."""
    return "DOT_" + precision.upper()


def dot_precision(precision: str | None) -> str:
    """The module's line defining :func:`dot_name`, placed after ``INTERPRETED`` ("" for none)."""
    return DOT_PRECISION.format(precision=precision, name=dot_name(precision)) if precision else ""


def rounded(node: Node, expr: str) -> str:
    """``expr`` rounded as eager rounds ``node``'s result (bf16 or fp16), kept in fp32."""
    if node.round_to == "bfloat16":
        return f"round_to_bf16({expr})"
    if node.round_to == "float16":
        return f"({expr}).to(tl.float16).to(tl.float32)"
    return expr
