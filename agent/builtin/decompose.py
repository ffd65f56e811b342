"""Copies dropped, tensors made from one number folded into the number, and loss functions rewritten
in the traced graph as the elementwise ops and reductions they are made of, so that every planner
sees only ops the vocabulary knows (a Huber loss is a pointwise chain and a mean, as a hand-written
MSE is).

A copy (``clone``, ``detach``) that nothing changes in place is the value it copies. Each rewrite of
a loss is plain torch, so a part kept in torch still runs as written, and it computes what the
function computes:
- ``smooth_l1_loss(a, b, beta)``: with ``d = |a - b|`` and ``m = min(d, beta)``,
  ``0.5 * m * m / beta + (d - m)`` is ``0.5 d^2 / beta`` below ``beta`` and ``d - 0.5 beta`` above,
  with no select; ``huber_loss(a, b, delta)`` is ``delta`` times the same with ``beta = delta``.
- ``mse_loss`` and ``l1_loss``: the square or the magnitude of the difference.
- ``triplet_margin_loss(a, p, n)``: ``max(|a - p + eps| - |a - n + eps| + margin, 0)``, norms over
  the last dim.
- ``kl_div(x, t)``: ``xlogy(t, t) - t * x`` (``exp(t) * (t - x)`` with ``log_target``); ``batchmean``
  sums all but the first dim and takes the mean over the first.
Then the reduction: ``mean``, ``sum`` or none. And ``cosine_similarity(a, b, dim, eps)`` as torch
computes it: each input divided by its 2-norm over ``dim`` (at least ``eps``), the products summed.
``cdist(a, b, p)`` (p 1 or 2): the norm of ``a.unsqueeze(-2) - b.unsqueeze(-3)`` over the last dim.
``kron(a, b)``: the two interleaved by indexing, multiplied, and viewed as the products of their sizes.
``local_response_norm(x, n, alpha,
beta, k)``: torch's own steps, the squares padded and averaged over ``n`` channels by a pooling.
``nn.Softmax2d``: a softmax over dim -3.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.rewrite_functions import rewrite_functions
from kernelevo.agent.builtin.rewrite_in_place import OPERATORS_WRITING_NOTHING, option
from kernelevo.agent.builtin.rewrite_ops import replace_each
from kernelevo.agent.builtin.rewrite_pointwise import rewrite_pointwise
from kernelevo.agent.builtin.rewrite_reductions import rewrite_reductions
from kernelevo.agent.builtin.rewrite_slices import rewrite_slices
from kernelevo.agent.builtin.rewrite_tallies import rewrite_tallies

LOSSES = (F.smooth_l1_loss, F.huber_loss, F.mse_loss, F.l1_loss, F.kl_div, F.triplet_margin_loss,
          F.cosine_similarity, F.binary_cross_entropy, F.margin_ranking_loss, F.pairwise_distance, torch.cdist,
          torch.kron, F.local_response_norm, F.gaussian_nll_loss)


LOSS_MODULES = {nn.SmoothL1Loss: (F.smooth_l1_loss, ("reduction", "beta")),
                nn.BCELoss: (F.binary_cross_entropy, ("reduction",)),
                nn.MarginRankingLoss: (F.margin_ranking_loss, ("margin", "reduction")),
                nn.PairwiseDistance: (F.pairwise_distance, ("norm", "eps", "keepdim")),
                nn.HuberLoss: (F.huber_loss, ("reduction", "delta")),
                nn.MSELoss: (F.mse_loss, ("reduction",)), nn.L1Loss: (F.l1_loss, ("reduction",)),
                nn.KLDivLoss: (F.kl_div, ("reduction", "log_target")),
                nn.TripletMarginLoss: (F.triplet_margin_loss, ("margin", "p", "eps", "swap", "reduction")),
                nn.CosineSimilarity: (F.cosine_similarity, ("dim", "eps")),
                nn.LocalResponseNorm: (F.local_response_norm, ("size", "alpha", "beta", "k")),
                nn.GaussianNLLLoss: (F.gaussian_nll_loss, ("full", "eps", "reduction"))}
"""Loss modules (and the similarity losses are made of), as the function each calls with its own options."""
MODULE_OPTION_NAMES = {"norm": "p"}
"""A module's option the function names otherwise (``PairwiseDistance.norm`` is ``p``)."""
FIXED_MODULES = {nn.Softmax2d: (F.softmax, {"dim": -3})}
"""Modules that are one function with fixed options (a softmax over the channels of each pixel)."""


DECOMPOSE_ROUNDS = 4
"""Rounds of :func:`decompose` a trace gets: a rewrite may write calls another rewrite takes (a norm of
any order as powers and a sum over dims apart), and each round sees the shapes the last one left."""


def decompose_fully(gm: torch.fx.GraphModule, propagate: Any) -> None:
    """:func:`decompose` until nothing changes (at most ``DECOMPOSE_ROUNDS``), ``propagate()`` (shapes
    through the graph again) after each round that changed something. A dtype's limit read in forward
    is its number first (:func:`shape_reads.fold_type_infos`): a rewrite may read it as a clamp's bound."""
    from kernelevo.agent.builtin.shape_reads import fold_type_infos  # it reads this module's casts

    if fold_type_infos(gm):
        propagate()
    for _ in range(DECOMPOSE_ROUNDS):
        if not decompose(gm):
            return
        propagate()


def decompose(gm: torch.fx.GraphModule) -> bool:
    """Rewrite every loss call of ``gm`` it knows in place (shapes must be propagated: ``batchmean``
    reads the input's rank); True when something changed (recompile and propagate again)."""
    changed = rewrite_pointwise(gm)
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and type(gm.get_submodule(str(node.target))) in FIXED_MODULES:
            function, fixed = FIXED_MODULES[type(gm.get_submodule(str(node.target)))]
            node.op, node.target, node.kwargs = "call_function", function, {**node.kwargs, **fixed}
            changed = True
        if node.op == "call_module" and type(gm.get_submodule(str(node.target))) in LOSS_MODULES:
            sub = gm.get_submodule(str(node.target))
            function, options = LOSS_MODULES[type(sub)]
            node.op, node.target = "call_function", function  # the module is its function with its options
            node.kwargs = {**node.kwargs,
                           **{MODULE_OPTION_NAMES.get(name, name): getattr(sub, name) for name in options}}
            changed = True
    changed |= _dtype_arguments_as_casts(gm)
    changed |= rewrite_functions(gm)
    changed |= rewrite_tallies(gm)
    changed |= rewrite_slices(gm)
    changed |= rewrite_reductions(gm)
    changed |= _fold_constant_tensors(gm)
    mutates = _mutates_in_place(gm)
    for node in list(gm.graph.nodes):
        if not mutates and (_passes_through(node) or _module_passes_through(gm, node)):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            changed = True
    changed |= replace_each(gm, lambda graph, node: _rewrite(graph, node) if node.op == "call_function" and
                            node.target in LOSSES else None)
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul,
              torch.div}
BOUNDS = {torch.min: "max", torch.minimum: "max", torch.max: "min", torch.maximum: "min"}
"""``torch.min(x, c)`` is ``x`` clamped from above at ``c``; ``torch.max(x, c)`` from below."""


CAST_FIRST_METHODS = {"softmax", "log_softmax", "sum", "mean", "prod", "cumsum", "cumprod", "nansum", "nanmean"}
CAST_FIRST_FUNCTIONS = {torch.softmax, F.softmax, torch.log_softmax, F.log_softmax, torch.sum, torch.mean,
                        torch.prod, torch.cumsum, torch.cumprod, torch.nansum, torch.nanmean}
"""Calls whose ``dtype=`` casts the input before the op (torch's definition): written as that cast."""


def _dtype_arguments_as_casts(gm: torch.fx.GraphModule) -> bool:
    """``softmax(x, dim, dtype=d)`` (and sums, means, products, scans) as ``softmax(x.to(d), dim)``,
    what torch computes: the cast is one more pointwise op, and the call one the templates know."""
    changed = False
    for node in list(gm.graph.nodes):
        takes = (node.op == "call_method" and node.target in CAST_FIRST_METHODS) or (
            node.op == "call_function" and node.target in CAST_FIRST_FUNCTIONS)
        if not takes or node.kwargs.get("dtype") is None or not node.args or \
                not isinstance(node.args[0], torch.fx.Node):
            continue
        with gm.graph.inserting_before(node):
            cast = gm.graph.call_method("to", (node.args[0], node.kwargs["dtype"]))
        node.args = (cast, *node.args[1:])
        node.kwargs = {k: v for k, v in node.kwargs.items() if k != "dtype"}
        changed = True
    return changed


def _fold_constant_tensors(gm: torch.fx.GraphModule) -> bool:
    """A tensor made in ``forward`` from one number (``torch.tensor(0.0, device=x.device)``) is that
    number where it meets a floating-point tensor in arithmetic, or bounds it (``torch.min(x, t)``
    as a clamp): a 0-d tensor takes no part in type promotion there, as a Python number does not."""
    changed = False
    for node in list(gm.graph.nodes):
        if not (node.op == "call_function" and node.target is torch.tensor and len(node.args) == 1
                and isinstance(node.args[0], (int, float)) and not isinstance(node.args[0], bool)
                and set(node.kwargs) <= {"device", "dtype"} and node.kwargs.get("dtype") in (None, torch.float32)):
            continue
        value = torch.tensor(node.args[0]).item()  # as the tensor holds it (float32 rounding, or an integer)
        for user in list(node.users):
            other = [a for a in user.args if a is not node]
            if user.op != "call_function" or user.kwargs or len(user.args) != 2 or len(other) != 1:
                continue
            meta = getattr(other[0], "meta", {}).get("tensor_meta")
            # a 0-d tensor meets it as an equal in type promotion; only a tensor with dims outranks it
            if meta is None or not meta.dtype.is_floating_point or len(meta.shape) == 0:
                continue
            if user.target in BOUNDS:
                user.target, user.args, user.kwargs = torch.clamp, (other[0],), {BOUNDS[user.target]: value}
            elif user.target in ARITHMETIC:
                user.args = tuple(value if a is node else a for a in user.args)
            else:
                continue
            changed = True
        if not node.users:
            device = node.kwargs.get("device")
            gm.graph.erase_node(node)
            if isinstance(device, torch.fx.Node) and not device.users:
                gm.graph.erase_node(device)
            changed = True
    return changed


IN_PLACE_OPERATORS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.setitem}
PASS_THROUGH = {"clone", "detach"}
"""Methods whose result holds the same values as their input (no gradients are taken here)."""


def _mutates_in_place(gm: torch.fx.GraphModule) -> bool:
    """Does anything in ``gm`` write a tensor in place? Then no copy is dropped: through views, any
    copy might be the one written."""
    return any(writes_in_place(gm, node) for node in gm.graph.nodes)


def writes_in_place(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Does ``node`` write a tensor in place (a method or function named with a trailing underscore,
    ``inplace=True``, an in-place module or operator)?"""
    if node.op == "call_module":
        return bool(getattr(gm.get_submodule(str(node.target)), "inplace", False))
    if node.op in ("call_method", "call_function"):
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        named = name.endswith("_") and not name.endswith("__") and node.target not in OPERATORS_WRITING_NOTHING
        return named or bool(node.kwargs.get("inplace")) or node.target in IN_PLACE_OPERATORS
    return False



def read_after_written(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first node that writes a tensor in place which something reads again after it (whose old
    values the templates, which compute every op into a new value, would wrongly keep), or None."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in gm.graph.nodes:
        written = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if written is not None and writes_in_place(gm, node) and \
                any(order[user] > order[node] for user in written.users if user is not node):
            return node
    return None


def _passes_through(node: torch.fx.Node) -> bool:
    """A copy of a value (``x.clone()``, ``x.detach()``, ``torch.clone(x)``) or a cast to the dtype it
    has (``x.to(torch.float32)``, ``x.float()`` of an fp32 value): the value itself, in a graph that
    writes nothing in place (:func:`_mutates_in_place`). One that is the output stays."""
    copy = (node.op == "call_method" and node.target in PASS_THROUGH) or (
        node.op == "call_function" and node.target in (torch.clone, torch.detach))
    if not (copy or same_dtype_cast(node)) or not node.args or not isinstance(node.args[0], torch.fx.Node) or \
            node.kwargs:
        return False
    return not any(user.op == "output" for user in node.users)


CAST_METHODS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64,
                "long": torch.int64, "int": torch.int32, "bool": torch.bool}
"""Methods that cast to one dtype."""


def same_dtype_cast(node: torch.fx.Node) -> bool:
    """Is ``node`` a cast of a tensor to the dtype it already has (``.to(d)``, ``.type(d)``, ``.float()``
    and the like, nothing else asked), which torch answers with the tensor itself?"""
    if node.op != "call_method" or not node.args or not isinstance(node.args[0], torch.fx.Node) or node.kwargs:
        return False
    have = getattr(node.args[0].meta.get("tensor_meta"), "dtype", None)
    if node.target in CAST_METHODS:
        wanted = CAST_METHODS[node.target] if len(node.args) == 1 else None
    else:
        wanted = node.args[1] if node.target in ("to", "type") and len(node.args) == 2 else None
    return isinstance(wanted, torch.dtype) and wanted == have



def _module_passes_through(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """An ``nn.Identity``, or a dropout that drops nothing (probability 0, or out of training), of a
    value computed in ``forward``: the value itself (what follows a convolution or a pooling is then
    its epilogue). One of an input stays: the output must not be an input."""
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
        return False
    sub = gm.get_submodule(str(node.target))
    if not (type(sub) is nn.Identity or (type(sub) is nn.Dropout and (sub.p == 0 or not sub.training))):
        return False
    return isinstance(node.args[0], torch.fx.Node) and node.args[0].op != "placeholder"


def _rewrite(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """The nodes computing ``node``'s loss, or None where its options are not the ones covered."""
    if node.target is F.cosine_similarity:
        return _cosine(graph, node)
    if node.target is F.pairwise_distance:
        return _pairwise(graph, node)
    if node.target is torch.cdist:
        return _cdist(graph, node)
    if node.target is torch.kron:
        return _kron(graph, node)
    if node.target is F.margin_ranking_loss:
        return _margin_ranking(graph, node)
    if node.target is F.binary_cross_entropy:
        return _binary_cross_entropy(graph, node)
    if node.target is F.local_response_norm:
        return _local_response_norm(graph, node)
    if node.target is F.gaussian_nll_loss:
        return _gaussian_nll(graph, node)
    a, b = option(node, "input", 0, None), option(node, "target", 1, None)
    if not isinstance(a, torch.fx.Node) or not isinstance(b, torch.fx.Node):
        return None
    if node.kwargs.get("size_average") is not None or node.kwargs.get("reduce") is not None:
        return None  # the deprecated options: left as written
    call = graph.call_function
    if node.target is F.kl_div:
        reduction = option(node, "reduction", 4, "mean")
        if not _reduction_known(reduction, a) or (reduction == "batchmean" and not _same_shape(a, b)):
            return None  # batchmean divides by the input's first dim, not the broadcast result's
        if option(node, "log_target", 5, False):
            pointwise = call(operator.mul, (call(torch.exp, (b,)), call(operator.sub, (b, a))))
        else:
            pointwise = call(operator.sub, (call(torch.xlogy, (b, b)), call(operator.mul, (b, a))))
        return _reduce(graph, pointwise, reduction, a)
    if node.target is F.triplet_margin_loss:
        return _triplet(graph, node)
    huber, smooth = node.target is F.huber_loss, node.target is F.smooth_l1_loss
    if option(node, "weight", 4 if huber else 5, None) is not None:
        return None
    reduction = option(node, "reduction", 2 if huber else 4, "mean")
    width = option(node, "beta" if smooth else "delta", 5 if smooth else 3, 1.0) if huber or smooth else 1.0
    if not isinstance(width, (int, float)) or width <= 0 or not _reduction_known(reduction, a):
        return None  # beta 0 is the L1 loss, a different formula in torch
    width = float(width)
    difference = call(operator.sub, (a, b))
    if node.target is F.mse_loss:
        pointwise = call(torch.square, (difference,))
    elif node.target is F.l1_loss:
        pointwise = call(torch.abs, (difference,))
    else:
        magnitude = call(torch.abs, (difference,))
        inside = call(torch.clamp, (magnitude,), {"max": width})
        square = call(operator.mul, (call(operator.mul, (inside, inside)), 0.5 / width if smooth else 0.5))
        outside = call(operator.sub, (magnitude, inside))
        pointwise = call(operator.add, (square, outside if smooth else call(operator.mul, (outside, width))))
    return _reduce(graph, pointwise, reduction, a)


def _pairwise(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``||a - b + eps||_p`` over the last dim, as torch computes it."""
    a, b = option(node, "x1", 0, None), option(node, "x2", 1, None)
    p = option(node, "p", 2, 2.0)
    eps, keepdim = option(node, "eps", 3, 1e-6), option(node, "keepdim", 4, False)
    if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)) or p not in (1, 2, 1.0, 2.0) \
            or not isinstance(eps, (int, float)) or not isinstance(keepdim, bool):
        return None
    call = graph.call_function
    shifted = call(operator.add, (call(operator.sub, (a, b)), float(eps)))
    return call(torch.linalg.vector_norm, (shifted, float(p)), {"dim": -1, "keepdim": keepdim})


def _cdist(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``cdist(a, b, p)``: the p-norm of every row of ``a`` minus every row of ``b`` (batches broadcast),
    summed directly over the last dim. torch computes p=2 through a matrix product for larger inputs,
    which cancels where rows are close; the direct sum is nearer the exact distances."""
    a, b = option(node, "x1", 0, None), option(node, "x2", 1, None)
    p = option(node, "p", 2, 2.0)
    if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)) or p not in (1, 2, 1.0, 2.0):
        return None
    every = graph.call_function(operator.sub, (graph.call_method("unsqueeze", (a, -2)),
                                               graph.call_method("unsqueeze", (b, -3))))
    return graph.call_function(torch.linalg.vector_norm, (every, float(p)), {"dim": -1})


def _kron(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``kron(a, b)`` of two tensors of one rank: ``a`` and ``b`` interleaved (``a[:, None, :, None] *
    b[None, :, None, :]``), then seen as the products of their sizes, read when ``forward`` runs."""
    a, b = option(node, "input", 0, None), option(node, "other", 1, None)
    shapes = [n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None for n in (a, b)]
    if any(m is None or not hasattr(m, "shape") for m in shapes) or len(shapes[0].shape) != len(shapes[1].shape) \
            or not shapes[0].shape:
        return None
    rank, call = len(shapes[0].shape), graph.call_function
    every = slice(None)
    product = call(operator.mul, (call(operator.getitem, (a, (every, None) * rank)),
                                  call(operator.getitem, (b, (None, every) * rank))))
    sizes = [call(getattr, (x, "shape")) for x in (a, b)]
    return graph.call_method("reshape", (product, *[call(operator.mul, (call(operator.getitem, (sizes[0], i)),
                                                                          call(operator.getitem, (sizes[1], i))))
                                                    for i in range(rank)]))


def _margin_ranking(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``max(0, -y (a - b) + margin)``, then the reduction."""
    a, b, y = (option(node, name, k, None) for k, name in enumerate(("input1", "input2", "target")))
    margin, reduction = option(node, "margin", 3, 0.0), option(node, "reduction", 6, "mean")
    if not all(isinstance(v, torch.fx.Node) for v in (a, b, y)) or not isinstance(margin, (int, float)) \
            or not _reduction_known(reduction, a) or node.kwargs.get("size_average") is not None:
        return None
    call = graph.call_function
    gap = call(operator.add, (call(operator.mul, (call(torch.neg, (y,)), call(operator.sub, (a, b)))),
                              float(margin)))
    return _reduce(graph, call(torch.clamp, (gap,), {"min": 0.0}), reduction, a)


def _binary_cross_entropy(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """torch's: ``(t - 1) max(log1p(-p), -100) - t max(log(p), -100)``, then the reduction (no weight)."""
    p, t = option(node, "input", 0, None), option(node, "target", 1, None)
    reduction = option(node, "reduction", 5, "mean")
    if not (isinstance(p, torch.fx.Node) and isinstance(t, torch.fx.Node)) or \
            option(node, "weight", 2, None) is not None or not _reduction_known(reduction, p) or \
            node.kwargs.get("size_average") is not None or node.kwargs.get("reduce") is not None:
        return None
    call = graph.call_function
    log_miss = call(torch.clamp, (call(torch.log1p, (call(torch.neg, (p,)),)),), {"min": -100.0})
    log_hit = call(torch.clamp, (call(torch.log, (p,)),), {"min": -100.0})
    pointwise = call(operator.sub, (call(operator.mul, (call(operator.sub, (t, 1.0)), log_miss)),
                                    call(operator.mul, (t, log_hit))))
    return _reduce(graph, pointwise, reduction, p)


def _gaussian_nll(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """torch's: ``0.5 (log v + (x - t)^2 / v)`` with ``v`` the variance clamped at ``eps`` from below
    (plus ``0.5 log 2 pi`` when ``full``), then the reduction. A variance with one dim fewer than the
    input gets a last dim of one, as torch gives it; other shapes broadcast as torch checks them."""
    x, t, v = (option(node, name, k, None) for k, name in enumerate(("input", "target", "var")))
    full, eps = option(node, "full", 3, False), option(node, "eps", 4, 1e-6)
    reduction = option(node, "reduction", 5, "mean")
    metas = [n.meta.get("tensor_meta") if isinstance(n, torch.fx.Node) else None for n in (x, t, v)]
    ranks = [len(m.shape) if hasattr(m, "shape") else None for m in metas]
    if None in ranks or not isinstance(full, bool) or not isinstance(eps, (int, float)) or \
            not _reduction_known(reduction, x) or reduction == "batchmean":
        return None
    call = graph.call_function
    if ranks[2] == ranks[0] - 1:
        v = graph.call_method("unsqueeze", (v, -1))
    v = call(torch.clamp, (v,), {"min": float(eps)})
    error = call(operator.truediv, (call(torch.square, (call(operator.sub, (x, t)),)), v))
    loss = call(operator.mul, (call(operator.add, (call(torch.log, (v,)), error)), 0.5))
    if full:
        loss = call(operator.add, (loss, 0.5 * math.log(2 * math.pi)))
    return _reduce(graph, loss, reduction, x)


def _local_response_norm(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """torch's steps: the squares given a dim of one channel, padded by ``n // 2`` channels before and
    ``(n - 1) // 2`` after, averaged over ``n`` channels by a pooling, then ``x / (k + alpha avg)^beta``.
    A 3-D or 4-D input (a 5-D one takes a view torch makes from its sizes: left as written)."""
    x, size = option(node, "input", 0, None), option(node, "size", 1, None)
    alpha, beta, k = option(node, "alpha", 2, 1e-4), option(node, "beta", 3, 0.75), option(node, "k", 4, 1.0)
    meta = x.meta.get("tensor_meta") if isinstance(x, torch.fx.Node) else None
    if meta is None or len(meta.shape) not in (3, 4) or not isinstance(size, int) or size < 1 or \
            not all(isinstance(v, (int, float)) for v in (alpha, beta, k)):
        return None
    call = graph.call_function
    squares = graph.call_method("unsqueeze", (call(operator.mul, (x, x)), 1))
    spatial = len(meta.shape) - 2
    padded = call(F.pad, (squares, (0, 0) * spatial + (size // 2, (size - 1) // 2)))
    pool = F.avg_pool2d if spatial == 1 else F.avg_pool3d
    average = graph.call_method("squeeze", (call(pool, (padded, (size,) + (1,) * spatial), {"stride": 1}), 1))
    scale = call(operator.add, (call(operator.mul, (average, float(alpha))), float(k)))
    return call(operator.truediv, (x, call(operator.pow, (scale, float(beta)))))


def _triplet(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d(x, y) = ||x - y + eps||`` over the last dim, as
    torch's pairwise distance takes it (p of 1 or 2, no swap)."""
    anchor, positive, negative = (option(node, name, k, None) for k, name in enumerate(("anchor", "positive",
                                                                                          "negative")))
    margin, order = option(node, "margin", 3, 1.0), option(node, "p", 4, 2)
    eps, swap, reduction = option(node, "eps", 5, 1e-6), option(node, "swap", 6, False), option(node, "reduction",
                                                                                                   9, "mean")
    numbers = all(isinstance(v, (int, float)) for v in (margin, order, eps))
    if not numbers or order not in (1, 2) or swap or reduction not in ("none", "sum", "mean"):
        return None
    if not all(isinstance(v, torch.fx.Node) for v in (anchor, positive, negative)):
        return None
    call = graph.call_function

    def distance(other: torch.fx.Node) -> torch.fx.Node:
        shifted = call(operator.add, (call(operator.sub, (anchor, other)), float(eps)))
        return call(torch.linalg.vector_norm, (shifted, float(order)), {"dim": -1})

    gap = call(operator.add, (call(operator.sub, (distance(positive), distance(negative))), float(margin)))
    return _reduce(graph, call(torch.clamp, (gap,), {"min": 0.0}), reduction, anchor)


def _cosine(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``sum((a / max(|a|, eps)) * (b / max(|b|, eps)), dim)``, norms over ``dim`` kept: torch's own
    order of operations (dividing first keeps the result within [-1, 1])."""
    a, b = option(node, "x1", 0, None), option(node, "x2", 1, None)
    dim, eps = option(node, "dim", 2, 1), option(node, "eps", 3, 1e-8)
    if not isinstance(a, torch.fx.Node) or not isinstance(b, torch.fx.Node) or not _same_shape(a, b):
        return None  # inputs broadcast against each other: left as written
    if not isinstance(dim, int) or isinstance(dim, bool) or not isinstance(eps, (int, float)):
        return None
    call = graph.call_function

    def unit(x: torch.fx.Node) -> torch.fx.Node:
        norm = call(torch.linalg.vector_norm, (x, 2.0), {"dim": dim, "keepdim": True})
        return call(operator.truediv, (x, call(torch.clamp, (norm,), {"min": float(eps)})))

    return call(torch.sum, (call(operator.mul, (unit(a), unit(b))),), {"dim": dim})


def _same_shape(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    shapes = [n.meta.get("tensor_meta") for n in (a, b)]
    return all(m is not None for m in shapes) and tuple(shapes[0].shape) == tuple(shapes[1].shape)


def _reduction_known(reduction: Any, like: torch.fx.Node) -> bool:
    """Is ``reduction`` one the rewrite follows (``batchmean`` needs the input's rank)?"""
    if reduction == "batchmean":
        return like.meta.get("tensor_meta") is not None
    return reduction in ("none", "sum", "mean")


def _reduce(graph: torch.fx.Graph, value: torch.fx.Node, reduction: str, like: torch.fx.Node) -> torch.fx.Node:
    """``value`` reduced as the loss's ``reduction`` says (one :func:`_reduction_known` accepts)."""
    if reduction == "none":
        return value
    if reduction in ("sum", "mean"):
        return graph.call_function(torch.sum if reduction == "sum" else torch.mean, (value,))
    rank = len(like.meta["tensor_meta"].shape)  # batchmean: the sum over all but the first dim, averaged
    rows = graph.call_function(torch.sum, (value,), {"dim": tuple(range(1, rank))}) if rank > 1 else value
    return graph.call_function(torch.mean, (rows,))
