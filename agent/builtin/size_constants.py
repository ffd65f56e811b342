"""Numbers in ``forward`` that change with the task's size.

A reference is traced at a small size, and tracing writes every Python number ``forward`` computes
into the graph as a constant: ``x * self.scale`` with ``self.scale = dim ** -0.5`` becomes
``x * 0.0625`` traced at the small size, but ``x * 0.03125`` at the size being optimised. A kernel
holding the first would be wrong at the task's own size. Sizes read from an input are nodes of the
graph, not constants (``shape_reads`` puts them in); what differs here was made by the constructor
or by the file's own constants. So the graph traced at the size being optimised lends each
arithmetic call its numbers (:func:`adopt_numbers_there`), and the generated constructor checks that
it was built as the kernels assume (:func:`guarded_init`): a ``ModelNew`` built with other arguments
says so instead of computing with numbers that are not its own. Where the two graphs cannot be
matched node for node, a number that differs is refused (:func:`refuse_numbers_that_change`). Sizes
that views, slices and factories take are left to the planners, which read them at run time or check
them at the full size.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import (
    BINARY_METHODS,
    BINARY_TARGETS,
    COMPARE_METHODS,
    COMPARE_TARGETS,
    UNARY_TARGETS,
)

ARITHMETIC_TARGETS = {*BINARY_TARGETS, *COMPARE_TARGETS, *UNARY_TARGETS, operator.floordiv, operator.mod,
                      torch.clamp, torch.clip, torch.where, torch.masked_fill, F.hardtanh, F.softplus, F.elu,
                      F.leaky_relu, F.threshold, F.scaled_dot_product_attention}
ARITHMETIC_METHODS = {*BINARY_METHODS, *COMPARE_METHODS, "clamp", "clamp_min", "clamp_max", "clip",
                      "masked_fill", "where", "fill_"}
"""Calls whose numbers become constants of a kernel."""


def _numbers(node: torch.fx.Node) -> list[float]:
    leaves: list[Any] = []
    torch.fx.node.map_aggregate((node.args, node.kwargs), leaves.append)
    return [v for v in leaves if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _arithmetic(node: torch.fx.Node) -> bool:
    if node.op == "call_function":
        return node.target in ARITHMETIC_TARGETS
    return node.op == "call_method" and node.target in ARITHMETIC_METHODS


def refuse_numbers_that_change(small: torch.nn.Module, full: torch.nn.Module | None) -> None:
    """CannotCover if an arithmetic call of ``small``'s forward uses a number that is another at the
    size being optimised (``full``: the model there, None where it cannot be built); nothing where
    the two graphs cannot be traced or matched node for node (the judge still checks every kernel at
    the task's own size)."""
    if full is None:
        return
    try:
        nodes = list(torch.fx.symbolic_trace(small).graph.nodes), list(torch.fx.symbolic_trace(full).graph.nodes)
    except Exception:  # noqa: BLE001 (a forward fx cannot trace is refused with its reason elsewhere)
        return
    traced, there = nodes
    if len(traced) != len(there):
        return
    for node, other in zip(traced, there, strict=True):
        if (node.op, node.target) != (other.op, other.target):
            return
        if not _arithmetic(node):
            continue
        for value, full_value in zip(_numbers(node), _numbers(other), strict=False):
            if value != full_value:
                raise CannotCover(f"`{node.name}` uses the number {value!r} at the traced size and {full_value!r} "
                                  "at the size being optimised (a value read in forward that follows the task's "
                                  "sizes); a kernel holds its numbers as constants")


def _on_a_tensor(node: torch.fx.Node) -> bool:
    return any(a.meta.get("tensor_meta") is not None for a in node.all_input_nodes)


def _with_numbers(value: Any, numbers: Any) -> Any:
    """``value`` (a node's args or kwargs) with each number replaced by the next of ``numbers``."""
    return torch.fx.node.map_aggregate(
        value, lambda v: next(numbers) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)


def adopt_numbers_there(gm: torch.fx.GraphModule, there: torch.fx.GraphModule | None) -> list[str] | None:
    """Give each arithmetic call of ``gm`` (traced at the small size) the numbers its counterpart in
    ``there`` (traced at the size being optimised) takes. Returns the calls changed, as words, or None
    where the graphs cannot be matched node for node (the same calls in the same order)."""
    if there is None:
        return None
    mine, theirs = list(gm.graph.nodes), list(there.graph.nodes)
    if len(mine) != len(theirs) or any((a.op, a.target) != (b.op, b.target) for a, b in zip(mine, theirs, strict=True)):
        return None
    changed = []
    for node, other in zip(mine, theirs, strict=True):
        if not _arithmetic(node) or not _on_a_tensor(node):
            continue  # arithmetic of sizes alone is left to ``shape_reads``, which reads them at run time
        small, full = _numbers(node), _numbers(other)
        if small == full:
            continue
        if len(small) != len(full):
            raise CannotCover(f"`{node.name}` takes other arguments at the size being optimised")
        numbers = iter(full)
        node.args, node.kwargs = _with_numbers(node.args, numbers), _with_numbers(node.kwargs, numbers)
        changed.append(f"`{node.name}`: {', '.join(f'{a!r} -> {b!r}' for a, b in zip(small, full) if a != b)}")
    if changed:
        gm.recompile()
    return changed


def construction_numbers(small: torch.nn.Module, full: torch.nn.Module | None) -> list[tuple[str, Any]]:
    """The plain numbers the constructor stored on the model or its submodules that are others at the
    size being optimised: ``(path, value there)``, such as ``("self.scale", 0.03125)``."""
    if full is None:
        return []
    there = dict(full.named_modules())
    out = []
    for name, module in small.named_modules():
        other = there.get(name)
        if other is None:
            continue
        for attr, value in vars(module).items():
            full_value = vars(other).get(attr)
            numbers = [v for v in (value, full_value) if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if len(numbers) == 2 and value != full_value and not attr.startswith("_"):
                out.append((f"self.{name}.{attr}" if name else f"self.{attr}", full_value))
    return out


def guarded_init(init: str, numbers: list[tuple[str, Any]]) -> str:
    """``init`` (the constructor's source for ``ModelNew``) ending with a check that ``numbers`` (from
    :func:`construction_numbers`) have the values its kernels were generated with. CannotCover where
    the constructor can return before its end (the check would not run)."""
    if not numbers:
        return init
    function = ast.parse(init).body[0]
    assert isinstance(function, ast.FunctionDef)
    if any(isinstance(n, ast.Return) for n in ast.walk(function)):
        raise CannotCover("the reference's __init__ returns before its end, so ModelNew cannot check that it was "
                          "built with the numbers its kernels hold")
    indent = " " * function.body[0].col_offset
    paths, values = ", ".join(p for p, _ in numbers), tuple(v for _, v in numbers)
    message = (f"generated for a model built with {', '.join(f'{p} == {v!r}' for p, v in numbers)}: its kernels "
               "hold numbers the constructor makes")
    return (init.rstrip() + f"\n{indent}if ({paths},) != {values!r}:\n{indent}    raise ValueError({message!r})\n")


def refuse_modules_that_change(gm: torch.fx.GraphModule, full: torch.nn.Module | None) -> None:
    """CannotCover where a module the graph calls holds a float that is another at the size being
    optimised (``nn.LeakyReLU(dim ** -0.5)``): the templates read a called module's numbers from the
    traced model. Its sizes (ints) are read at run time or checked at the full size elsewhere."""
    if full is None:
        return
    for node in gm.graph.nodes:
        if node.op != "call_module":
            continue
        try:
            small, there = gm.get_submodule(str(node.target)), full.get_submodule(str(node.target))
        except AttributeError:
            continue
        for attr, value in vars(small).items():
            other = vars(there).get(attr)
            if isinstance(value, float) and isinstance(other, float) and value != other:
                raise CannotCover(f"module `{node.target}` has {attr} {value!r} at the traced size and {other!r} "
                                  "at the size being optimised; a kernel holds its numbers as constants")


def numbers_there(model: torch.nn.Module, gm: torch.fx.GraphModule, context: Any) -> None:
    """``gm``'s arithmetic given its numbers at the size being optimised (``context``: recognize's,
    with the reference built and traced there), ModelNew's constructor then checking the ones it
    stores; refused where the two sizes run other ops, or a called module's float differs."""
    refuse_modules_that_change(gm, context.full)
    there = context.full_graph()
    adopted = adopt_numbers_there(gm, there)
    if adopted is None and there is not None:
        raise CannotCover("the reference's forward runs other ops at the size being optimised than at the traced "
                          "size (a branch or a loop that follows a size): a plan made at the traced size would "
                          "compute something else there")
    if adopted is None:
        refuse_numbers_that_change(model, context.full)
    elif adopted:
        context.numbers_there = adopted
        context.init = guarded_init(context.init, construction_numbers(model, context.full))
