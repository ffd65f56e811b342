"""Attention masks made in ``forward`` from positions alone, read from the traced graph.

:func:`rewrite` finds each ``scaled_dot_product_attention`` whose ``attn_mask`` is computed from
``arange`` positions, sizes, numbers and factories alone (``(j <= i) & (i - j < window)``,
``torch.ones(t, t, dtype=torch.bool).tril()``, ``torch.full((t, t), -inf).triu(1)``), reads the mask's
graph as an expression of the query and key positions (:mod:`attention_positions`), and calls
:func:`attention_positions.attention_with_positions` in its place; the mask's own ops leave the
graph. A mask it cannot read stays as it is, refused later with the reason.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.attention_positions import (
    COMPARISONS,
    Spec,
    attention_with_positions,
    simplified,
    typed_number,
)
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import (
    BINARY_TARGETS,
    BITWISE_ON_BOOL,
    COMPARE_METHODS,
    COMPARE_TARGETS,
    LOW_PRECISION,
    drop_unused_ancestors,
    reads_metadata,
)

CASTS = {"float", "bool", "long", "int", "half", "bfloat16"}
FACTORIES = {torch.ones: 1, torch.zeros: 0, torch.full: None}
VIEWS = {"unsqueeze", "view", "reshape", "expand", "contiguous", "clone", "detach", "squeeze"}


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
            return ("number", typed_number(value, _dtype(node)))
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
        if kwargs or not all(isinstance(a, (int, float)) and not isinstance(a, bool) and float(a).is_integer()
                             for a in (start, step)):
            # torch rounds start + k * step once from float64; the kernel would compute it in fp32
            raise CannotCover(f"`{node.name}`: positions whose start or step is not a whole number")
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
        zero = ("number", typed_number(0, _dtype(node)))
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
        if _dtype(node) == torch.bool and op in ("add", "mul"):
            op = "or" if op == "add" else "and"  # torch's arithmetic on bools is logic
        elif _dtype(node) == torch.bool and op in ("sub", "div", "maximum", "minimum"):
            raise CannotCover(f"`{node.name}`: arithmetic on booleans in a mask")
        if _dtype(node) in LOW_PRECISION:
            raise CannotCover(f"`{node.name}`: mask arithmetic in {_dtype(node)} (torch rounds every step)")
        if op in ("and", "or", "xor", "not") and _dtype(node) != torch.bool:
            raise CannotCover(f"`{node.name}`: bitwise arithmetic on integers in a mask")
        if op == "mul" and all(_varies(s) for s in operands):
            raise CannotCover(f"`{node.name}`: a product of two positions")
        return (op, *operands)


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
        except (CannotCover, ArithmeticError, ValueError, TypeError, KeyError, IndexError) as exc:
            # a mask this reader cannot hold stays as it was, refused later with this reason
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
        drop_unused_ancestors(gm, mask)  # the mask and the sizes it was made of, where nothing else reads them
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
