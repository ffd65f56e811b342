"""Attention written by hand, found in the traced graph and called as scaled-dot-product attention, so
that one flash kernel computes it instead of two GEMMs with the scores through memory.

``softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v``, the scale a number (``* c``, ``/ c``, or
none), optionally causal as code builds the mask in ``forward``:
``scores.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf"))``. Every intermediate must be
used by the next step alone (the scores or weights returned too stay as written). Heads wider than
the flash kernel holds stay as written.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.attention import WIDEST_HEAD
from kernelevo.agent.builtin.rewrite_in_place import option

MATMULS = {operator.matmul, torch.matmul}
SOFTMAXES = {torch.softmax, F.softmax}


def _call(node: Any, functions: set[Any], methods: set[str]) -> bool:
    return isinstance(node, torch.fx.Node) and (
        (node.op == "call_function" and node.target in functions) or (node.op == "call_method" and node.target in methods))


def _only_user(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    return len(node.users) == 1 and user in node.users


def _keys(node: Any) -> torch.fx.Node | None:
    """``k`` where ``node`` is k with its last two dims swapped (``transpose(-2, -1)``, ``.mT``)."""
    if not isinstance(node, torch.fx.Node) or len(node.users) != 1:
        return None
    rank = len(node.meta["tensor_meta"].shape) if "tensor_meta" in node.meta else 0
    if node.op == "call_function" and node.target is getattr and node.args[1] == "mT":
        return node.args[0]
    if _call(node, {torch.transpose}, {"transpose"}) and len(node.args) == 3 and rank >= 2:
        if {d % rank for d in node.args[1:] if isinstance(d, int)} == {rank - 2, rank - 1}:
            return node.args[0]
    return None


def _scale(node: torch.fx.Node) -> tuple[torch.fx.Node, float | None] | None:
    """(the scores before scaling, the scale) where ``node`` scales by a number (None: not scaled)."""
    if _call(node, {operator.mul, torch.mul}, {"mul"}) and len(node.args) == 2:
        a, b = node.args
        if isinstance(b, (int, float)) and isinstance(a, torch.fx.Node):
            return a, float(b)
        if isinstance(a, (int, float)) and isinstance(b, torch.fx.Node):
            return b, float(a)
    if _call(node, {operator.truediv, torch.div}, {"div"}) and len(node.args) == 2 and \
            isinstance(node.args[1], (int, float)) and not node.kwargs and node.args[1] != 0:
        return node.args[0], 1.0 / float(node.args[1])
    return node, None


def _causal_mask(node: Any, scores: torch.fx.Node) -> bool:
    """Is ``node`` ``tril(ones(t, t)) == 0`` with t the scores' own square size?"""
    if not _call(node, {operator.eq, torch.eq}, {"eq"}) or node.args[1] != 0:
        return False
    tril = node.args[0]
    if not _call(tril, {torch.tril}, {"tril"}) or option(tril, "diagonal", 1, 0) != 0:
        return False
    ones = tril.args[0]
    if not _call(ones, {torch.ones}, set()) or len(ones.args) != 2 or ones.args[0] is not ones.args[1] and \
            ones.args[0] != ones.args[1]:
        return False
    shape = tuple(scores.meta["tensor_meta"].shape)
    return len(shape) >= 2 and shape[-1] == shape[-2] and tuple(tril.meta["tensor_meta"].shape) == shape[-2:]


def _attention(out: torch.fx.Node) -> dict[str, Any] | None:
    """q, k, v and the options if ``out`` is attention by hand (see the module); else None."""
    if not _call(out, MATMULS, {"matmul"}) or len(out.args) != 2:
        return None
    weights, v = out.args
    if not _call(weights, SOFTMAXES, {"softmax"}) or not _only_user(weights, out):
        return None
    dim = option(weights, "dim", 1, None)
    rank = len(weights.meta["tensor_meta"].shape)
    if not isinstance(dim, int) or dim % rank != rank - 1 or option(weights, "dtype", 2, None) is not None:
        return None
    scores, causal = weights.args[0], False
    if _call(scores, {torch.masked_fill}, {"masked_fill"}) and _only_user(scores, weights):
        fill = option(scores, "value", 2, None)
        if not (isinstance(fill, float) and math.isinf(fill) and fill < 0) or \
                not _causal_mask(option(scores, "mask", 1, None), scores):
            return None
        scores, causal = scores.args[0], True
    if not isinstance(scores, torch.fx.Node) or len(scores.users) != 1:
        return None
    found = _scale(scores)
    if found is None:
        return None
    product, scale = found
    if product is not scores and not _only_user(product, scores):
        return None
    if not _call(product, MATMULS, {"matmul"}) or len(product.args) != 2:
        return None
    q, keys = product.args
    k = _keys(keys)
    if k is None or not all(isinstance(t, torch.fx.Node) and len(t.meta["tensor_meta"].shape) == 4 for t in (q, k, v)):
        return None
    return {"q": q, "k": k, "v": v, "causal": causal, "scale": scale}


def rewrite(gm: torch.fx.GraphModule, there: dict[str, tuple[int, ...]]) -> bool:
    """Call scaled-dot-product attention where the graph computes it by hand and the head (at the size
    being optimised: ``there``, shapes by node name) fits the flash kernel; True if it did (the graph
    is then recompiled; shapes are unchanged)."""
    changed = False
    for node in list(gm.graph.nodes):
        found = _attention(node) if node.op in ("call_function", "call_method") else None
        if found is None:
            continue
        q = found["q"]
        if there.get(q.name, tuple(q.meta["tensor_meta"].shape))[-1] > WIDEST_HEAD:
            continue  # as written: two batched GEMMs, the scores through memory
        ancestors = _ancestors(node)
        with gm.graph.inserting_before(node):
            # unscaled scores are scaled by 1, not by attention's default of 1 / sqrt(head_dim)
            kwargs = {"is_causal": found["causal"], "scale": 1.0 if found["scale"] is None else found["scale"]}
            attended = gm.graph.call_function(F.scaled_dot_product_attention, (found["q"], found["k"], found["v"]),
                                              kwargs)
        attended.meta = dict(node.meta)
        node.replace_all_uses_with(attended)
        for dead in reversed([n for n in gm.graph.nodes if n in ancestors or n is node]):
            if not dead.users and dead.op in ("call_function", "call_method"):
                gm.graph.erase_node(dead)  # the scores, the weights, the mask and the sizes it was built from
        changed = True
    if changed:
        gm.recompile()
    return changed


def _ancestors(node: torch.fx.Node) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    pending = list(node.all_input_nodes)
    while pending:
        n = pending.pop()
        if n not in seen:
            seen.add(n)
            pending.extend(n.all_input_nodes)
    return seen
