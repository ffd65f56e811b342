"""Reads of a tensor's sizes in the reference, answered with the traced sizes.

Real code writes ``F.layer_norm(x, x.shape[1:])``, ``(x.size(-1),)`` or ``x.size(-1) ** -0.5``.
``torch.fx`` records these reads as graph nodes; here each is answered with the value it had when the
reference was traced, and integer arithmetic on such values is carried out.

The reference is traced at a small size, and the kernels run at the task's own. A size is therefore
used in two ways. Where only structure counts (a normalized shape, checked against the input's last
dimensions and not copied into the kernel), any traced size serves. As a number in a kernel
(``x.size(-1) ** -0.5``) a size serves only if it is the same at the size being optimised; one that
is not, or not known to be, is :class:`Varying`, and the lowering refuses to use it as a number.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin import decompose, size_tracing
from kernelevo.agent.builtin.program import CannotCover

NOT_A_SHAPE_READ = object()
"""What :func:`traced_value` returns for any other call."""
INTEGER_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                      operator.pow, operator.neg, operator.mod}
"""Pure arithmetic on numbers: folded when every argument is a number already known."""


@dataclass(frozen=True)
class Varying:
    """A size as traced that is not the same (or not known to be) at the size being optimised."""

    value: int | float


@dataclass(frozen=True)
class FullSizes:
    """What is known of the sizes being optimised: the inputs' shapes there, by placeholder name, and
    whether every input has there the shape it was traced with (then so does every value)."""

    inputs: dict[str, tuple[int, ...]]
    all_same: bool = False
    values: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Other values' shapes there, by node name, where a trace at that size gives them
    (:func:`full_trace.matching_shapes`)."""


def _shape_of(value: Any, full: FullSizes | None) -> tuple[int | Varying, ...] | None:
    meta = value.meta.get("tensor_meta") if isinstance(value, torch.fx.Node) else None
    if meta is None or not hasattr(meta, "shape"):
        return None
    traced = tuple(int(s) for s in meta.shape)
    if full is not None and full.all_same:
        return traced
    there = full.inputs.get(value.name) if full is not None and value.op == "placeholder" else None
    if there is None or len(there) != len(traced):
        return tuple(Varying(s) for s in traced)
    return tuple(s if s == t else Varying(s) for s, t in zip(traced, there, strict=True))


def _number(value: Any) -> int | float | None:
    if isinstance(value, Varying):
        return value.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def known_number(value: Any, values: dict[str, Any]) -> int | float | Varying | None:
    """``value`` as a number (or a :class:`Varying` one) if it is one, or names a node already folded
    to one; else None."""
    if isinstance(value, torch.fx.Node):
        value = values.get(value.name)
    return value if _number(value) is not None else None


def constant(value: Any, values: dict[str, Any]) -> Any:
    """``value`` with every node folded to a number or a tuple of numbers put in its place, at the
    traced size (a normalized shape written ``x.shape[1:]`` or ``(x.size(-1),)``: structure only);
    other nodes are left as they are."""
    if isinstance(value, Varying):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(constant(v, values) for v in value)
    if isinstance(value, torch.fx.Node):
        folded = values.get(value.name)
        if isinstance(folded, tuple) and all(_number(v) is not None for v in folded):
            return tuple(constant(v, values) for v in folded)
        if _number(folded) is not None:
            return constant(folded, values)
    return value


def traced_value(target: Any, name: str, method: bool, args: list[Any], kwargs: dict[str, Any],
                 values: dict[str, Any], full: FullSizes | None = None,
                 shape_of: Callable[[Any, FullSizes | None], tuple[Any, ...] | None] = _shape_of) -> Any:
    """The traced value of ``x.shape``, ``x.size()``, ``x.size(d)``, ``x.dim()``, ``x.ndim``,
    ``x.numel()``, ``len`` of a folded shape, or integer arithmetic on folded numbers (each size
    :class:`Varying` unless ``full`` shows it is the same at the size being optimised);
    :data:`NOT_A_SHAPE_READ` for any other call. ``shape_of``: a tensor's shape as these reads see it."""
    shape = shape_of(args[0], full) if args else None
    if shape is not None:
        if target is getattr and args[1] in ("shape", "ndim"):
            return shape if args[1] == "shape" else len(shape)
        if method and name == "size":
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            return shape if dim is None else shape[dim] if isinstance(dim, int) else NOT_A_SHAPE_READ
        if method and name in ("dim", "ndimension"):
            return len(shape)
        if method and name in ("numel", "nelement"):
            total = math.prod(_number(s) for s in shape)
            return Varying(total) if any(isinstance(s, Varying) for s in shape) else total
    if target is len and args and isinstance(folded := constant(args[0], values), tuple):
        return len(folded)
    if target in INTEGER_ARITHMETIC and args and not kwargs:
        numbers = [known_number(a, values) for a in args]
        if all(n is not None for n in numbers) and any(isinstance(a, torch.fx.Node) for a in args):
            try:
                result = target(*(_number(n) for n in numbers))
            except (ArithmeticError, ValueError):
                return NOT_A_SHAPE_READ
            return Varying(result) if any(isinstance(n, Varying) for n in numbers) else result
    return NOT_A_SHAPE_READ


NUMBER_FUNCTIONS = {math.sqrt, math.log, math.log2, math.log10, math.exp, math.floor, math.ceil, float, int, abs,
                    operator.neg}
"""Functions of one number (``math.sqrt(q.size(-1))``): folded when their argument is folded."""
TENSOR_BY_NUMBER = {operator.mul, operator.truediv, operator.add, operator.sub, operator.pow, operator.floordiv,
                    operator.mod, torch.mul, torch.div, torch.true_divide, torch.add, torch.sub, torch.pow}
TENSOR_BY_NUMBER_METHODS = {"mul", "div", "true_divide", "add", "sub", "pow"}
"""Arithmetic of a tensor and a number: a size that differs at the size being optimised is put in
as its value there only in these (never in a view or a tensor's size, where the small graph needs
its own)."""


def shapes_there(gm: torch.fx.GraphModule, full: FullSizes | None) -> dict[str, tuple[int, ...]]:
    """Values' shapes at the size being optimised, by node name, where known: the inputs', and every
    value's when each input has there the shape it was traced with."""
    if full is None:
        return {}
    there = dict(full.values) | {name: tuple(shape) for name, shape in full.inputs.items()}
    if full.all_same:
        there.update({n.name: tuple(int(d) for d in n.meta["tensor_meta"].shape) for n in gm.graph.nodes
                      if hasattr(n.meta.get("tensor_meta"), "shape")})
    return there


def _evaluate(node: torch.fx.Node, values: dict[str, Any], full: FullSizes | None,
              shape_of: Callable[[Any, FullSizes | None], tuple[Any, ...] | None] = _shape_of) -> Any:
    """``node``'s value if it is a read of sizes or arithmetic on such values, else NOT_A_SHAPE_READ."""
    target, args, kwargs = node.target, list(node.args), dict(node.kwargs)
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    method = node.op == "call_method"
    if not method and target is operator.getitem and len(args) == 2 and isinstance(args[0], torch.fx.Node):
        shape = values.get(args[0].name)
        index = args[1]
        if isinstance(shape, tuple) and (isinstance(index, slice) or (isinstance(index, int) and
                                                                      -len(shape) <= index < len(shape))):
            return shape[index]
        return NOT_A_SHAPE_READ
    if not method and target in NUMBER_FUNCTIONS and len(args) == 1 and not kwargs and \
            isinstance(args[0], torch.fx.Node):
        number = known_number(args[0], values)
        if number is None:
            return NOT_A_SHAPE_READ
        try:
            result = target(_number(number))
        except (ArithmeticError, ValueError):
            return NOT_A_SHAPE_READ
        return Varying(result) if isinstance(number, Varying) else result
    return traced_value(target, name, method, args, kwargs, values, full, shape_of)


def _scales_a_tensor(user: torch.fx.Node) -> bool:
    """Is ``user`` arithmetic of a tensor and a number (its result a tensor)?"""
    arithmetic = (user.op == "call_function" and user.target in TENSOR_BY_NUMBER) or \
        (user.op == "call_method" and user.target in TENSOR_BY_NUMBER_METHODS)
    return arithmetic and hasattr(user.meta.get("tensor_meta"), "shape")


def _put(user: torch.fx.Node, node: torch.fx.Node, value: Any) -> None:
    """``value`` in place of ``node`` wherever ``user``'s arguments read it."""
    user.args = torch.fx.node.map_arg(user.args, lambda n: value if n is node else n)
    user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n: value if n is node else n)


CONSTANT_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.pow,
                       operator.neg, operator.abs, abs, float, int, min, max}


def fold_type_infos(gm: torch.fx.GraphModule) -> bool:
    """A dtype's limit read in forward (``torch.finfo(x.dtype).max``, ``x.dtype`` of a value whose dtype
    the trace knows) as its number, and arithmetic on such numbers alone (``fi.max - 1000``, ``-fi.max /
    2``) carried out, before any rewrite reads the calls they feed (a clamp's bound must be a number
    there). True if something changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not size_tracing.type_info:
            continue
        dtype = node.args[0]
        if isinstance(dtype, torch.fx.Node) and dtype.op == "call_function" and dtype.target is getattr and \
                dtype.args[1] == "dtype" and isinstance(dtype.args[0], torch.fx.Node):
            dtype = getattr(dtype.args[0].meta.get("tensor_meta"), "dtype", None)
        if isinstance(dtype, torch.dtype):
            _fold_constant(gm, node, size_tracing.type_info(dtype, *node.args[1:]))
            changed = True
    if changed:
        gm.recompile()
    return changed


def _fold_constant(gm: torch.fx.GraphModule, node: torch.fx.Node, value: Any) -> None:
    """``value`` in place of ``node`` in every use, and each use that is arithmetic on numbers alone
    carried out in turn."""
    for user in list(node.users):
        _put(user, node, value)
        numbers = [*user.args, *user.kwargs.values()]
        if user.op == "call_function" and user.target in CONSTANT_ARITHMETIC and \
                all(_number(a) is not None for a in numbers):
            try:
                result = user.target(*user.args, **user.kwargs)
            except (ArithmeticError, ValueError, TypeError):
                continue
            _fold_constant(gm, user, result)
    if not node.users:
        gm.graph.erase_node(node)


def fold_dtypes(gm: torch.fx.GraphModule) -> bool:
    """Put a tensor's dtype read in forward (``mask.to(x.dtype)``) into the calls that use it (a cast
    to the dtype the value has is the value; a limit of a dtype is a number by now, :func:`fold_type_infos`):
    the dtypes are the task's, fixed, and a segment that casts to ``x.dtype`` then needs nothing of ``x``
    (which would otherwise be its largest input and set its extent). True if something changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if not (node.op == "call_function" and node.target is getattr and len(node.args) == 2
                and node.args[1] == "dtype" and isinstance(node.args[0], torch.fx.Node)):
            continue
        dtype = getattr(node.args[0].meta.get("tensor_meta"), "dtype", None)
        if not isinstance(dtype, torch.dtype):
            continue
        for user in list(node.users):
            receiver = user.args[0] if user.args else None
            if isinstance(receiver, torch.fx.Node) and receiver.op == "get_attr":
                continue  # a tensor made in forward cast to x's dtype is read as a number where it is used
            _put(user, node, dtype)
            changed = True
            if decompose.same_dtype_cast(user) and not any(u.op == "output" for u in user.users):
                user.replace_all_uses_with(user.args[0])  # a cast to the dtype the value has: the value
                gm.graph.erase_node(user)
        if not node.users:
            gm.graph.erase_node(node)
    if changed:
        gm.recompile()
    return changed


def fold_numbers(gm: torch.fx.GraphModule, full: FullSizes | None) -> bool:
    """Put numbers read from sizes into the ops that use them (``matmul(q, k.mT) / math.sqrt(q.size(-1))``
    becomes a division by a constant), so a template sees arithmetic with a number, not a read of a
    tensor it has no other use for. A number the same at the size being optimised goes in everywhere;
    one that differs there goes in as its value there, and only into arithmetic with a tensor. The
    reads left without users are removed. True if a number that holds only at the size being
    optimised was put in (the code generated from the graph is then for that size alone)."""
    same: dict[str, Any] = {}
    there: dict[str, Any] = {}
    known = shapes_there(gm, full)

    def shape_there(value: Any, _: FullSizes | None) -> tuple[int, ...] | None:
        return known.get(value.name) if isinstance(value, torch.fx.Node) else None

    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        value = _evaluate(node, same, full)
        if value is NOT_A_SHAPE_READ:
            continue
        same[node.name] = value
        if full is not None:
            value_there = _evaluate(node, there, None, shape_there)
            if value_there is not NOT_A_SHAPE_READ:
                there[node.name] = value_there
    changed = sized = False
    for node in list(gm.graph.nodes):
        value = same.get(node.name)
        if _number(value) is None:
            continue
        number = there.get(node.name) if isinstance(value, Varying) else value
        if _number(number) is None or isinstance(number, Varying):
            continue
        for user in list(node.users):
            if user.name in same or (isinstance(value, Varying) and not _scales_a_tensor(user)):
                continue
            _put(user, node, number)
            changed = True
            sized = sized or isinstance(value, Varying)
    for node in reversed(list(gm.graph.nodes)):
        if node.name in same and not node.users:
            gm.graph.erase_node(node)
            changed = True
    if changed:
        gm.recompile()
    return sized


def same_call_at_full_size(node: torch.fx.Node, full: torch.nn.Module | None, what: str) -> None:
    """A function call's arguments are constants in the candidate: CannotCover if the model at the size
    being optimised makes the same call with others (a pad, a shift or a window that follows a size)."""
    if full is None or node.op != "call_function":
        return
    try:
        traced = size_tracing.traced(full)
        other = next(n for n in traced.graph.nodes if n.name == node.name)
    except Exception:  # the small plan stands where the full model cannot be traced
        return
    if other.op == "call_module":  # a module the plan reads as its function (a padding): its options then
        from kernelevo.agent.builtin.rewrite_functions import module_as_function

        found = module_as_function(traced.get_submodule(str(other.target)))
        if found is None or any(node.kwargs.get(k) != v for k, v in found[1].items()):
            raise CannotCover(f"a {what} whose module's options depend on the size (they differ between the small "
                              "and the full size)")
        return
    if other.args[1:] != node.args[1:] or other.kwargs != node.kwargs:
        raise CannotCover(f"a {what} whose arguments depend on the size (they differ between the small and the "
                          "full size)")

