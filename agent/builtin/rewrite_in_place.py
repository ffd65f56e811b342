"""Rewrites of the traced graph that make values plain before the pointwise rewrites read it:
in-place arithmetic on a value computed in ``forward`` that shares its storage with nothing (not an
input, not a view, no view taken of it, not written by an in-place function) as the same arithmetic
out of place, what reads the value after the write reading its result (an item assignment of a
number through basic indexing, ``m[:, 0] = True``, as a ``where`` over the positions it writes); and
tensors of one value shaped like another (``zeros_like``, ``ones_like``, ``full_like``) as that value
beside a tensor of their shape. Each is plain torch, computing what the graph computed."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.vocabulary import reads_metadata

Node = torch.fx.Node


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def option(node: Node, name: str, position: int, default: Any) -> Any:
    """``node``'s argument ``name``, by keyword or at ``position``."""
    return node.kwargs.get(name, node.args[position] if len(node.args) > position else default)


OPERATORS_WRITING_NOTHING = {operator.and_, operator.or_, operator.not_, operator.is_, operator.is_not}
"""Python's operators whose names end in an underscore and write nothing (``a & b``)."""


def writes_in_place(node: Node) -> bool:
    """Does ``node`` write its first argument (a name ending in ``_``, ``inplace=True``, ``x += y``)?
    Its result is then that argument itself."""
    name = _name(node)
    named = name.endswith("_") and not name.endswith("__") and node.target not in OPERATORS_WRITING_NOTHING
    return named or node.kwargs.get("inplace") is True or node.target in IN_PLACE_OPERATORS or \
        node.target is operator.setitem


IN_PLACE_METHODS = {"add_": "add", "sub_": "sub", "mul_": "mul", "div_": "div", "pow_": "pow", "clamp_": "clamp",
                    "clamp_min_": "clamp_min", "clamp_max_": "clamp_max", "neg_": "neg", "abs_": "abs",
                    "exp_": "exp", "log_": "log", "sqrt_": "sqrt", "tanh_": "tanh", "sigmoid_": "sigmoid",
                    "relu_": "relu", "lerp_": "lerp", "addcmul_": "addcmul", "addcdiv_": "addcdiv",
                    "square_": "square", "reciprocal_": "reciprocal", "rsqrt_": "rsqrt"}
FRESH_VALUE = {"call_function", "call_method", "call_module"}
IN_PLACE_OPERATORS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                      operator.itruediv: operator.truediv}
ALIASING = {"view", "reshape", "transpose", "permute", "squeeze", "unsqueeze", "expand", "flatten", "narrow",
            "select", "t", "T", "mT", "view_as", "expand_as", "unflatten", "chunk", "split", "unbind", "as_strided",
            "diagonal", "movedim", "moveaxis", "swapaxes", "swapdims", "contiguous", "detach", "to", "type_as",
            "float", "half", "bfloat16", "real", "getitem", "getattr", "dropout", "alias", "ravel", "reshape_as",
            "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "positive", "conj", "cpu", "cuda",
            "view_as_real", "view_as_complex", "resolve_conj", "resolve_neg", "adjoint", "as_tensor", "asarray"}
"""Ops whose result may share its storage with an argument: writing one writes the other."""


def _name(node: Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


def _aliases(gm: torch.fx.GraphModule, node: Node) -> bool:
    """May ``node``'s result share storage with an argument of it?"""
    if writes_in_place(node):
        return True
    if node.op == "call_module":  # Identity, Flatten, Dropout out of training: the input itself
        return not any(p is not None for p in gm.get_submodule(str(node.target)).parameters(recurse=False))
    return _name(node) in ALIASING


def out_of_place(gm: torch.fx.GraphModule, node: Node, order: dict[Node, int]) -> bool:
    """In-place arithmetic on a value computed in ``forward`` that shares its storage with nothing
    (not an input, not a view, no view taken of it): the same arithmetic out of place, and what reads
    the value after the write reads its result."""
    if node.op == "call_method" and node.target in IN_PLACE_METHODS:
        plain = IN_PLACE_METHODS[str(node.target)]
    elif node.op == "call_function" and node.target in IN_PLACE_OPERATORS:
        plain = IN_PLACE_OPERATORS[node.target]
    else:
        return False
    written = node.args[0] if node.args else None
    if not _fresh_and_unshared(gm, written, node, order):
        return False
    for user in list(written.users):
        if user is not node and order[user] > order[node]:
            user.replace_input_with(written, node)
    node.target = plain
    return True


def _fresh_and_unshared(gm: torch.fx.GraphModule, written: Any, node: Node, order: dict[Node, int]) -> bool:
    """Is ``written`` a value computed in ``forward`` that shares storage with nothing before ``node``
    writes it (a view or alias taken before the write would read the written values after it)?"""
    if not isinstance(written, Node) or written.op not in FRESH_VALUE or _aliases(gm, written):
        return False
    return not any(_aliases(gm, user) for user in written.users if user is not node and order[user] < order[node])


def _whole(index: Any) -> bool:
    """``:`` or ``0:``: every position of a dim."""
    return isinstance(index, slice) and index.start in (None, 0) and index.stop is None and index.step in (None, 1)


def _basic(index: Any) -> bool:
    """An int, or a slice of ints (or Nones) with step 1: what :func:`_positions` takes."""
    if isinstance(index, int):
        return not isinstance(index, bool)
    return isinstance(index, slice) and index.step in (None, 1) and all(
        b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in (index.start, index.stop))


def _positions(graph: torch.fx.Graph, x: Node, dim: int, rank: int, index: Any) -> Node:
    """A boolean tensor, shaped to broadcast along ``dim`` of ``x``, true where ``index`` (:func:`_basic`,
    not the whole dim; negative ones counted from the end) picks a position."""
    size = graph.call_method("size", (x, dim))

    def at(i: int) -> Any:
        return i if i >= 0 else graph.call_function(operator.add, (size, i))

    positions = _along(graph, size, dim, rank, x)
    if isinstance(index, int):
        return graph.call_function(operator.eq, (positions, at(index)))
    parts = ([graph.call_function(operator.ge, (positions, at(index.start)))] if index.start else []) + (
        [graph.call_function(operator.lt, (positions, at(index.stop)))] if index.stop is not None else [])
    return parts[0] if len(parts) == 1 else graph.call_function(operator.and_, tuple(parts))


def _along(graph: torch.fx.Graph, size: Node, dim: int, rank: int, device_of: Node) -> Node:
    """``arange(size)`` on ``device_of``'s device, viewed to lie along ``dim`` of a tensor of ``rank``
    dims (every other dim of size 1)."""
    made = graph.call_function(torch.arange, (size,), {"device": graph.call_function(getattr, (device_of, "device"))})
    return graph.call_method("view", (made, *[-1 if d == dim else 1 for d in range(rank)]))


def item_assignment(gm: torch.fx.GraphModule, node: Node, order: dict[Node, int]) -> bool:
    """``x[index] = v`` (``v`` a number of x's kind, ``index`` ints, slices of step 1 and an ellipsis) on a
    value of ``forward`` that shares its storage with nothing: ``where(picked, v, x)``, ``picked`` true
    at the positions the index writes (for a mask, ``x | picked`` or ``x & ~picked``), and what reads ``x``
    after the write reading that."""
    if not (node.op == "call_function" and node.target is operator.setitem and len(node.args) == 3):
        return False
    written, index, value = node.args
    meta = written.meta.get("tensor_meta") if isinstance(written, Node) else None
    if meta is None or not _fresh_and_unshared(gm, written, node, order) or not _number_fits(value, meta.dtype):
        return False
    index = index if isinstance(index, tuple) else (index,)
    rank = len(meta.shape)
    if sum(i is Ellipsis for i in index) > 1 or len([i for i in index if i is not Ellipsis]) > rank:
        return False
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (rank - len(index) + 1) + index[at + 1:]
    written_dims = [(dim, entry) for dim, entry in enumerate(index) if not _whole(entry)]
    if not written_dims or not all(_basic(entry) for _, entry in written_dims):
        return False
    graph = gm.graph
    with graph.inserting_before(node):
        picked = [_positions(graph, written, dim, rank, entry) for dim, entry in written_dims]
        mask = picked[0]
        for other in picked[1:]:
            mask = graph.call_function(operator.and_, (mask, other))
        if meta.dtype == torch.bool:  # a mask's positions set or cleared: logic, no number of a bool
            result = graph.call_function(operator.or_, (written, mask)) if value else \
                graph.call_function(operator.and_, (written, graph.call_function(operator.invert, (mask,))))
        else:
            value = int(value) if isinstance(value, bool) else value
            result = graph.call_function(torch.where, (mask, value, written))
    for user in list(written.users):
        if user is not node and user is not result and order.get(user, -1) > order[node]:
            user.replace_input_with(written, result)
    graph.erase_node(node)
    return True


SCATTERS = {"scatter_": True, "scatter": False}
"""``scatter`` methods, in place or not."""


def scatter_numbers(gm: torch.fx.GraphModule, node: Node, order: dict[Node, int]) -> bool:
    """``x.scatter_(dim, index, v)`` (or ``x.scatter``, ``torch.scatter``) with ``v`` a number and one
    index per row along ``dim`` (an index of size 1 there and of x's size elsewhere: a one-hot written
    into zeros, ``one_hot.scatter_(1, label.view(-1, 1), 1)``): ``where(positions along dim == index, v,
    x)``, which the pointwise templates compute without a scatter; what reads x after an in-place write
    reads that."""
    if node.op == "call_method" and node.target in SCATTERS:
        in_place, args = SCATTERS[str(node.target)], list(node.args)
    elif node.op == "call_function" and node.target is torch.scatter:
        in_place, args = False, list(node.args)
    else:
        return False
    names = ("input", "dim", "index", "value")
    args += [node.kwargs[n] for n in names[len(args):] if n in node.kwargs]
    if len(args) != 4 or set(node.kwargs) - set(names) or not isinstance(args[1], int) or \
            not all(isinstance(a, Node) for a in args[::2]):
        return False
    written, dim, index, value = args
    meta, index_meta = written.meta.get("tensor_meta"), index.meta.get("tensor_meta")
    if meta is None or index_meta is None or not _number_fits(value, meta.dtype) or meta.dtype == torch.bool:
        return False
    shape, rank = tuple(meta.shape), len(meta.shape)
    dim %= max(rank, 1)
    if tuple(index_meta.shape) != shape[:dim] + (1,) + shape[dim + 1:]:
        return False
    if in_place and not _fresh_and_unshared(gm, written, node, order):
        return False
    graph = gm.graph
    with graph.inserting_before(node):
        positions = _along(graph, graph.call_method("size", (_shaped_like(written), dim)), dim, rank, index)
        hit = graph.call_function(operator.eq, (positions, index))
        result = graph.call_function(torch.where, (hit, int(value) if isinstance(value, bool) else value, written))
    node.replace_all_uses_with(result)
    if in_place:
        for user in list(written.users):
            if user is not result and order.get(user, -1) > order[node]:
                user.replace_input_with(written, result)
    graph.erase_node(node)
    return True


def _shaped_like(node: Node) -> Node:
    """The tensor whose sizes ``node`` takes where it is made in ``forward`` by a factory from them
    (``torch.zeros(x.size())``, ``torch.zeros_like(x)``): sizes read from it leave the factory free to
    become a number in each use (:func:`fold_filled_like`)."""
    if node.op == "call_function" and node.target in FILLED_LIKE and node.args and isinstance(node.args[0], Node):
        size = node.args[0]
        if node.target in (torch.zeros_like, torch.ones_like, torch.full_like):
            return size
        if size.op == "call_method" and size.target == "size" and len(size.args) == 1 and not size.kwargs:
            return size.args[0]
        if size.op == "call_function" and size.target is getattr and size.args[1:] == ("shape",):
            return size.args[0]
    return node


def _number_fits(value: Any, dtype: torch.dtype) -> bool:
    """Does assigning ``value`` to a tensor of ``dtype`` keep it, as ``where`` would (no rounding by the
    assignment that ``where``'s promotion would not do)?"""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return dtype != torch.bool or value in (0, 1)
    return isinstance(value, float) and dtype.is_floating_point


FILLED_LIKE = {torch.zeros_like: 0.0, torch.ones_like: 1.0, torch.full_like: None, torch.zeros: 0.0, torch.ones: 1.0,
               torch.full: None}
"""Tensors of one value (shaped like another, or by sizes): that value, where it meets other tensors that
give the result its shape and dtype without it."""
MEETS = {operator.add, operator.sub, operator.mul, operator.truediv, torch.add, torch.sub, torch.mul, torch.div,
         torch.where}
BOUNDS = {torch.maximum: "min", torch.minimum: "max"}
"""``maximum(x, c)`` takes no number: it is ``x`` clamped from below at ``c`` (``minimum``: from above)."""


def _filled_value(node: Node) -> Any:
    """The one value ``node`` fills a tensor with (None where it is not such a call, or takes options
    beyond its value, size, dtype and device)."""
    if node.op != "call_function" or node.target not in FILLED_LIKE:
        return None
    value = FILLED_LIKE[node.target]
    if node.target in (torch.full_like, torch.full):
        value = option(node, "fill_value", 1, None)
    extra = set(node.kwargs) - {"input", "fill_value", "device", "size", "dtype"}
    if node.target in (torch.zeros_like, torch.ones_like, torch.full_like) and "dtype" in node.kwargs:
        return None
    meta = node.meta.get("tensor_meta")
    return value if is_number(value) and not extra and meta is not None and meta.dtype.is_floating_point else None


def _same_without(user: Node, node: Node) -> bool:
    """Does ``user`` keep its shape and dtype where ``node``, a filled tensor, is a Python number? Its
    other tensors must give the result's shape, and a floating one the dtype (with none, torch's default
    dtype, which the filled tensor must have)."""
    out, meta = user.meta.get("tensor_meta"), node.meta["tensor_meta"]
    peers = [a.meta.get("tensor_meta") for a in user.args if isinstance(a, Node) and a is not node]
    if out is None or not peers or any(p is None for p in peers) or out.dtype != meta.dtype:
        return False
    try:
        shape = torch.broadcast_shapes(*[tuple(p.shape) for p in peers])
    except RuntimeError:
        return False
    floating = [p.dtype for p in peers if p.dtype.is_floating_point]
    return tuple(shape) == tuple(out.shape) and (meta.dtype in floating if floating
                                                 else meta.dtype == torch.get_default_dtype())


def fold_filled_like(gm: torch.fx.GraphModule) -> bool:
    """``zeros_like(x)``, ``ones_like(x)``, ``full_like(x, v)``, ``torch.zeros(x.size())`` and the like (no
    other options) as the number itself in each use where a Python number computes the same
    (``where(c, x, zeros_like(x))`` is ``where(c, x, 0.0)``; a one-hot ``where(hit, 1, torch.zeros(n, c))``
    is ``where(hit, 1, 0.0)``)."""
    changed = False
    for node in list(gm.graph.nodes):
        value = _filled_value(node)
        if value is None or any(_aliases(gm, user) and not reads_metadata(user) for user in node.users):
            continue  # written in place (a one-hot's scatter_) or viewed: not one value for every reader
        for user in list(node.users):
            if user.op != "call_function" or user.kwargs or not _same_without(user, node):
                continue
            held = torch.tensor(float(value), dtype=node.meta["tensor_meta"].dtype).item()  # as the tensor holds it
            if user.target in MEETS:
                user.args = tuple(held if a is node else a for a in user.args)
            elif user.target in BOUNDS and len(user.args) == 2:
                same = next(a for a in user.args if a is not node)
                user.target, user.args, user.kwargs = torch.clamp, (same,), {BOUNDS[user.target]: held}
            else:
                continue
            changed = True
        if not node.users:
            gm.graph.erase_node(node)
    return changed


def is_impure(node: Node) -> bool:
    """Is ``node`` a statement (a write, a graph input or output) that removing dead code must keep?"""
    return node.op in ("placeholder", "output") or writes_in_place(node) or (
        node.op == "call_module")


def remove_dead_values(gm: torch.fx.GraphModule) -> bool:
    """Erase values nothing reads, last first (True if any); writes in place are never erased (fx's
    own pass takes a method call for pure, and would drop ``y.masked_fill_(m, 0)`` whose result is
    unused)."""
    erased = False
    for node in reversed(list(gm.graph.nodes)):
        if not node.users and not is_impure(node):
            gm.graph.erase_node(node)
            erased = True
    return erased
