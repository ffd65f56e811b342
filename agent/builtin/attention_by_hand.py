"""Attention written by hand, found in the traced graph and called as scaled-dot-product attention, so
that one flash kernel computes it instead of two GEMMs with the scores through memory.

``softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v``, the scale a number (``* c``, ``/ c``, or
none), optionally causal as code builds the mask in ``forward``:
``scores.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf"))`` or a buffer of that
triangle sliced to ``t`` (its values read at the traced size), or positions compared
(``i[None, :] > i[:, None]`` with ``i = torch.arange(t)``, causal at any size by its form); a dropout
of nothing (``p=0``) between the softmax and the product is passed over. Every intermediate must be
used by the next step alone (the scores or weights returned too stay as written). Heads wider than
the flash kernel holds stay as written.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.attention import WIDEST_HEAD
from kernelevo.agent.builtin.rewrite_in_place import option
from kernelevo.agent.builtin.vocabulary import Capture, drop_unused_ancestors, is_call, reads_metadata

MATMULS = {operator.matmul, torch.matmul}
SOFTMAXES = {torch.softmax, F.softmax}


def _only_user(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    return len(node.users) == 1 and user in node.users


def _keys(node: Any) -> torch.fx.Node | None:
    """``k`` where ``node`` is k with its last two dims swapped (``transpose(-2, -1)``, ``.mT``)."""
    if not isinstance(node, torch.fx.Node) or len(node.users) != 1:
        return None
    rank = len(node.meta["tensor_meta"].shape) if "tensor_meta" in node.meta else 0
    if node.op == "call_function" and node.target is getattr and node.args[1] == "mT":
        return node.args[0]
    if is_call(node, {torch.transpose}, {"transpose"}) and len(node.args) == 3 and rank >= 2:
        if {d % rank for d in node.args[1:] if isinstance(d, int)} == {rank - 2, rank - 1}:
            return node.args[0]
    return None


HEAD_SCALE = "1 / sqrt(head_dim)"
"""The scale read from the head's own size: attention's default, at any size."""


def _is_shape(node: Any) -> bool:
    """Is ``node`` a tensor's ``.shape``?"""
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is getattr and \
        node.args[1] == "shape"


def _head_size(node: Any, heads: tuple[torch.fx.Node, ...]) -> bool:
    """Is ``node`` the size of the last dim of q or k (``k.size(-1)``, ``q.shape[-1]``)?"""
    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_method" and node.target == "size" and len(node.args) == 2:
        tensor, dim = node.args
    elif node.op == "call_function" and node.target is operator.getitem and _is_shape(node.args[0]):
        tensor, dim = node.args[0].args[0], node.args[1]
    else:
        return False
    rank = len(tensor.meta["tensor_meta"].shape) if "tensor_meta" in getattr(tensor, "meta", {}) else 0
    return tensor in heads and isinstance(dim, int) and rank > 0 and dim % rank == rank - 1


def _root_of_head(node: Any, heads: tuple[torch.fx.Node, ...]) -> bool:
    """Is ``node`` sqrt(head size) (``math.sqrt(d)``, ``d ** 0.5``)?"""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    if node.target in (math.sqrt, torch.sqrt) and len(node.args) == 1:
        return _head_size(node.args[0], heads)
    return node.target is operator.pow and node.args[1] == 0.5 and _head_size(node.args[0], heads)


def _inverse_root_of_head(node: Any, heads: tuple[torch.fx.Node, ...]) -> bool:
    """Is ``node`` 1 / sqrt(head size) (``1.0 / math.sqrt(d)``, ``d ** -0.5``)?"""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    if node.target is operator.truediv and node.args[0] in (1, 1.0):
        return _root_of_head(node.args[1], heads)
    return node.target is operator.pow and node.args[1] == -0.5 and _head_size(node.args[0], heads)


def _scale(node: torch.fx.Node) -> tuple[torch.fx.Node, float | torch.fx.Node | None, bool]:
    """(the scores before scaling, the factor, whether they are divided by it): the factor a number
    (a division by one already inverted), a node the caller names (:func:`_resolved`), or None where
    ``node`` is not scaled."""
    if is_call(node, {operator.mul, torch.mul}, {"mul"}) and len(node.args) == 2:
        a, b = node.args
        if isinstance(a, (int, float)) and isinstance(b, torch.fx.Node):
            a, b = b, a
        if isinstance(a, torch.fx.Node) and "tensor_meta" in a.meta:
            if isinstance(b, (int, float)):
                return a, float(b), False
            if isinstance(b, torch.fx.Node):
                return a, b, False
        return node, None, False
    if is_call(node, {operator.truediv, torch.div}, {"div"}) and len(node.args) == 2 and not node.kwargs:
        a, b = node.args
        if isinstance(b, (int, float)) and b != 0:
            return a, 1.0 / float(b), False
        if isinstance(b, torch.fx.Node) and "tensor_meta" not in b.meta:
            return a, b, True
    return node, None, False


def _resolved(factor: float | torch.fx.Node | None, divides: bool, q: torch.fx.Node,
              k: torch.fx.Node) -> float | str | None | bool:
    """The scale as a number or :data:`HEAD_SCALE`; False where the factor is a value this cannot name."""
    if not isinstance(factor, torch.fx.Node):
        return factor
    named = _root_of_head(factor, (q, k)) if divides else _inverse_root_of_head(factor, (q, k))
    return HEAD_SCALE if named else False


def _position_pair(node: Any) -> tuple[torch.fx.Node, int] | None:
    """(the ``arange`` call, the axis it runs along: -1 or -2) where ``node`` is ``i[None, :]`` or
    ``i[:, None]`` (or ``unsqueeze(0)`` / ``unsqueeze(1)``) of ``i = torch.arange(t)`` from 0 by 1."""
    if not isinstance(node, torch.fx.Node) or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return None
    source = node.args[0]
    if not (source.op == "call_function" and source.target is torch.arange and len(source.args) == 1 and
            not {"start", "step", "end"} & set(source.kwargs)):
        return None
    index = node.args[1] if len(node.args) > 1 else None
    if node.op == "call_function" and node.target is operator.getitem and isinstance(index, tuple) and \
            len(index) == 2 and None in index and slice(None) in [i for i in index if i is not None]:
        return source, -1 if index[0] is None else -2
    if node.op == "call_method" and node.target == "unsqueeze" and index in (0, 1):
        return source, -1 if index == 0 else -2
    return None


def _future_of_positions(node: Any) -> bool:
    """Is ``node`` ``j > i`` (or ``i < j``) with ``j`` and ``i`` one ``arange`` along the keys and the
    queries: true exactly above the diagonal at every size?"""
    greater = is_call(node, {operator.gt, torch.gt}, {"gt"})
    if not (greater or is_call(node, {operator.lt, torch.lt}, {"lt"})) or len(node.args) != 2:
        return False
    left, right = (_position_pair(a) for a in node.args)
    if left is None or right is None or left[0] is not right[0]:
        return False
    keys, queries = (left, right) if greater else (right, left)
    return keys[1] == -1 and queries[1] == -2


def _causal_mask(node: Any, scores: torch.fx.Node, value_of: Callable[[torch.fx.Node], Any] | None) -> bool:
    """Is ``node`` a mask true exactly above the diagonal of the scores' last two dims at every size:
    ``m == 0`` with ``m`` the lower triangle of ones (``torch.tril(torch.ones(t, t))`` built in
    forward, or a buffer holding it, sliced to ``t``; its values are read at the traced size, ``value_of``;
    None: only the structure is checked, for shapes), or positions compared (``i[None, :] > i[:, None]``
    with ``i = torch.arange(t)``, which holds at any size by its form)? The mask may read sizes of the
    inputs but no values of theirs."""
    shape = tuple(scores.meta["tensor_meta"].shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return False
    if _future_of_positions(node):
        return True
    if not is_call(node, {operator.eq, torch.eq}, {"eq"}) or node.args[1] != 0 or \
            not isinstance(node.args[0], torch.fx.Node):
        return False
    mask = node.args[0]
    pending, seen = [mask], set()
    while pending:  # the mask depends on the inputs through their sizes alone
        n = pending.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder":
            return False
        if not reads_metadata(n):
            pending.extend(n.all_input_nodes)
    if value_of is None:
        return True
    value = value_of(mask)
    if not isinstance(value, torch.Tensor) or value.dim() < 2 or tuple(value.shape[-2:]) != shape[-2:] or \
            any(s != 1 for s in value.shape[:-2]):
        return False
    causal = torch.tril(torch.ones(shape[-2:], dtype=torch.bool))
    return bool(torch.equal(value.reshape(shape[-2:]) != 0, causal))


def _identity(gm: torch.fx.GraphModule, node: Any) -> Any:
    """What ``node`` passes on unchanged: an ``nn.Identity``, or a dropout that drops nothing."""
    if isinstance(node, torch.fx.Node) and node.op == "call_module" and len(node.users) == 1:
        sub = gm.get_submodule(str(node.target))
        if isinstance(sub, nn.Identity) or (isinstance(sub, nn.Dropout) and sub.p == 0):
            return node.args[0]
    return node


def _attention(gm: torch.fx.GraphModule, out: torch.fx.Node,
               value_of: Callable[[torch.fx.Node], Any] | None) -> dict[str, Any] | None:
    """q, k, v and the options if ``out`` is attention by hand (see the module); else None."""
    if not is_call(out, MATMULS, {"matmul"}) or len(out.args) != 2:
        return None
    dropped, v = out.args
    weights = _identity(gm, dropped)
    if not is_call(weights, SOFTMAXES, {"softmax"}) or \
            not _only_user(weights, dropped if weights is not dropped else out):
        return None
    dim = option(weights, "dim", 1, None)
    rank = len(weights.meta["tensor_meta"].shape)
    dtype_at = 3 if weights.op == "call_function" and weights.target is F.softmax else 2  # F.softmax: _stacklevel
    if not isinstance(dim, int) or dim % rank != rank - 1 or option(weights, "dtype", dtype_at, None) is not None:
        return None
    scores, causal = weights.args[0], False
    if is_call(scores, {torch.masked_fill}, {"masked_fill"}) and _only_user(scores, weights):
        fill = option(scores, "value", 2, None)
        if not (isinstance(fill, float) and math.isinf(fill) and fill < 0) or \
                not _causal_mask(option(scores, "mask", 1, None), scores, value_of):
            return None
        scores, causal = scores.args[0], True
    if not isinstance(scores, torch.fx.Node) or len(scores.users) != 1:
        return None
    product, factor, divides = _scale(scores)
    if product is not scores and not _only_user(product, scores):
        return None
    if not is_call(product, MATMULS, {"matmul"}) or len(product.args) != 2:
        return None
    q, keys = product.args
    k = _keys(keys)
    if k is None or not all(isinstance(t, torch.fx.Node) and len(t.meta["tensor_meta"].shape) == 4 for t in (q, k, v)):
        return None
    qs, ks, vs = (tuple(t.meta["tensor_meta"].shape) for t in (q, k, v))
    if ks != vs or qs[0] != ks[0] or qs[3] != ks[3] or not (qs[1] == ks[1] or ks[1] == 1):
        return None  # keys broadcast over the batch or values of another width: the matmuls as written
    scale = _resolved(factor, divides, q, k)
    if scale is False:
        return None
    # one head of keys and values broadcast to every query head (multi-query attention): grouped heads
    return {"q": q, "k": k, "v": v, "causal": causal, "scale": scale, "grouped": ks[1] != qs[1]}


def rewrite(gm: torch.fx.GraphModule, there: dict[str, tuple[int, ...]], inputs: list[Any] | None = None) -> bool:
    """Call scaled-dot-product attention where the graph computes it by hand and the head (at the size
    being optimised: ``there``, shapes by node name) fits the flash kernel; True if it did (the graph
    is then recompiled; shapes are unchanged). ``inputs``: the traced inputs, to read a mask's values
    (None: masks are taken by their structure, for a graph run only for its shapes)."""
    changed = False
    values: dict[str, Any] = {}

    def value_of(node: torch.fx.Node) -> Any:
        if not values:
            values.update(Capture(gm).run_up_to(*(inputs or [])))
        return values.get(node.name)

    for node in list(gm.graph.nodes):
        found = _attention(gm, node, value_of if inputs is not None else None) \
            if node.op in ("call_function", "call_method") else None
        if found is None:
            continue
        q = found["q"]
        if there.get(q.name, tuple(q.meta["tensor_meta"].shape))[-1] > WIDEST_HEAD:
            continue  # as written: two batched GEMMs, the scores through memory
        with gm.graph.inserting_before(node):
            # unscaled scores are scaled by 1, not by attention's default of 1 / sqrt(head_dim)
            scale = {None: 1.0, HEAD_SCALE: None}.get(found["scale"], found["scale"])
            kwargs = {"is_causal": found["causal"], "scale": scale}
            if found["grouped"]:
                kwargs["enable_gqa"] = True
            attended = gm.graph.call_function(F.scaled_dot_product_attention, (found["q"], found["k"], found["v"]),
                                              kwargs)
        attended.meta = dict(node.meta)
        node.replace_all_uses_with(attended)
        drop_unused_ancestors(gm, node)  # the scores, the weights, the mask and the sizes it was made of
        changed = True
    if changed:
        gm.recompile()
    return changed
