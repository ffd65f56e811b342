"""Attention masks made in ``forward`` from positions alone, computed in the flash kernel.

Real code builds an attention mask from the sequence's positions: a sliding window
``(j <= i) & (i - j < window)`` from two ``arange``s, a causal triangle
``torch.ones(t, t, dtype=torch.bool).tril()``, an additive ``torch.full((t, t), -inf).triu(1)``, a
distance penalty ``-slope * (i - j).abs()``. Such a mask depends on no input, only on a score's query
position ``i`` and key position ``j``, so the kernel computes it per score from the two indices and
nothing of queries x keys is written or read (torch builds it in memory and reads it in its kernel).

:func:`position_masks.rewrite` finds each ``scaled_dot_product_attention`` whose ``attn_mask`` is
computed from positions, numbers and factories alone, and calls :func:`attention_with_positions`
instead, which holds the mask as an expression (:data:`Spec`, nested tuples, hashable as a graph argument). The
expression is evaluated in torch where the graph runs (:func:`evaluate`), and written as Triton for
the kernel (:func:`triton_text`). Where the mask keeps only keys whose distance ``j - i`` lies in a
range (a band: causal, sliding windows, a prefix of keys before a diagonal), :func:`band` gives the
range, and the kernel visits only the key blocks that meet it; the expression still decides each
score, so a band is only ever an optimisation.

Integers are computed in int32 in the kernel (int64 in torch): exact for positions, which stay far
below 2**31; a product of two positions, floor division and remainders are refused. Arithmetic in
fp16 or bf16 is refused (torch would round each step); a float mask is computed in fp32 and cast to
the mask's dtype once, as its last step, in both.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from kernelevo.agent.builtin import expressions
from kernelevo.agent.builtin.program import CannotCover

Spec = tuple
"""``("i", start, step)`` / ``("j", start, step)``: a query or key position, ``start + step * index``;
``("number", value)``; ``(op, *operands)`` for the ops of :data:`TORCH_OPS`; ``("cast", dtype, x)``."""

COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
FLIPPED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}
LOGICAL = {"and": "&", "or": "|", "xor": "^"}
UNBOUNDED = 1 << 30
"""A band edge that bounds nothing (the kernel clips it to the keys; its text spells this number)."""


def attention_with_positions(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: Spec = ("number", True),
                             mask_dtype: str = "bool", scale: float | None = None,
                             enable_gqa: bool = False) -> torch.Tensor:
    """``scaled_dot_product_attention`` whose ``attn_mask`` is ``positions`` evaluated at every
    (query, key) pair: what :func:`position_masks.rewrite` puts in place of the call and its mask."""
    i = torch.arange(q.shape[-2], device=q.device)[:, None]
    j = torch.arange(k.shape[-2], device=q.device)[None, :]
    mask = torch.broadcast_to(evaluate(positions, i, j), (q.shape[-2], k.shape[-2]))
    mask = mask.to(getattr(torch, mask_dtype))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=enable_gqa)


def evaluate(spec: Spec, i: torch.Tensor, j: torch.Tensor) -> Any:
    """``spec`` computed by torch at query positions ``i`` and key positions ``j``."""
    head = spec[0]
    if head in ("i", "j"):
        index = i if head == "i" else j
        return index * spec[2] + spec[1] if (spec[1], spec[2]) != (0, 1) else index
    if head == "number":
        return torch.tensor(spec[1], device=i.device)
    if head == "cast":
        return evaluate(spec[2], i, j).to(getattr(torch, spec[1]))
    values = [evaluate(s, i, j) for s in spec[1:]]
    return TORCH_OPS[head](*values)


TORCH_OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.true_divide, "neg": torch.neg,
    "abs": torch.abs, "maximum": torch.maximum, "minimum": torch.minimum, "where": torch.where,
    "not": torch.logical_not, "and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor,
    **{name: getattr(torch, name) for name in COMPARISONS},
}


def triton_text(spec: Spec) -> str:
    """``spec`` as a Triton expression of ``i`` (the query's index, int32 ``[BLOCK_M, 1]``) and ``j``
    (the key's, ``[1, BLOCK_N]``)."""
    head = spec[0]
    if head in ("i", "j"):
        start, step = spec[1], spec[2]
        scaled = head if step == 1 else f"{head} * {step!r}"
        return scaled if start == 0 else f"({scaled} + {start!r})"
    if head == "number":
        value = spec[1]
        return f'float("{value}")' if isinstance(value, float) and not math.isfinite(value) else repr(value)
    if head == "cast":
        return f"({triton_text(spec[2])}).to(tl.{'int1' if spec[1] == 'bool' else spec[1]})"
    parts = [triton_text(s) for s in spec[1:]]
    if head == "div" and not _double(spec):
        return _divide(spec, parts)
    if head in COMPARISONS or head in ARITHMETIC:
        return f"({parts[0]} {COMPARISONS.get(head) or ARITHMETIC[head]} {parts[1]})"
    if head in LOGICAL:
        return f"({_truth(spec[1])} {LOGICAL[head]} {_truth(spec[2])})"
    if head == "not":
        return f"({parts[0]} == 0)"
    if head == "neg":
        return f"(-{parts[0]})"
    calls = {"abs": "tl.abs", "maximum": "tl.maximum", "minimum": "tl.minimum", "where": "tl.where"}
    return f"{calls[head]}({', '.join(parts)})"


def _divide(spec: Spec, parts: list[str]) -> str:
    """A quotient in fp32 as torch computes it (see :func:`expressions.elementwise`'s division): Triton's
    "/" would put a quotient such as (j - i) / w on the wrong side of the comparison that reads it now
    and then."""
    top, bottom = spec[1], spec[2]
    x = float(top[1]) if top[0] == "number" else f"({parts[0]}).to(tl.float32)"
    y = float(bottom[1]) if bottom[0] == "number" else f"({parts[1]}).to(tl.float32)"
    return expressions.elementwise("div", [x, y])


def _double(spec: Spec) -> bool:
    """Whether ``spec`` is float64 (a cast to it, or arithmetic on such a value): Triton's "/" on
    float64 is rounded once already."""
    head = spec[0]
    if head == "cast":
        return spec[1] == "float64"
    if head in ("i", "j", "number", "not", *COMPARISONS, *LOGICAL):
        return False
    return any(_double(s) for s in spec[1:] if isinstance(s, tuple))


def _truth(spec: Spec) -> str:
    """``spec`` as a Triton condition: a comparison or a logical op as it is, any other value against 0."""
    text = triton_text(spec)
    return text if spec[0] in (*COMPARISONS, *LOGICAL, "not") else f"({text} != 0)"


def _linear(spec: Spec) -> tuple[float, float, float] | None:
    """``(a, b, c)`` where ``spec`` is ``a * i + b * j + c``; None where it is not linear."""
    head = spec[0]
    if head in ("i", "j"):
        return (spec[2], 0.0, spec[1]) if head == "i" else (0.0, spec[2], spec[1])
    if head == "number":
        return (0.0, 0.0, float(spec[1])) if not isinstance(spec[1], bool) else None
    if head == "cast" and spec[1] == "float32":  # exact for the integers bands are read from; a cast to
        return _linear(spec[2])                   # an integer truncates, which no linear form says
    forms = [_linear(s) for s in spec[1:]]
    if any(f is None for f in forms):
        return None
    if head in ("add", "sub"):
        sign = 1 if head == "add" else -1
        return tuple(x + sign * y for x, y in zip(forms[0], forms[1], strict=True))  # type: ignore[return-value]
    if head == "neg":
        return tuple(-x for x in forms[0])  # type: ignore[return-value,union-attr]
    if head == "mul":
        (a1, b1, c1), (a2, b2, c2) = forms  # type: ignore[misc]
        if a1 == b1 == 0:
            return a2 * c1, b2 * c1, c2 * c1
        if a2 == b2 == 0:
            return a1 * c2, b1 * c2, c1 * c2
    return None


def _bounds(spec: Spec) -> tuple[float, float]:
    """Bounds ``(lowest, highest)`` on ``j - i`` outside which ``spec``, a condition, is false."""
    head = spec[0]
    if head == "and":
        (lo1, hi1), (lo2, hi2) = _bounds(spec[1]), _bounds(spec[2])
        return max(lo1, lo2), min(hi1, hi2)
    if head == "or":
        (lo1, hi1), (lo2, hi2) = _bounds(spec[1]), _bounds(spec[2])
        return min(lo1, lo2), max(hi1, hi2)
    if head == "not" and spec[1][0] in FLIPPED:  # not (d < x): d >= x
        return _bounds((FLIPPED[spec[1][0]], *spec[1][1:]))
    if head not in ("lt", "le", "gt", "ge", "eq"):
        return -math.inf, math.inf
    left, right = _linear(spec[1]), _linear(spec[2])
    if left is None or right is None:
        return -math.inf, math.inf
    a, b, c = (x - y for x, y in zip(left, right, strict=True))  # a*i + b*j + c  (op)  0
    if b == 0 or a != -b or not all(float(x).is_integer() for x in (b, c)):
        # only whole coefficients: the kernel compares in fp32 what this would bound in float64
        return -math.inf, math.inf
    edge = -c / b  # the comparison reads d (op') edge, d = j - i; its sense flips where b < 0
    above = (head in ("gt", "ge")) == (b > 0)
    strict = head in ("lt", "gt") and edge.is_integer()  # d < 3 is d <= 2 for whole distances
    if head == "eq":
        return (edge, edge) if edge.is_integer() else (-math.inf, math.inf)
    return (math.ceil(edge) + strict, math.inf) if above else (-math.inf, math.floor(edge) - strict)


def band(spec: Spec, kind: str) -> tuple[int, int]:
    """The distances ``j - i`` a key may have and be seen, as whole numbers (``UNBOUNDED`` where a
    side bounds nothing): from the condition of a boolean mask, or where a float mask is ``-inf`` by
    a condition (``where(c, x, -inf)``, ``where(c, -inf, x)``)."""
    condition = spec
    if kind != "bool":
        condition = spec[2] if spec[0] == "cast" else spec
        if condition[0] != "where":
            return -UNBOUNDED, UNBOUNDED
        _, test, kept, hidden = condition
        if hidden == ("number", -math.inf):
            condition = test
        elif kept == ("number", -math.inf):
            condition = simplified(("not", test))
        else:
            return -UNBOUNDED, UNBOUNDED
    lo, hi = _bounds(condition)
    return (max(math.ceil(lo), -UNBOUNDED) if math.isfinite(lo) else -UNBOUNDED,
            min(math.floor(hi), UNBOUNDED) if math.isfinite(hi) else UNBOUNDED)


def typed_number(value: Any, dtype: torch.dtype) -> Any:
    """``value`` as a number of ``dtype``'s kind, rounded as that dtype holds it (CannotCover for an
    infinity or NaN cast to an integer, which torch leaves undefined)."""
    if dtype == torch.bool:
        return bool(value)
    if not dtype.is_floating_point and not math.isfinite(value):
        raise CannotCover(f"{value} cast to {dtype}")
    return torch.tensor(value, dtype=dtype).item() if dtype.is_floating_point else int(value)


def simplified(spec: Spec) -> Spec:
    """``spec`` with selections between constants folded into the conditions they select on:
    ``torch.ones(t, t).tril() == 1`` reads as the comparison ``j - i <= 0``, so that its band is seen
    and the kernel computes one comparison instead of a select and a compare."""
    if spec[0] in ("i", "j", "number"):
        return spec
    spec = (spec[0], *(simplified(s) if isinstance(s, tuple) else s for s in spec[1:]))
    head, parts = spec[0], spec[1:]
    inner = parts[1] if head == "cast" else parts[0]
    constant = _two_numbers(inner) if isinstance(inner, tuple) else None
    if constant is not None and head in (*COMPARISONS, "not", "cast"):
        test, a, b = constant
        if head == "not":
            return simplified(("where", test, ("number", not a), ("number", not b)))
        if head == "cast":
            kind = getattr(torch, spec[1])
            cast = (lambda x: bool(x)) if kind == torch.bool else (lambda x: typed_number(x, kind))
            return simplified(("where", test, ("number", cast(a)), ("number", cast(b))))
        if parts[1][0] == "number":
            compare = TORCH_OPS[head]
            return simplified(("where", test, ("number", bool(compare(torch.tensor(a), parts[1][1]))),
                               ("number", bool(compare(torch.tensor(b), parts[1][1])))))
    if head == "where" and parts[1][0] == parts[2][0] == "number" and isinstance(parts[1][1], bool) and \
            isinstance(parts[2][1], bool):
        a, b = parts[1][1], parts[2][1]
        return parts[0] if (a, b) == (True, False) else ("not", parts[0]) if (a, b) == (False, True) else parts[1]
    if head == "not" and parts[0][0] == "not":
        return parts[0][1]
    return spec


def _two_numbers(spec: Spec) -> tuple[Spec, Any, Any] | None:
    """``(test, a, b)`` where ``spec`` selects between two numbers (``where(test, a, b)``)."""
    if spec[0] == "where" and spec[2][0] == spec[3][0] == "number":
        return spec[1], spec[2][1], spec[3][1]
    return None


def planned(options: dict[str, Any]) -> dict[str, Any] | None:
    """The plan's mask details where the call holds a mask made from positions (its options by name):
    the expression, ``bool`` or ``additive``, and the band of distances ``j - i`` a key may be seen at."""
    spec = options.get("positions")
    if spec is None:
        return None
    kind = "bool" if options.get("mask_dtype") == "bool" else "additive"
    return {"source": None, "kind": kind, "positions": spec, "band": band(spec, kind),
            "dtype": options.get("mask_dtype")}


KERNEL_FUNCTION = '''@triton.jit
def attention_positions(i, j):
    # The attention mask forward made from positions alone ({kind}), at query index i
    # ([BLOCK_M, 1]) and key index j ([1, BLOCK_N]): computed per score, nothing of it is read.
{widen}    return {expression}
'''
WIDE_INTEGERS = 1 << 20
"""Integer products and constants past this could leave int32 (torch computes positions in int64)."""


def kernel_function(mask: dict[str, Any]) -> str:
    """The Triton function the attention kernel calls for a mask made from positions (``mask``: the
    plan's, from :func:`planned`)."""
    kind = "True: the key is seen" if mask["kind"] == "bool" else "added to the scaled scores"
    widen = "    # products of positions computed in int64, as torch computes them: int32 could wrap\n" \
        "    i = i.to(tl.int64)\n    j = j.to(tl.int64)\n" if _may_wrap(mask["positions"]) else ""
    function = KERNEL_FUNCTION.format(kind=kind, expression=triton_text(mask["positions"]), widen=widen)
    return expressions.helpers_for(function) + function


def _may_wrap(spec: Spec) -> bool:
    """Does ``spec`` multiply, or hold an integer past :data:`WIDE_INTEGERS` (int32 might wrap)?"""
    if spec[0] == "number":
        return not isinstance(spec[1], bool) and isinstance(spec[1], int) and abs(spec[1]) > WIDE_INTEGERS
    if spec[0] in ("i", "j"):
        return any(abs(x) > WIDE_INTEGERS for x in spec[1:])
    return spec[0] == "mul" or any(_may_wrap(s) for s in spec[1:] if isinstance(s, tuple))


KERNEL_LINES = '''        if MASK == 3:
            s = tl.where(attention_positions(offs_m[:, None], cols[None, :]), s, float("-inf"))
        if MASK == 4:
            s = s + log2_bias(attention_positions(offs_m[:, None], cols[None, :]).to(tl.float32))
'''
"""The attention kernel's lines for a mask made from positions (at its ``POSITION_MASKS`` line): in its
text only where the plan has one, since they call the function :func:`kernel_function` renders."""
