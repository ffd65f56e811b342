"""Functions written in the traced graph as the ops they are made of, as torch computes them, so that
the planners see only ops the vocabulary knows. Each rewrite is plain torch (a part kept in torch still
runs as written); options a rewrite does not follow leave the call as it was.

- ``normalize(x, p, dim, eps)``: ``x / max(||x||_p over dim, eps)``, the norm kept for broadcasting.
- ``glu(x, dim)``: the first half of ``x`` along ``dim`` times the sigmoid of the second.
- ``binary_cross_entropy_with_logits(x, y)``: ``max(x, 0) - x * y + log(1 + exp(-|x|))`` (no exp of a
  large positive value); with ``pos_weight``, torch's ``(1 - y) x + (1 + (pos_weight - 1) y) (log(1 +
  exp(-|x|)) + max(-x, 0))``; times ``weight``; then the reduction. A module's weights are read from it.
- ``nll_loss(log_softmax(x, 1), t)``: the cross-entropy of ``x`` and ``t`` (the classes along dim 1 at
  any rank, class weights kept), which one template computes without writing the log-probabilities out.
- ``adaptive_avg_pool{1,2,3}d(x, 1)`` (a global average, module or function): the mean over the pooled
  trailing dimensions, kept as ones; ``adaptive_max_pool{1,2,3}d(x, 1)`` without indices: the amax;
  other output sizes are left as they are. ``max_pool{1,2,3}d`` with ``return_indices`` whose indices
  nothing reads: the pooling alone.
- ``linalg.norm(x, ord, dim)``: a vector norm over one dim, or the Frobenius norm over two (the 2-norm
  of their values).
- ``var_mean`` and ``std_mean``: the variance (or deviation) and the mean, each where it is used.
- ``instance_norm(x)`` from the input's own statistics, without weights: ``(x - mean) / sqrt(var + eps)``
  over the spatial dims (the biased variance); the modules have a template of their own.
- ``nn.MultiheadAttention`` (self-attention, no masks): see :mod:`attention_module`; ``nn.GRUCell`` and
  ``nn.RNNCell``: see :mod:`rewrite_cells`.
- ``triu`` or ``tril`` of a boolean matrix of ones made in ``forward`` (a causal mask): the comparison
  of column and row positions it is.
- Products (``mv``, ``addmm``, a diagonal or one-hot matmul, ``linear`` of a computed weight): see
  :mod:`rewrite_products`.
- ``lp_pool{1,2}d(x, p, k, stride, ceil_mode)`` (module or function), as torch computes it: the
  average pool of ``x^p``, ``sign * relu(abs)`` of it times the window's size, to the power ``1 / p``;
  for p infinite, the max pool of ``|x|`` (negated twice for minus infinity).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin import attention_module
from kernelevo.agent.builtin.rewrite_cells import rewrite_cell
from kernelevo.agent.builtin.rewrite_in_place import option
from kernelevo.agent.builtin.rewrite_products import PRODUCT_REWRITES

FUNCTION_MODULES = {nn.GLU: (F.glu, ("dim",)),
                    nn.BCEWithLogitsLoss: (F.binary_cross_entropy_with_logits, ("reduction",)),
                    nn.NLLLoss: (F.nll_loss, ("reduction", "ignore_index")),
                    nn.CrossEntropyLoss: (F.cross_entropy, ("ignore_index", "reduction", "label_smoothing")),
                    nn.AdaptiveAvgPool1d: (F.adaptive_avg_pool1d, ("output_size",)),
                    nn.AdaptiveAvgPool2d: (F.adaptive_avg_pool2d, ("output_size",)),
                    nn.AdaptiveAvgPool3d: (F.adaptive_avg_pool3d, ("output_size",)),
                    nn.AdaptiveMaxPool1d: (F.adaptive_max_pool1d, ("output_size", "return_indices")),
                    nn.AdaptiveMaxPool2d: (F.adaptive_max_pool2d, ("output_size", "return_indices")),
                    nn.AdaptiveMaxPool3d: (F.adaptive_max_pool3d, ("output_size", "return_indices")),
                    nn.LPPool1d: (F.lp_pool1d, ("norm_type", "kernel_size", "stride", "ceil_mode")),
                    nn.LPPool2d: (F.lp_pool2d, ("norm_type", "kernel_size", "stride", "ceil_mode")),
                    nn.Hardshrink: (F.hardshrink, ("lambd",)), nn.Softshrink: (F.softshrink, ("lambd",)),
                    nn.CELU: (F.celu, ("alpha",)), nn.Threshold: (F.threshold, ("threshold", "value")),
                    nn.RReLU: (F.rrelu, ("lower", "upper", "training"))}
"""Modules, as the function each calls with its options; one holding weights the function does not
take (:data:`WEIGHTS`) is left as it is."""
WEIGHTS = ("weight", "pos_weight")
WEIGHTED = {nn.BCEWithLogitsLoss: WEIGHTS, nn.NLLLoss: ("weight",), nn.CrossEntropyLoss: ("weight",)}
"""Modules whose weights the function takes, read from the module."""


PAD_MODULES = {**dict.fromkeys((nn.ConstantPad1d, nn.ConstantPad2d, nn.ConstantPad3d, nn.ZeroPad1d, nn.ZeroPad2d,
                                 nn.ZeroPad3d), "constant"),
               **dict.fromkeys((nn.ReflectionPad1d, nn.ReflectionPad2d, nn.ReflectionPad3d), "reflect"),
               **dict.fromkeys((nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d), "replicate"),
               **dict.fromkeys((nn.CircularPad1d, nn.CircularPad2d, nn.CircularPad3d), "circular")}
"""Padding modules, each ``F.pad`` with its amounts in the mode of its kind."""


def module_as_function(sub: nn.Module) -> tuple[Any, dict[str, Any], list[str]] | None:
    """The function ``sub`` calls, its options and the names of the weights it holds (passed to the
    function as the module's attributes), if it is one of :data:`FUNCTION_MODULES` or a padding."""
    if type(sub) in PAD_MODULES:
        mode = PAD_MODULES[type(sub)]
        value = {"value": float(sub.value)} if mode == "constant" else {}
        return F.pad, {"pad": tuple(sub.padding), "mode": mode, **value}, []
    held = [w for w in WEIGHTS if getattr(sub, w, None) is not None]
    if type(sub) not in FUNCTION_MODULES or not set(held) <= set(WEIGHTED.get(type(sub), ())):
        return None
    function, options = FUNCTION_MODULES[type(sub)]
    return function, {name: getattr(sub, name) for name in options}, held



BAG_REDUCTIONS = {"mean": "mean", "sum": "sum", "max": "amax"}


def _embedding_bag(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.fx.Node | None:
    """``nn.EmbeddingBag`` of fixed-size bags (a 2-D index tensor, no offsets, no weights per sample)
    as what it computes: the lookups, then their mean, sum or max over each bag. With a padding index
    the bag's mean leaves its entries out, which this is not: such bags are left as they are."""
    bag = gm.get_submodule(str(node.target))
    if not isinstance(bag, nn.EmbeddingBag) or len(node.args) != 1 or node.kwargs or \
            bag.mode not in BAG_REDUCTIONS or bag.padding_idx is not None or bag.max_norm is not None:
        return None
    table = gm.graph.get_attr(f"{node.target}.weight")
    looked_up = gm.graph.call_function(F.embedding, (node.args[0], table))
    return gm.graph.call_method(BAG_REDUCTIONS[bag.mode], (looked_up,), {"dim": 1})


def _normalize(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, p = option(node, "input", 0, None), option(node, "p", 1, 2.0)
    dim, eps = option(node, "dim", 2, 1), option(node, "eps", 3, 1e-12)
    if not isinstance(x, torch.fx.Node) or p not in (1, 2, float("inf")) or not isinstance(eps, (int, float)) \
            or node.kwargs.get("out") is not None:
        return None
    call = graph.call_function
    norm = call(torch.linalg.vector_norm, (x, float(p)), {"dim": dim, "keepdim": True})
    return call(operator.truediv, (x, call(torch.clamp, (norm,), {"min": float(eps)})))


ADAPTIVE_AVG_FUNCTIONS = {F.adaptive_avg_pool1d: 1, F.adaptive_avg_pool2d: 2, F.adaptive_avg_pool3d: 3,
                          torch.adaptive_avg_pool1d: 1, torch._C._nn.adaptive_avg_pool2d: 2,
                          torch._C._nn.adaptive_avg_pool3d: 3}
"""Adaptive average pools, by how many trailing dimensions they pool."""
ADAPTIVE_MAX_FUNCTIONS = {F.adaptive_max_pool1d: 1, F.adaptive_max_pool2d: 2, F.adaptive_max_pool3d: 3}
"""Adaptive max pools, likewise (their indices are not asked for)."""


def _global_average(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, size = option(node, "input", 0, None), option(node, "output_size", 1, None)
    sizes = size if isinstance(size, (tuple, list)) else [size]
    if not isinstance(x, torch.fx.Node) or not sizes or any(v != 1 for v in sizes):
        return None
    if node.target in ADAPTIVE_MAX_FUNCTIONS:
        if option(node, "return_indices", 2, False):
            return None
        pooled = tuple(range(-ADAPTIVE_MAX_FUNCTIONS[node.target], 0))
        return graph.call_function(torch.amax, (x,), {"dim": pooled, "keepdim": True})
    pooled = tuple(range(-ADAPTIVE_AVG_FUNCTIONS[node.target], 0))
    return graph.call_function(torch.mean, (x,), {"dim": pooled, "keepdim": True})


def _glu(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, dim = option(node, "input", 0, None), option(node, "dim", 1, -1)
    if not isinstance(x, torch.fx.Node) or not isinstance(dim, int):
        return None
    call = graph.call_function
    halves = call(torch.chunk, (x, 2), {"dim": dim})
    first, second = (call(operator.getitem, (halves, k)) for k in (0, 1))
    return call(operator.mul, (first, call(torch.sigmoid, (second,))))


def _bce_with_logits(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, y = option(node, "input", 0, None), option(node, "target", 1, None)
    reduction = option(node, "reduction", 5, "mean")
    if not isinstance(x, torch.fx.Node) or not isinstance(y, torch.fx.Node) or reduction not in ("none", "mean", "sum"):
        return None
    if any(option(node, name, k, None) is not None for name, k in (("size_average", 3), ("reduce", 4))):
        return None
    weight, pos_weight = option(node, "weight", 2, None), option(node, "pos_weight", 6, None)
    if any(w is not None and not isinstance(w, torch.fx.Node) for w in (weight, pos_weight)):
        return None
    call = graph.call_function
    soft = call(torch.log, (call(operator.add, (call(torch.exp, (call(torch.neg, (call(torch.abs, (x,)),)),)), 1.0)),))
    if pos_weight is None:
        loss = call(operator.add, (call(operator.sub, (call(torch.relu, (x,)), call(operator.mul, (x, y)))), soft))
    else:
        scale = call(operator.add, (call(operator.mul, (call(operator.sub, (pos_weight, 1.0)), y)), 1.0))
        below = call(torch.relu, (call(torch.neg, (x,)),))
        weighted = call(operator.mul, (scale, call(operator.add, (soft, below))))
        loss = call(operator.add, (call(operator.mul, (call(operator.sub, (1.0, y)), x)), weighted))
    if weight is not None:
        loss = call(operator.mul, (loss, weight))
    return loss if reduction == "none" else call(torch.sum if reduction == "sum" else torch.mean, (loss,))


def _nll_of_log_softmax(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    logp, target = option(node, "input", 0, None), option(node, "target", 1, None)
    if not isinstance(logp, torch.fx.Node) or not isinstance(target, torch.fx.Node) or len(logp.users) != 1:
        return None
    if logp.op != "call_function" or logp.target not in (F.log_softmax, torch.log_softmax):
        return None
    tm = logp.meta.get("tensor_meta")
    dim = option(logp, "dim", 1, None)
    rank = len(tm.shape) if tm is not None else 0
    if rank < 2 or not isinstance(dim, int) or dim % rank != 1 or option(logp, "dtype", 3, None) is not None:
        return None  # the classes are dim 1, at any rank
    if any(option(node, name, k, None) is not None for name, k in (("size_average", 3), ("reduce", 5))):
        return None
    options = {"ignore_index": option(node, "ignore_index", 4, -100), "reduction": option(node, "reduction", 6,
                                                                                              "mean"),
               "weight": option(node, "weight", 2, None)}
    return graph.call_function(F.cross_entropy, (logp.args[0], target), options)


def _instance_norm(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x = option(node, "input", 0, None)
    running = (option(node, "running_mean", 1, None), option(node, "running_var", 2, None))
    weight, bias = option(node, "weight", 3, None), option(node, "bias", 4, None)
    eps = option(node, "eps", 7, 1e-5)
    tm = x.meta.get("tensor_meta") if isinstance(x, torch.fx.Node) else None
    if tm is None or len(tm.shape) < 3 or any(r is not None for r in (*running, weight, bias)) or \
            option(node, "use_input_stats", 5, True) is not True or not isinstance(eps, (int, float)):
        return None
    call = graph.call_function
    dims = tuple(range(2, len(tm.shape)))
    mean = call(torch.mean, (x, dims), {"keepdim": True})
    var = call(torch.var, (x, dims), {"keepdim": True, "unbiased": False})
    return call(operator.mul, (call(operator.sub, (x, mean)),
                               call(torch.rsqrt, (call(operator.add, (var, float(eps))),))))


def _linalg_norm(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, order, dim = option(node, "input", 0, None), option(node, "ord", 1, None), option(node, "dim", 2, None)
    keepdim = option(node, "keepdim", 3, False)
    if not isinstance(x, torch.fx.Node) or node.kwargs.get("dtype") is not None or not isinstance(keepdim, bool):
        return None
    tm = x.meta.get("tensor_meta")
    rank = len(tm.shape) if tm is not None else None
    pair = isinstance(dim, (tuple, list)) and len(dim) == 2 or (dim is None and rank == 2)
    if pair and order in (None, "fro"):  # the Frobenius norm: the 2-norm of the values
        order = 2.0
    elif isinstance(dim, int) or (dim is None and rank == 1):
        order = 2.0 if order is None else order
        if not isinstance(order, (int, float)) or isinstance(order, bool):
            return None
    else:
        return None
    return graph.call_function(torch.linalg.vector_norm, (x, float(order)), {"dim": dim, "keepdim": keepdim})


def _split_moments(gm: torch.fx.GraphModule) -> bool:
    """``var_mean`` / ``std_mean`` whose users each take one element: those elements as their own calls."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in (torch.var_mean, torch.std_mean) or not node.users or \
                not all(u.op == "call_function" and u.target is operator.getitem and u.args[1] in (0, 1)
                        for u in node.users):
            continue
        x, dim = node.args[0], node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
        if isinstance(dim, bool):  # the old form var_mean(x, unbiased)
            dim = None
        keepdim = node.kwargs.get("keepdim", node.args[3] if len(node.args) > 3 else False)
        rank = len(getattr(x.meta.get("tensor_meta"), "shape", ())) if isinstance(x, torch.fx.Node) else 0
        spread = torch.var if node.target is torch.var_mean else torch.std
        for user in list(node.users):
            with gm.graph.inserting_before(user):
                part = (gm.graph.call_function(spread, node.args, dict(node.kwargs)) if user.args[1] == 0 else
                        gm.graph.call_function(torch.mean, (x,)) if dim is None and not keepdim else
                        gm.graph.call_function(torch.mean, (x, dim if dim is not None else tuple(range(rank))),
                                               {"keepdim": keepdim}))
            user.replace_all_uses_with(part)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)
        changed = True
    return changed


LP_POOLS = {F.lp_pool1d: (F.avg_pool1d, F.max_pool1d, 1), F.lp_pool2d: (F.avg_pool2d, F.max_pool2d, 2)}


def _lp_pool(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    average, largest, dims = LP_POOLS[node.target]
    x, p = option(node, "input", 0, None), option(node, "norm_type", 1, None)
    kernel, stride = option(node, "kernel_size", 2, None), option(node, "stride", 3, None)
    ceil_mode = option(node, "ceil_mode", 4, False)
    window = [kernel] * dims if isinstance(kernel, int) else list(kernel) if isinstance(kernel, (tuple, list)) else []
    if not isinstance(x, torch.fx.Node) or not isinstance(p, (int, float)) or isinstance(p, bool) or p == 0 or \
            len(window) != dims or not all(isinstance(k, int) for k in window) or not isinstance(ceil_mode, bool):
        return None
    call = graph.call_function
    if p in (float("inf"), float("-inf")):
        sign = 1.0 if p > 0 else -1.0
        pooled = call(largest, (call(operator.mul, (call(torch.abs, (x,)), sign)), kernel, stride, 0, 1, ceil_mode))
        return pooled if p > 0 else call(operator.neg, (pooled,))
    out = call(average, (call(torch.pow, (x, float(p))), kernel, stride, 0, ceil_mode))
    kept = call(operator.mul, (call(torch.sign, (out,)), call(F.relu, (call(torch.abs, (out,)),))))
    return call(torch.pow, (call(operator.mul, (kept, math.prod(window))), 1.0 / float(p)))


REWRITES = {F.normalize: _normalize, F.glu: _glu, F.binary_cross_entropy_with_logits: _bce_with_logits,
            F.nll_loss: _nll_of_log_softmax, torch.linalg.norm: _linalg_norm, F.instance_norm: _instance_norm,
            **PRODUCT_REWRITES, **dict.fromkeys((*ADAPTIVE_AVG_FUNCTIONS, *ADAPTIVE_MAX_FUNCTIONS), _global_average),
            **dict.fromkeys(LP_POOLS, _lp_pool)}


POOLS_WITH_INDICES = {F.max_pool1d_with_indices: F.max_pool1d, F.max_pool2d_with_indices: F.max_pool2d,
                      F.max_pool3d_with_indices: F.max_pool3d}


MAX_POOL_MODULES = {nn.MaxPool1d: F.max_pool1d, nn.MaxPool2d: F.max_pool2d, nn.MaxPool3d: F.max_pool3d}


def _pooling_with_indices(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[Any, dict[str, Any]] | None:
    """(the plain pooling function, its keyword arguments) where ``node`` is a max pooling that returns
    its indices too, as a function or a module (``nn.MaxPool2d(..., return_indices=True)``); else None."""
    if node.op == "call_function" and node.target in POOLS_WITH_INDICES:
        return POOLS_WITH_INDICES[node.target], {k: v for k, v in node.kwargs.items() if k != "return_indices"}
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
        return None
    sub = gm.get_submodule(str(node.target))
    if type(sub) not in MAX_POOL_MODULES or not sub.return_indices:
        return None
    return MAX_POOL_MODULES[type(sub)], {"kernel_size": sub.kernel_size, "stride": sub.stride,
                                         "padding": sub.padding, "dilation": sub.dilation,
                                         "ceil_mode": sub.ceil_mode}


def _pool_values_alone(gm: torch.fx.GraphModule) -> bool:
    """A max pooling with ``return_indices`` whose indices nothing reads as the plain pooling (what the
    pooling template computes): each read of its values becomes the pooling call."""
    changed = False
    for node in list(gm.graph.nodes):
        found = _pooling_with_indices(gm, node)
        users = list(node.users)
        if found is None or not all(u.op == "call_function" and u.target is operator.getitem and
                                    u.args[1] in (0, 1) for u in users):
            continue
        if any(u.args[1] == 1 and u.users for u in users):
            continue  # the indices are used
        plain, kwargs = found
        for user in users:
            if user.args[1] == 0:
                with gm.graph.inserting_before(user):
                    pooled = gm.graph.call_function(plain, node.args, kwargs)
                user.replace_all_uses_with(pooled)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)
        changed = True
    return changed


TRIANGLES = {torch.triu: operator.ge, torch.tril: operator.le, "triu": operator.ge, "tril": operator.le}
"""A triangle of a boolean matrix of ones, as the comparison of positions it is: column minus row at
least (upper) or at most (lower) the diagonal."""


def _triangle_mask(node: torch.fx.Node) -> tuple[Any, torch.fx.Node, int] | None:
    """(the comparison, the ``torch.ones`` call, the diagonal) where ``node`` is ``triu`` or ``tril`` of a
    boolean ``torch.ones(rows, cols)`` nothing else reads; else None."""
    compare = TRIANGLES.get(node.target) if node.op in ("call_function", "call_method") else None
    ones = node.args[0] if node.args else None
    if compare is None or not isinstance(ones, torch.fx.Node) or ones.op != "call_function" or \
            ones.target is not torch.ones or len(ones.users) != 1 or ones.kwargs.get("dtype") is not torch.bool:
        return None
    diagonal = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
    sizes = ones.args[0] if len(ones.args) == 1 and isinstance(ones.args[0], (tuple, list)) else ones.args
    if len(sizes) != 2 or not isinstance(diagonal, int) or isinstance(diagonal, bool) or \
            set(ones.kwargs) - {"dtype", "device"}:
        return None
    return compare, ones, diagonal


def _triangles_as_positions(gm: torch.fx.GraphModule) -> bool:
    """``torch.triu(torch.ones(t, t, dtype=torch.bool), 1)`` (a causal mask made in ``forward``) as
    ``arange(t)[None, :] - arange(t)[:, None] >= 1``: positions the kernels compute, no mask in memory."""
    changed = False
    for node in list(gm.graph.nodes):
        found = _triangle_mask(node)
        if found is None:
            continue
        compare, ones, diagonal = found
        sizes = ones.args[0] if len(ones.args) == 1 else ones.args
        device = {"device": ones.kwargs["device"]} if "device" in ones.kwargs else {}
        call = gm.graph.call_function
        with gm.graph.inserting_before(node):
            rows = call(operator.getitem, (call(torch.arange, (sizes[0],), device), (slice(None), None)))
            cols = call(operator.getitem, (call(torch.arange, (sizes[1],), device), (None, slice(None))))
            mask = call(compare, (call(operator.sub, (cols, rows)), diagonal))
        node.replace_all_uses_with(mask)
        gm.graph.erase_node(node)
        gm.graph.erase_node(ones)
        changed = True
    return changed


def rewrite_functions(gm: torch.fx.GraphModule) -> bool:
    """Modules of :data:`FUNCTION_MODULES` as their functions, then each function of :data:`REWRITES`
    as its ops; True when something changed (the caller recompiles and propagates shapes again)."""
    changed = _split_moments(gm)
    changed = _pool_values_alone(gm) or changed
    changed = _triangles_as_positions(gm) or changed
    for node in list(gm.graph.nodes):
        if node.op == "call_module":
            found = module_as_function(gm.get_submodule(str(node.target)))
            if found is not None:
                with gm.graph.inserting_before(node):
                    held = {w: gm.graph.get_attr(f"{node.target}.{w}") for w in found[2]}
                node.op, node.target = "call_function", found[0]
                node.kwargs = {**node.kwargs, **found[1], **held}
                changed = True
                continue
            if attention_module.rewrite(gm, node):
                changed = True
                continue
            with gm.graph.inserting_before(node):
                bagged = _embedding_bag(gm, node) or rewrite_cell(gm, node)
            if bagged is not None:
                node.replace_all_uses_with(bagged)
                gm.graph.erase_node(node)
                changed = True
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in REWRITES:
            continue
        with gm.graph.inserting_before(node):
            result = REWRITES[node.target](gm.graph, node)
        if result is None:
            continue
        inputs = node.all_input_nodes
        node.replace_all_uses_with(result)
        gm.graph.erase_node(node)
        _erase_unused(gm.graph, inputs)  # the log-softmax a cross-entropy now computes itself
        changed = True
    return changed


def _erase_unused(graph: torch.fx.Graph, nodes: list[torch.fx.Node]) -> None:
    """Calls a rewrite left without users, and the calls only they used (a one-hot and its cast); never
    an in-place method, whose effect is not its result."""
    waiting = list(nodes)
    while waiting:
        node = waiting.pop()
        if node.users or getattr(node, "_erased", False) or node.op not in ("call_function", "call_method") or \
                _in_place(node):
            continue
        inputs = node.all_input_nodes
        graph.erase_node(node)
        waiting += inputs


def _in_place(node: torch.fx.Node) -> bool:
    """Does the call write into a tensor (``x.relu_()``, ``torch.relu_(x)``, ``F.relu(x, inplace=True)``)?"""
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") or node.kwargs.get("inplace") is True or "out" in node.kwargs
