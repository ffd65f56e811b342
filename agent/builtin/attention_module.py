"""``nn.MultiheadAttention`` written in the traced graph as the ops it computes, so that the planners see
a linear, a rearrangement into heads, scaled-dot-product attention, the heads merged and a linear,
each of which a template covers.

Self-attention only (the same tensor as query, key and value), as vision and encoder blocks use it:
the in-projection is one GEMM of ``[..., E]`` by ``in_proj_weight`` (``[3E, E]``), whose output viewed as
``[..., 3, heads, head_dim]`` and permuted to ``[3, batch, heads, seq, head_dim]`` holds q, k and v one
after another; attention scales by ``head_dim ** -0.5`` as the module does. Masks, a separate key or
value, ``bias_k``/``add_zero_attn``, dropout while training and the averaged weights (``[1]`` of the
result) leave the module as it is.
"""

from __future__ import annotations

import operator

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.rewrite_in_place import option


def _plain_call(node: torch.fx.Node) -> torch.fx.Node | None:
    """The input of a self-attention call with no mask and no weights used, else None."""
    query = option(node, "query", 0, None)
    key, value = option(node, "key", 1, None), option(node, "value", 2, None)
    if not isinstance(query, torch.fx.Node) or key is not query or value is not query:
        return None
    if any(option(node, name, i, None) is not None for name, i in (("key_padding_mask", 3), ("attn_mask", 5))) or \
            option(node, "is_causal", 7, False):
        return None
    if not node.users or any(u.op != "call_function" or u.target is not operator.getitem or
                             (u.args[1] != 0 and u.users) for u in node.users):
        return None  # the weights are used
    meta = query.meta.get("tensor_meta")
    return query if meta is not None and len(meta.shape) == 3 else None


def rewrite(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Replace ``node`` (a call of an ``nn.MultiheadAttention``) by its ops where the module and the call
    are of the covered kind (see the module); True if it did."""
    attn = gm.get_submodule(str(node.target))
    if not isinstance(attn, nn.MultiheadAttention) or not attn._qkv_same_embed_dim or attn.bias_k is not None \
            or attn.add_zero_attn or (attn.dropout and attn.training):
        return False
    x = _plain_call(node)
    if x is None:
        return False
    heads, head_dim = attn.num_heads, attn.head_dim
    graph, name = gm.graph, str(node.target)
    with graph.inserting_before(node):
        bias = graph.get_attr(f"{name}.in_proj_bias") if attn.in_proj_bias is not None else None
        qkv = graph.call_function(F.linear, (x, graph.get_attr(f"{name}.in_proj_weight"), bias))
        split = graph.call_method("unflatten", (qkv, -1, (3, heads, head_dim)))
        # [batch, seq, 3, heads, d] (batch first) or [seq, batch, 3, heads, d] -> [3, batch, heads, seq, d]
        order = (2, 0, 3, 1, 4) if attn.batch_first else (2, 1, 3, 0, 4)
        moved = graph.call_method("permute", (split, *order))
        q, k, v = (graph.call_function(operator.getitem, (moved, i)) for i in range(3))
        attended = graph.call_function(F.scaled_dot_product_attention, (q, k, v))
        back = (0, 2, 1, 3) if attn.batch_first else (2, 0, 1, 3)
        merged = graph.call_method("flatten", (graph.call_method("permute", (attended, *back)), 2))
        out_bias = graph.get_attr(f"{name}.out_proj.bias") if attn.out_proj.bias is not None else None
        out = graph.call_function(F.linear, (merged, graph.get_attr(f"{name}.out_proj.weight"), out_bias))
    for user in list(node.users):  # the output's item 0, and items never read (the weights unpacked)
        user.replace_all_uses_with(out)
        graph.erase_node(user)
    graph.erase_node(node)
    return True
