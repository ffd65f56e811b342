"""Products written as what they compute, so that the planners see a matmul, a reduction or a
lookup they have a template for. Each rewrite is plain torch (see :mod:`rewrite_functions`).

- ``mv``, ``dot`` and ``outer`` as a matmul, a product summed and a broadcast product; ``addmm``,
  ``addmv`` and ``baddbmm`` as ``beta * c + alpha * (a @ b)``; a matmul with a vector (fp32) as the
  product summed over the shared dim, a batch of vectors made columns by ``unsqueeze(-1)`` included.
- ``diag(d) @ m`` and ``m @ diag(d)`` (``d`` a vector): ``d.unsqueeze(1) * m`` and ``m * d``, each row or
  column scaled, without the N x N matrix or the GEMM over its zeros; the same for a batch of
  diagonals, ``diag_embed(d)``.
- ``addbmm(c, a, b)``: ``beta * c + alpha * bmm(a, b).sum(0)``.
- ``one_hot(i, n).float() @ w`` (``w`` a matrix of n rows): ``embedding(i, w)``, the rows it selects.
- ``linear(x, w, b)`` of a weight computed in ``forward``: ``x @ w.t() + b``.
- ``einsum`` that sums nothing (``"i,j->ij"``, ``"bi,bj->bij"``): each operand's dims put in the
  output's order, ones where it lacks one, and the operands multiplied, broadcast; one that sums a
  dim of two fp32 operands whose broadcast product is no larger than the larger of them
  (``"ne,ned->nd"``, ``"bhd,bhd->bh"``): that product summed over the dims the output drops; any
  other contraction of two operands the matmul planner does not take as written (``"nd,edh->neh"``):
  one ``matmul`` of the operands permuted and grouped (:func:`_einsum_as_matmul_call`).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.rewrite_in_place import option


def _products(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``mv`` and ``dot`` of two inputs, ``outer``, and ``addmm``/``addmv``/``baddbmm`` (a matmul plus a term)."""
    call = graph.call_function
    if node.target in (torch.mv, torch.dot, torch.outer, torch.ger):
        a, b = node.args[:2] if len(node.args) == 2 and not node.kwargs else (None, None)
        if not (isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node)):
            return None
        if node.target is torch.mv:
            return _vector_product(graph, a, b) or call(torch.matmul, (a, b))
        if node.target is torch.dot:
            return call(torch.sum, (call(operator.mul, (a, b)),))
        return call(operator.mul, (call(torch.unsqueeze, (a, 1)), call(torch.unsqueeze, (b, 0))))
    names = {torch.addmm: ("mat1", "mat2"), torch.addmv: ("mat", "vec"), torch.baddbmm: ("batch1", "batch2")}
    c, a, b = (option(node, name, k, None) for k, name in enumerate(("input", *names[node.target])))
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    if not all(isinstance(v, torch.fx.Node) for v in (c, a, b)) or len(node.args) > 3 or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (beta, alpha)):
        return None
    product = call(torch.matmul, (a, b))
    product = product if alpha == 1 else call(operator.mul, (product, float(alpha)))
    if beta == 0:  # torch ignores c then, NaN included
        return product
    return call(operator.add, (c if beta == 1 else call(operator.mul, (c, float(beta))), product))


ONE_HOT_CASTS = {"float": torch.float32, "double": torch.float64, "half": torch.float16,
                 "bfloat16": torch.bfloat16}


def _cast_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """The dtype ``node`` casts its one argument to (``.float()``, ``.to(torch.bfloat16)``), else None."""
    if node.op != "call_method" or node.kwargs:
        return None
    if node.target in ONE_HOT_CASTS and len(node.args) == 1:
        return ONE_HOT_CASTS[str(node.target)]
    if node.target == "to" and len(node.args) == 2 and isinstance(node.args[1], torch.dtype):
        return node.args[1]
    return None


def _one_hot_rows(graph: torch.fx.Graph, left: Any, right: Any) -> torch.fx.Node | None:
    """``F.one_hot(i, n).float() @ w`` (``w`` [n, d] of the cast's dtype) as ``F.embedding(i, w)``: each
    row of the product has one term, ``1 * w[i]``, so the lookup gives the same value without the
    n-wide rows of zeros or the GEMM over them. (Where ``w`` holds an infinity the product's other rows
    read ``0 * inf``, NaN; a module's parameters are finite.)"""
    if not (isinstance(left, torch.fx.Node) and isinstance(right, torch.fx.Node)) or len(left.users) != 1:
        return None
    dtype, hot = _cast_dtype(left), left.args[0] if left.args else None
    if dtype is None or not (isinstance(hot, torch.fx.Node) and hot.op == "call_function" and
                             hot.target is F.one_hot and len(hot.users) == 1):
        return None
    classes, weight = option(hot, "num_classes", 1, -1), right.meta.get("tensor_meta")
    if weight is None or len(weight.shape) != 2 or weight.dtype != dtype or classes != weight.shape[0]:
        return None
    return graph.call_function(F.embedding, (option(hot, "input", 0, None), right))


def _diagonal(node: Any) -> torch.fx.Node | None:
    """The vector ``d`` of a ``torch.diag(d)`` node used only once (its main diagonal, ``d`` 1-D), or the
    vectors ``d`` of a ``torch.diag_embed(d)`` (a batch of such matrices in the last two dims), else None."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and len(node.users) == 1):
        return None
    if node.target is torch.diag and option(node, "diagonal", 1, 0) == 0:
        vector, rank = node.args[0], 1
    elif node.target is torch.diag_embed and (option(node, "offset", 1, 0), option(node, "dim1", 2, -2),
                                              option(node, "dim2", 3, -1)) == (0, -2, -1):
        vector, rank = node.args[0], None
    else:
        return None
    tm = vector.meta.get("tensor_meta") if isinstance(vector, torch.fx.Node) else None
    return vector if tm is not None and len(tm.shape) >= 1 and rank in (None, len(tm.shape)) else None


def _vector_product(graph: torch.fx.Graph, left: Any, right: Any) -> torch.fx.Node | None:
    """``m @ v`` (``v`` a vector or a matrix of one column, ``m`` a matrix or a batch of them) as
    ``(m * v).sum(-1)``, and ``v @ m`` (``v`` a vector or a matrix of one row, ``m`` a matrix) as
    ``(v.unsqueeze(1) * m).sum(0)``: a reduction, bound as a matrix-vector product is by reading ``m``
    (over the last dim in one pass; over the first the planner may take two), instead of a GEMM whose
    tiles are all padding but one column. fp32 only: in bf16 or fp16 the products would round before
    the sum, which a GEMV's does not."""
    tm = [a.meta.get("tensor_meta") if isinstance(a, torch.fx.Node) else None for a in (left, right)]
    if any(t is None or t.dtype != torch.float32 for t in tm):
        return None
    call = graph.call_function
    (a, b), (ra, rb) = (tuple(t.shape) for t in tm), (len(t.shape) for t in tm)
    if rb == 1 and ra >= 2:
        return call(torch.sum, (call(operator.mul, (left, right)), -1))
    if rb == 2 and ra >= 2 and b[1] == 1 and (row := _one_line(graph, right, dim=1)) is not None:
        # a column: the sum keeps its dim, as the product's shape does
        return call(torch.sum, (call(operator.mul, (left, row)), -1), {"keepdim": True})
    if rb >= 2 and ra == rb and b[-1] == 1 and (vector := _unsqueezed_last(right, rb)) is not None:
        # a batch of columns made from vectors (``bmm(a, v.unsqueeze(-1))``): each row of ``a`` times its vector
        return call(torch.sum, (call(operator.mul, (left, call(torch.unsqueeze, (vector, -2)))), -1), {"keepdim": True})
    if ra == 1 and rb == 2:
        return call(torch.sum, (call(operator.mul, (call(torch.unsqueeze, (left, 1)), right)), 0))
    if ra == 2 and rb == 2 and a[0] == 1 and b[1] > 1 and (column := _one_line(graph, left, dim=0)) is not None:
        return call(torch.sum, (call(operator.mul, (column, right)), 0), {"keepdim": True})
    return None


def _unsqueezed_last(node: torch.fx.Node, rank: int) -> torch.fx.Node | None:
    """``v`` where ``node`` is ``v.unsqueeze(-1)`` (a tensor of ``rank`` dims, its last of one), else None."""
    if not (node.op == "call_method" and node.target == "unsqueeze") and \
            not (node.op == "call_function" and node.target is torch.unsqueeze):
        return None
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    vector = node.args[0]
    if not isinstance(vector, torch.fx.Node) or dim not in (-1, rank - 1) or isinstance(dim, bool):
        return None
    return vector


def _one_line(graph: torch.fx.Graph, matrix: torch.fx.Node, dim: int) -> torch.fx.Node | None:
    """A matrix of one column (``dim`` 1) or one row (``dim`` 0) turned the other way, as the templates
    read it: a forward input transposed (a view they follow), a parameter flattened (``[K]`` reads as
    one value per column; a row kept as ``[K, 1]`` would be a parameter of that shape, which they do
    not read). None for anything else (a view of a view, a computed value): the GEMM keeps those."""
    if matrix.op == "placeholder":
        return graph.call_function(torch.transpose, (matrix, 0, 1))
    if matrix.op == "get_attr" and dim == 1:
        return graph.call_function(torch.flatten, (matrix,))
    return None


def _diagonal_matmul(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """A product with a diagonal matrix (below), or with a vector (:func:`_vector_product`)."""
    if len(node.args) != 2 or node.kwargs:
        return None
    left, right = node.args
    if (product := _vector_product(graph, left, right) or _one_hot_rows(graph, left, right)) is not None:
        return product
    tm = [a.meta.get("tensor_meta") if isinstance(a, torch.fx.Node) else None for a in (left, right)]
    if any(t is None or len(t.shape) < 2 for t in tm):
        return None
    call = graph.call_function
    if (d := _diagonal(left)) is not None:
        return call(operator.mul, (call(torch.unsqueeze, (d, -1)), right))
    if (d := _diagonal(right)) is not None:
        return call(operator.mul, (left, call(torch.unsqueeze, (d, -2))))
    return None


def _summed_batch_product(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``addbmm(c, a, b, beta, alpha)``: the batch's products summed, scaled, plus ``beta * c``."""
    c, a, b = (option(node, name, k, None) for k, name in enumerate(("input", "batch1", "batch2")))
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    if not all(isinstance(v, torch.fx.Node) for v in (c, a, b)) or len(node.args) > 3 or \
            not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (beta, alpha)):
        return None
    call = graph.call_function
    product = call(torch.sum, (call(torch.bmm, (a, b)), 0))
    product = product if alpha == 1 else call(operator.mul, (product, float(alpha)))
    if beta == 0:  # torch ignores c then, NaN included
        return product
    return call(operator.add, (c if beta == 1 else call(operator.mul, (c, float(beta))), product))


def _linear_of_computed_weight(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``F.linear(x, w, b)`` where ``w`` is computed in ``forward`` (normalised, scaled, merged from
    low-rank factors) as ``x @ w.t() + b``: the matmul templates take a parameter as a weight, or two
    computed operands as a product."""
    x, weight, bias = option(node, "input", 0, None), option(node, "weight", 1, None), option(node, "bias", 2, None)
    if not isinstance(x, torch.fx.Node) or not isinstance(weight, torch.fx.Node) or weight.op == "get_attr":
        return None
    out = graph.call_function(operator.matmul, (x, graph.call_method("t", (weight,))))
    if isinstance(bias, torch.fx.Node):
        return graph.call_function(operator.add, (out, bias))
    return out if bias is None else None


def _einsum_products(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """An ``einsum`` as the broadcast product of its operands, summed where it sums (module docstring);
    None for any other (a contraction the matmul templates take, a diagonal, an ellipsis)."""
    if len(node.args) < 2 or node.kwargs or not isinstance(node.args[0], str):
        return None
    operands = list(node.args[1]) if len(node.args) == 2 and isinstance(node.args[1], (list, tuple)) else \
        list(node.args[1:])
    equation = node.args[0].replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    letters = inputs.split(",")
    if not arrow or "." in equation or len(letters) != len(operands) or len(set(output)) != len(output) or \
            any(len(set(t)) != len(t) for t in letters) or not all(isinstance(o, torch.fx.Node) for o in operands):
        return None
    metas = [o.meta.get("tensor_meta") for o in operands]
    if any(m is None or len(m.shape) != len(t) for m, t in zip(metas, letters, strict=True)) or \
            not set(output) <= set("".join(letters)):
        return None
    summed = sorted(set("".join(letters)) - set(output))
    if summed:
        sizes = {c: int(m.shape[i]) for m, t in zip(metas, letters, strict=True) for i, c in enumerate(t)}
        product = math.prod(sizes.values())
        small = product <= max(m.shape.numel() for m in metas) and all(m.dtype == torch.float32 for m in metas)
        if len(operands) != 2:
            return None
        if not small:  # a contraction: the GEMMs', unless the matmul planner takes the einsum as it is
            from kernelevo.agent.builtin.matmul import _einsum_as_matmul

            takes = all(c in letters[0] and c in letters[1] for c in summed) and _einsum_as_matmul(node) is None
            return _einsum_as_matmul_call(graph, operands, letters, output) if takes else None
    order = output + "".join(summed)  # the summed dims last, then summed away
    call = graph.call_function
    result = None
    for operand, mine in zip(operands, letters, strict=True):
        ordered = sorted(mine, key=order.index)
        value = operand
        if ordered != list(mine):
            value = call(torch.permute, (value, [mine.index(c) for c in ordered]))
        for position, c in enumerate(order):
            if c not in mine:
                value = call(torch.unsqueeze, (value, position))
        result = value if result is None else call(operator.mul, (result, value))
    if summed:
        result = call(torch.sum, (result, list(range(len(output), len(order)))))
    return result


def _einsum_as_matmul_call(graph: torch.fx.Graph, operands: list[torch.fx.Node], letters: list[str],
                           output: str) -> torch.fx.Node:
    """A two-operand einsum that contracts dims both operands hold as one ``matmul``: each operand's dims
    put in the order [batch, free, contracted] (right: [batch, contracted, free]) and each group made
    one dim, the product's free dims unmade and put in the output's order (``"nd,edh->neh"``: ``x @
    w.permute(1, 0, 2).reshape(d, e * h)``, viewed [n, e, h]). Sizes are read from the operands, so
    the graph holds at any size."""
    (left, right), (lt, rt) = operands, letters
    batch = [c for c in output if c in lt and c in rt]
    summed = [c for c in lt if c not in output]
    free_l = [c for c in output if c in lt and c not in rt]
    free_r = [c for c in output if c in rt and c not in lt]
    call, method = graph.call_function, graph.call_method

    def size(c: str) -> Any:
        node, t = (left, lt) if c in lt else (right, rt)
        return method("size", (node, t.index(c)))

    def group(cs: list[str]) -> Any:
        if not cs:
            return 1
        value = size(cs[0])
        for c in cs[1:]:
            value = call(operator.mul, (value, size(c)))
        return value

    def arranged(x: torch.fx.Node, mine: str, order: list[str], groups: list[list[str]]) -> torch.fx.Node:
        if list(mine) != order:
            x = call(torch.permute, (x, [mine.index(c) for c in order]))
        if any(len(g) != 1 for g in groups):
            x = method("reshape", (x, *[group(g) for g in groups]))
        return x

    a = arranged(left, lt, batch + free_l + summed, [[c] for c in batch] + [free_l, summed])
    b = arranged(right, rt, batch + summed + free_r, [[c] for c in batch] + [summed, free_r])
    product = call(torch.matmul, (a, b))
    made = batch + free_l + free_r
    if len(free_l) != 1 or len(free_r) != 1:
        product = method("reshape", (product, *[size(c) for c in made]))
    if made != list(output):
        product = call(torch.permute, (product, [made.index(c) for c in output]))
    return product


PRODUCT_REWRITES = {F.linear: _linear_of_computed_weight, operator.matmul: _diagonal_matmul,
                    torch.matmul: _diagonal_matmul, torch.mm: _diagonal_matmul, torch.bmm: _diagonal_matmul,
                    **dict.fromkeys((torch.mv, torch.dot, torch.outer, torch.ger, torch.addmm, torch.addmv,
                                     torch.baddbmm), _products),
                    torch.addbmm: _summed_batch_product, torch.einsum: _einsum_products}
