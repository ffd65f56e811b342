"""Attention masks made in ``forward`` from positions alone, computed in the flash kernel.

Real code builds an attention mask from the sequence's positions: a sliding window
``(j <= i) & (i - j < window)`` from two ``arange``s, a causal triangle
``torch.ones(t, t, dtype=torch.bool).tril()``, an additive ``torch.full((t, t), -inf).triu(1)``, a
distance penalty ``-slope * (i - j).abs()``. Such a mask depends on no input, only on a score's query
position ``i`` and key position ``j``, so the kernel computes it per score from the two indices and
nothing of queries x keys is written or read (torch builds it in memory and reads it in its kernel).

:func:`rewrite` finds each ``scaled_dot_product_attention`` whose ``attn_mask`` is computed from
positions, numbers and factories alone, and calls :func:`attention_with_positions` instead, which
holds the mask as an expression (:data:`Spec`, nested tuples, hashable as a graph argument). The
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
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import (
    BINARY_TARGETS,
    BITWISE_ON_BOOL,
    COMPARE_METHODS,
    COMPARE_TARGETS,
    LOW_PRECISION,
    reads_metadata,
)

Spec = tuple
"""``("i", start, step)`` / ``("j", start, step)``: a query or key position, ``start + step * index``;
``("number", value)``; ``(op, *operands)`` for the ops of :data:`TORCH_OPS`; ``("cast", dtype, x)``."""

COMPARISONS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
ARITHMETIC = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
FLIPPED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}
LOGICAL = {"and": "&", "or": "|", "xor": "^"}
VIEWS = {"unsqueeze", "view", "reshape", "expand", "contiguous", "clone", "detach", "squeeze"}
FACTORIES = {torch.ones: 1, torch.zeros: 0, torch.full: None}
CASTS = {"float": torch.float32, "bool": torch.bool, "long": torch.int64, "int": torch.int32,
         "half": torch.float16, "bfloat16": torch.bfloat16}
UNBOUNDED = 1 << 30
"""A band edge that bounds nothing (the kernel clips it to the keys; its text spells this number)."""


def attention_with_positions(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: Spec = ("number", True),
                             mask_dtype: str = "bool", scale: float | None = None,
                             enable_gqa: bool = False) -> torch.Tensor:
    """``scaled_dot_product_attention`` whose ``attn_mask`` is ``positions`` evaluated at every
    (query, key) pair: what :func:`rewrite` puts in place of the call and the mask it replaced."""
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
    if head in COMPARISONS:
        return f"({parts[0]} {COMPARISONS[head]} {parts[1]})"
    if head in ARITHMETIC:
        return f"({parts[0]} {ARITHMETIC[head]} {parts[1]})"
    if head in LOGICAL:
        return f"({_truth(spec[1])} {LOGICAL[head]} {_truth(spec[2])})"
    if head == "not":
        return f"({parts[0]} == 0)"
    if head == "neg":
        return f"(-{parts[0]})"
    calls = {"abs": "tl.abs", "maximum": "tl.maximum", "minimum": "tl.minimum", "where": "tl.where"}
    return f"{calls[head]}({', '.join(parts)})"


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
    if head == "cast" and spec[1] in ("float32", "int64", "int32"):
        return _linear(spec[2])
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
    if b == 0 or a != -b:
        return -math.inf, math.inf
    edge = -c / b  # the comparison reads d (op') edge, d = j - i; its sense flips where b < 0
    above = (head in ("gt", "ge")) == (b > 0)
    if head == "eq":
        return edge, edge
    return (edge, math.inf) if above else (-math.inf, edge)


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


class _Arange:
    """``torch.arange``'s values, ``start + step * k`` for k below ``length``, not yet placed along the
    queries or the keys (its views decide: the dimension it spans, counted from the end)."""

    def __init__(self, start: float, step: float, length: int) -> None:
        self.start, self.step, self.length = start, step, length


def _shape(node: torch.fx.Node) -> tuple[int, ...]:
    meta = node.meta.get("tensor_meta")
    if meta is None or not hasattr(meta, "shape"):
        raise CannotCover(f"`{node.name}` has no known shape")
    return tuple(int(s) for s in meta.shape)


def _dtype(node: torch.fx.Node) -> torch.dtype:
    return node.meta["tensor_meta"].dtype


def _only_positions(mask: torch.fx.Node) -> bool:
    """Is ``mask`` computed from sizes, numbers and factories alone (no input, parameter or buffer
    read for its values)?"""
    pending, seen = [mask], set()
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op in ("placeholder", "get_attr"):
            return False
        if not reads_metadata(node):
            pending.extend(node.all_input_nodes)
    return True


class _Reader:
    """The graph of a mask made from positions, read as a :data:`Spec` over the scores' last two
    dimensions, ``seq_q`` queries by ``seq_k`` keys (CannotCover with the reason where it cannot)."""

    def __init__(self, seq_q: int, seq_k: int) -> None:
        self.seq_q, self.seq_k = seq_q, seq_k
        self.read: dict[torch.fx.Node, Any] = {}

    def spec(self, value: Any) -> Spec:
        """An argument as a spec: a number, or a node's value placed along the queries or the keys."""
        if isinstance(value, (bool, int, float)):
            return ("number", value)
        if not isinstance(value, torch.fx.Node):
            raise CannotCover(f"a mask made in forward from {type(value).__name__}")
        got = self.value(value)
        if not isinstance(got, _Arange):
            return got
        shape = _shape(value)
        spanned = [len(shape) - d for d, size in enumerate(shape) if size != 1]
        if got.length == 1 and not spanned:
            return ("number", got.start)
        if spanned == [1] and got.length == self.seq_k:
            return ("j", got.start, got.step)
        if spanned == [2] and got.length == self.seq_q:
            return ("i", got.start, got.step)
        raise CannotCover(f"positions `{value.name}` of shape {list(shape)} do not run along the {self.seq_q} "
                          f"queries or the {self.seq_k} keys")

    def value(self, node: torch.fx.Node) -> Any:
        if node not in self.read:
            self.read[node] = self._read(node)
            if not isinstance(self.read[node], _Arange):  # placed by the views that use it
                self._check_shape(node)
        return self.read[node]

    def _check_shape(self, node: torch.fx.Node) -> None:
        shape = (1, 1, *_shape(node))[-2:]
        if shape[0] not in (1, self.seq_q) or shape[1] not in (1, self.seq_k):
            raise CannotCover(f"`{node.name}` of shape {list(_shape(node))} is not laid out as queries by keys "
                              f"({self.seq_q} x {self.seq_k})")
        if _dtype(node) == torch.float64:
            raise CannotCover("a mask computed in float64")

    def _read(self, node: torch.fx.Node) -> Any:
        target, args, kwargs = node.target, list(node.args), dict(node.kwargs)
        kwargs.pop("device", None)
        method = node.op == "call_method"
        if target is torch.arange:
            return self._arange(node, args, kwargs)
        if target in FACTORIES:
            value = FACTORIES[target] if target is not torch.full else (args[1:] or [kwargs.get("fill_value")])[0]
            if not isinstance(value, (bool, int, float)):
                raise CannotCover(f"`{node.name}` fills with a value that is not a number")
            return ("number", _typed(value, _dtype(node)))
        name = str(target) if method else None
        if name in VIEWS or target in (torch.unsqueeze, torch.reshape, torch.squeeze) or (
                target is operator.getitem and _plain_index(args[1])):
            return self._viewed(node, args[0])
        if name in ("tril", "triu") or target in (torch.tril, torch.triu):
            return self._triangle(node, args, kwargs, "tril" in str(getattr(target, "__name__", target)))
        if name in CASTS or name in ("to", "type"):
            return self._cast(node, args)
        return self._arithmetic(node, args, kwargs)

    def _arange(self, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any]) -> _Arange:
        """Its length as traced (the end may be a size read in forward: the kernel takes the lengths at
        run time, so only the start and the step must be numbers)."""
        kwargs.pop("dtype", None)  # the node's own dtype says what it is
        given = [*args, *(kwargs.pop(k) for k in ("start", "end", "step") if k in kwargs)]
        start, step = (0, 1) if len(given) == 1 else (given[0], given[2] if len(given) > 2 else 1)
        if kwargs or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in (start, step)):
            raise CannotCover(f"`{node.name}`: positions whose start or step is not a number")
        if _dtype(node).is_floating_point and _dtype(node) != torch.float32:
            raise CannotCover(f"`{node.name}`: positions in {_dtype(node)}")
        return _Arange(start, step, _shape(node)[0])

    def _viewed(self, node: torch.fx.Node, source: Any) -> Any:
        got = self.value(source)
        if not isinstance(got, _Arange) and (1, 1, *_shape(source))[-2:] != (1, 1, *_shape(node))[-2:]:
            raise CannotCover(f"`{node.name}` moves a mask's queries or keys to another dimension")
        return got

    def _triangle(self, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any], lower: bool) -> Spec:
        if _shape(node)[-2:] != (self.seq_q, self.seq_k):
            raise CannotCover(f"`{node.name}`: a triangle of a tensor that is not queries by keys")
        diagonal = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
        if not isinstance(diagonal, int):
            raise CannotCover(f"`{node.name}`: a triangle's diagonal that is not a number")
        zero = ("number", _typed(0, _dtype(node)))
        offset = ("sub", ("j", 0, 1), ("i", 0, 1))
        return ("where", ("le" if lower else "ge", offset, ("number", diagonal)), self.spec(args[0]), zero)

    def _cast(self, node: torch.fx.Node, args: list[Any]) -> Spec:
        dtype = _dtype(node)
        inner = self.spec(args[0])
        source = _dtype(args[0]) if isinstance(args[0], torch.fx.Node) else None
        return inner if dtype == source else ("cast", str(dtype).removeprefix("torch."), inner)

    def _arithmetic(self, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any]) -> Spec:
        op = _op_name(node, args)
        if op is None or (kwargs and not (op == "div" and kwargs == {"rounding_mode": None})):
            raise CannotCover(f"`{node.name}` ({node.target}) in a mask made in forward")
        if op == "masked_fill":
            return ("where", self.spec(args[1]), self.spec(args[2]), self.spec(args[0]))
        if op == "clamp":
            out = self.spec(args[0])
            low, high = (args[1:] + [None, None])[:2]
            out = out if low is None else ("maximum", out, self.spec(low))
            return out if high is None else ("minimum", out, self.spec(high))
        operands = [self.spec(a) for a in args]
        if _dtype(node) in LOW_PRECISION:
            raise CannotCover(f"`{node.name}`: mask arithmetic in {_dtype(node)} (torch rounds every step)")
        if op in ("and", "or", "xor", "not") and _dtype(node) != torch.bool:
            raise CannotCover(f"`{node.name}`: bitwise arithmetic on integers in a mask")
        if op == "mul" and all(_varies(s) for s in operands):
            raise CannotCover(f"`{node.name}`: a product of two positions")
        return (op, *operands)


def _typed(value: Any, dtype: torch.dtype) -> Any:
    return bool(value) if dtype == torch.bool else float(value) if dtype.is_floating_point else int(value)


def _plain_index(index: Any) -> bool:
    """An index that only adds dimensions of one or takes whole ones (``[None, :]``, ``[..., None]``)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or p == slice(None) for p in parts)


def _varies(spec: Spec) -> bool:
    return spec[0] in ("i", "j") or (spec[0] not in ("number",) and any(
        _varies(s) for s in spec[1:] if isinstance(s, tuple)))


UNARY = {operator.neg: "neg", torch.neg: "neg", torch.abs: "abs", operator.invert: "not", torch.logical_not: "not",
         torch.bitwise_not: "not", operator.abs: "abs"}
UNARY_NAMES = {"neg": "neg", "abs": "abs", "logical_not": "not", "bitwise_not": "not"}
TWO = {**{t: n for t, n in BINARY_TARGETS.items() if n in ("add", "sub", "mul", "div", "maximum", "minimum")},
       **{t: ("and" if n == "logical_and" else "or" if n == "logical_or" else "xor" if n == "logical_xor" else n)
          for t, n in {**COMPARE_TARGETS, **BITWISE_ON_BOOL}.items()},
       torch.where: "where", torch.masked_fill: "masked_fill", torch.clamp: "clamp"}
TWO_NAMES = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "maximum", "minimum": "minimum",
             "logical_and": "and", "logical_or": "or", "logical_xor": "xor", "bitwise_and": "and", "bitwise_or": "or",
             "masked_fill": "masked_fill", "clamp": "clamp", "where": "where",
             **{m: n for m, n in COMPARE_METHODS.items() if n in COMPARISONS}}


def _op_name(node: torch.fx.Node, args: list[Any]) -> str | None:
    if node.op == "call_method":
        name = UNARY_NAMES.get(str(node.target)) or TWO_NAMES.get(str(node.target))
    else:
        name = UNARY.get(node.target) or TWO.get(node.target)
    if name == "where" and node.op == "call_method":  # x.where(c, y): c ? x : y
        args[:] = [args[1], args[0], args[2]]
    return name


def rewrite(gm: torch.fx.GraphModule) -> bool:
    """Call :func:`attention_with_positions` in place of each ``scaled_dot_product_attention`` whose
    mask is made from positions alone; True if the graph changed. A mask it cannot read is left as it
    is, with the reason in the mask's ``meta`` for the message that refuses it."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not F.scaled_dot_product_attention or len(node.args) < 3:
            continue
        options = dict(node.kwargs)
        for at, name in enumerate(("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")):
            if len(node.args) > 3 + at:
                options[name] = node.args[3 + at]
        mask = options.pop("attn_mask", None)
        if not isinstance(mask, torch.fx.Node) or mask.op in ("placeholder", "get_attr") or \
                not _only_positions(mask) or options.pop("dropout_p", 0.0) or options.pop("is_causal", False):
            continue
        try:
            q, k = _shape(node.args[0]), _shape(node.args[1])
            reader = _Reader(q[-2], k[-2])
            spec = simplified(reader.spec(mask))
            _check_casts(spec)
        except CannotCover as exc:
            mask.meta["positions_refused"] = str(exc)
            continue
        dtype = str(_dtype(mask)).removeprefix("torch.")
        if _dtype(mask) in LOW_PRECISION and spec[0] != "cast":
            spec = ("cast", dtype, spec)  # rounded once at the end, as torch holds it
        kwargs = {"positions": spec, "mask_dtype": dtype, **options}
        with gm.graph.inserting_before(node):
            made = gm.graph.call_function(attention_with_positions, tuple(node.args[:3]), kwargs)
        made.meta = dict(node.meta)
        node.replace_all_uses_with(made)
        gm.graph.erase_node(node)
        for dead in reversed([n for n in gm.graph.nodes if n in reader.read or reads_metadata(n)]):
            if not dead.users:  # the mask and what it was made of, where nothing else reads them
                gm.graph.erase_node(dead)
        changed = True
    if changed:
        gm.recompile()
    return changed


def _check_casts(spec: Spec, root: bool = True) -> None:
    """Casts to fp16 or bf16 only as the mask's last step (each step before is exact in fp32)."""
    if spec[0] == "cast" and getattr(torch, spec[1]) in LOW_PRECISION and not root:
        raise CannotCover("a mask rounded to low precision before more arithmetic on it")
    for part in spec[1:]:
        if isinstance(part, tuple):
            _check_casts(part, root=False)


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
            cast = (lambda x: bool(x)) if kind == torch.bool else (lambda x: _typed(x, kind))
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
    return {expression}
'''


def kernel_function(mask: dict[str, Any]) -> str:
    """The Triton function the attention kernel calls for a mask made from positions (``mask``: the
    plan's, from :func:`planned`)."""
    kind = "True: the key is seen" if mask["kind"] == "bool" else "added to the scaled scores"
    return KERNEL_FUNCTION.format(kind=kind, expression=triton_text(mask["positions"]))
