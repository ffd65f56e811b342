"""Tensors ``forward`` builds from sizes alone, made once per size in the generated ``forward``.

Real code builds tensors that depend on no input's values: a lower-triangular matrix of ones
(``torch.ones(n, n, device=x.device).tril()``), the frequencies of a timestep embedding
(``torch.exp(-log(1e4) * torch.arange(half) / half)``). Where no template computes such a tensor
inside its kernel, the generated ``forward`` makes it with the reference's own calls and keeps it,
keyed by everything it was made from (the sizes, devices and dtypes it read, and the default
dtype): the same key makes the same values, so a later call with that key reads the kept tensor
instead of paying eager's launches again. A new size or device makes it afresh.

Only deterministic calls on numbers, sizes and metadata of the inputs qualify: never a parameter or
buffer (a checkpoint may change them), never an input's values, never a random draw, never a call
that writes in place. The numbers a call takes are the ones it takes in the reference traced at the
size being optimised (a constructor's ``dim // 2`` is another number there than in the small trace).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
from torch.fx.node import _get_qualified_name

from kernelevo.agent.builtin import size_tracing
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import TRACED_CONSTANT, attribute_at, reads_metadata
from kernelevo.sandbox.judge.static_rules import TORCH_GLUE

HELPER = "made_from_sizes"
"""The helper the generated file holds once; ``forward`` calls it for each tensor it makes."""

HELPER_SOURCE = f'''def {HELPER}(owner, slot, key, make):
    """The tensor ``make()`` returns, kept on ``owner`` until ``key`` (the sizes, devices and dtypes it
    was made from) changes: a tensor built from sizes alone has the same values for the same key."""
    kept = getattr(owner, "_kernelevo_made", None)
    if kept is None:
        kept = owner._kernelevo_made = {{}}
    key = (key, torch.get_default_dtype())
    entry = kept.get(slot)
    if entry is None or entry[0] != key:
        entry = kept[slot] = (key, make())
    return entry[1]'''

RANDOM_WORDS = ("rand", "bernoulli", "multinomial", "normal", "poisson", "dropout", "rrelu", "gumbel", "uniform",
                "exponential", "geometric", "cauchy")
"""Words in the name of a call that draws random numbers (``rand_like``, ``.bernoulli()``, ``F.rrelu``,
``F.dropout2d``, ``.uniform_``): such a tensor is not the same twice, so it is never made once and kept.
A deterministic call whose name holds one (``F.normalize``) is refused with them: never kept, not wrong."""
BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
          operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@"}
COMPARE = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==",
           operator.ne: "!="}


FACTORIES = {getattr(torch, name) for name in size_tracing.FACTORIES if name in TORCH_GLUE}
"""Factories the tracer records that the judge counts as glue, not the task's work (``ones``, ``zeros``,
``full``, ``arange``, ``empty``): allowed in ``forward`` of a strict task."""
VIEWS = {"view", "reshape", "unsqueeze", "squeeze", "expand", "transpose", "permute", "flatten", "t"}
"""Methods that view or copy what a factory made: allowed with it in a strict task."""


def is_factory(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in FACTORIES


def _metadata_of_input(node: torch.fx.Node) -> bool:
    """A read of an input's, a parameter's or a buffer's shape, dtype or device: never of their values."""
    return reads_metadata(node) and isinstance(node.args[0], torch.fx.Node) and \
        node.args[0].op in ("placeholder", "get_attr")


def _tensor_text(node: torch.fx.Node) -> str:
    return f"self.{node.target}" if node.op == "get_attr" else node.name


def _pure(node: torch.fx.Node) -> bool:
    """A call that neither draws random numbers nor writes into a tensor."""
    if node.op not in ("call_function", "call_method") or "out" in node.kwargs:
        return False
    name = node.target if node.op == "call_method" else _name(node)
    name = name.rsplit(".", 1)[-1].lower() if isinstance(name, str) else "?"
    return not name.endswith("_") and not any(word in name for word in RANDOM_WORDS)


def _writes(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The tensors ``node`` writes into: its ``out=``, or its first argument where it works in place."""
    written = [node.kwargs["out"]] if isinstance(node.kwargs.get("out"), torch.fx.Node) else []
    name = node.target if node.op == "call_method" else _name(node) if node.op == "call_function" else ""
    if isinstance(name, str) and name.endswith("_") and not name.endswith("__") and node.args and \
            isinstance(node.args[0], torch.fx.Node):
        written.append(node.args[0])
    return written


def _name(node: torch.fx.Node) -> str:
    try:
        return _get_qualified_name(node.target) if node.op == "call_function" else str(node.target)
    except (AttributeError, RuntimeError, TypeError):
        return "?"


def made_nodes(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The calls whose value depends on sizes and metadata of the inputs alone: a read of an input's
    metadata, or a pure call whose every node argument is one of these (and which takes at least one)."""
    made: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        if _metadata_of_input(node):
            made.add(node)
        elif _pure(node) and node.all_input_nodes and all(a in made for a in node.all_input_nodes):
            made.add(node)
    if any(w in made for node in gm.graph.nodes for w in _writes(node)):
        return set()  # a made tensor written later (through a view, perhaps) is not the same on every call
    return made


def made_root(node: torch.fx.Node, made: set[torch.fx.Node], value: Any) -> bool:
    """Is ``node`` a tensor made from sizes that something other than made values reads?"""
    return node in made and isinstance(value, torch.Tensor) and any(u not in made for u in node.users)


def _literal(a: Any) -> str:
    if isinstance(a, float) and not math.isfinite(a):
        return f"float({str(a)!r})"
    if isinstance(a, (bool, int, float, str, type(None), torch.dtype, torch.memory_format, torch.layout)):
        return repr(a)
    if isinstance(a, torch.device):
        return f"torch.device({str(a)!r})"
    raise CannotCover(f"a tensor made from sizes takes {type(a).__name__} `{a!r}`, which cannot be written out")


class _Writer:
    """Python source for a made value, written from the reference traced at the size being optimised
    with every made call it reads inline."""

    def __init__(self, named: dict[str, str], compute: bool) -> None:
        self.named, self.compute = named, compute
        self.keys: list[str] = []
        """What the source reads from ``forward``: the kept tensor's key."""

    def arg(self, a: Any) -> str:
        if isinstance(a, torch.fx.Node):
            return self.value(a)
        if isinstance(a, (tuple, list)):
            inner = ", ".join(self.arg(x) for x in a)
            return f"({inner},)" if isinstance(a, tuple) and len(a) == 1 else (
                f"({inner})" if isinstance(a, tuple) else f"[{inner}]")
        if isinstance(a, slice):
            return f"slice({self.arg(a.start)}, {self.arg(a.stop)}, {self.arg(a.step)})"
        return _literal(a)

    def value(self, node: torch.fx.Node) -> str:
        if node.name in self.named:
            self.keys.append(self.named[node.name])
            return self.named[node.name]
        if _metadata_of_input(node):
            rest = [_literal(a) for a in node.args[1:]] + [f"{k}={_literal(v)}" for k, v in node.kwargs.items()]
            tensor = _tensor_text(node.args[0])
            text = f"{tensor}.{node.args[1]}" if node.op == "call_function" else \
                f"{tensor}.{node.target}({', '.join(rest)})"
            self.keys.append(text)
            return text
        if node.op not in ("call_function", "call_method") or not _pure(node) or not node.all_input_nodes:
            raise CannotCover(f"`{node.name}` is not made from sizes alone")
        args = [self.arg(a) for a in node.args]
        kwargs = [f"{k}={self.arg(v)}" for k, v in node.kwargs.items()]
        tensor = hasattr(node.meta.get("tensor_meta"), "shape")
        if not self.compute and tensor and (node.target in BINARY or node.target in COMPARE or
                                             node.target is operator.neg):
            raise CannotCover(f"`{node.name}` computes on a tensor in torch, and the task is strict")
        if node.op == "call_method":
            if not self.compute and node.target not in VIEWS:
                raise CannotCover(f"`{node.name}` (.{node.target}) computes in torch, and the task is strict")
            return f"{args[0]}.{node.target}({', '.join(args[1:] + kwargs)})"
        if node.target in BINARY or node.target in COMPARE:
            return f"(({args[0]}) {BINARY.get(node.target) or COMPARE[node.target]} ({args[1]}))"
        if node.target is operator.neg:
            return f"(-({args[0]}))"
        if node.target is operator.getitem:
            return f"{args[0]}[{args[1]}]"
        name = _name(node)
        if not name.startswith("torch.") or name.startswith("torch._"):
            raise CannotCover(f"`{node.name}` calls {name}, which a tensor made from sizes cannot write out")
        if not self.compute and node.target not in FACTORIES:
            raise CannotCover(f"`{node.name}` ({name}) computes in torch, and the task is strict")
        return f"{name}({', '.join(args + kwargs)})"


def statement(node: torch.fx.Node, there: dict[str, torch.fx.Node], named: dict[str, str], compute: bool) -> str:
    """``node`` (a made root) as the statement of ``forward`` that makes it once per key: written from
    its counterpart in the reference traced at the size being optimised (``there``: its nodes by name),
    every made call inline, reading sizes ``forward`` already holds (``named``: node name -> name).
    ``compute``: torch may compute it (the task is not strict); else only factories and views make it."""
    counterpart = there.get(node.name)
    if counterpart is None or counterpart.target != node.target:
        raise CannotCover(f"`{node.name}` (made from sizes) has no counterpart at the size being optimised")
    writer = _Writer({k: v for k, v in named.items() if k != node.name}, compute)
    source = writer.value(counterpart)
    key = "(" + "".join(f"{k}, " for k in dict.fromkeys(writer.keys)) + ")"
    return f"{bound_name(node)} = {HELPER}(self, {node.name!r}, {key}, lambda: {source})"


def bound_name(node: torch.fx.Node) -> str:
    """The name ``forward`` keeps a made tensor under: private, so no input of the reference is named so."""
    return f"_kernelevo_made_{node.name}"


def number_source(node: torch.fx.Node, there: dict[str, torch.fx.Node], named: dict[str, str]) -> str | None:
    """``node`` (a number made from sizes: ``a.shape[0] * b.shape[0]``) as an expression ``forward`` can
    evaluate, written from its counterpart at the size being optimised; None where it cannot be."""
    counterpart = there.get(node.name)
    if counterpart is None or counterpart.target != node.target:
        return None
    try:
        return _Writer(named, compute=False).value(counterpart)
    except CannotCover:
        return None


def _view_name(node: torch.fx.Node) -> str | None:
    """The method of :data:`VIEWS` ``node`` calls, as a method (``x.unsqueeze(0)``) or as torch's function
    of the same name (``torch.unsqueeze(x, 0)``); else None."""
    if node.op == "call_method":
        return str(node.target) if node.target in VIEWS else None
    name = getattr(node.target, "__name__", None) if node.op == "call_function" else None
    return name if name in VIEWS and getattr(torch, name, None) is node.target else None


def attribute_view(node: torch.fx.Node, there: dict[str, torch.fx.Node], named: dict[str, str],
                   is_attribute: Any) -> str | None:
    """``node``, a view of a parameter or buffer indexed or shaped by sizes (``self.position_ids[:, :t]``,
    BERT's positions), as the statement of ``forward`` that takes it: no copy and no kernel, taken again
    on every call (a checkpoint may change the buffer). ``is_attribute``: is this path a tensor of the
    model? None where ``node`` is no such view."""
    counterpart = there.get(node.name)
    if counterpart is None or counterpart.target != node.target or not counterpart.args:
        return None
    source = counterpart.args[0]
    if not isinstance(source, torch.fx.Node) or source.op != "get_attr" or not is_attribute(str(source.target)):
        return None
    writer = _Writer(named, compute=False)
    try:
        if counterpart.op == "call_function" and counterpart.target is operator.getitem and len(counterpart.args) == 2:
            text = f"self.{source.target}[{writer.arg(counterpart.args[1])}]"
        elif (method := _view_name(counterpart)) is not None:
            words = [writer.arg(a) for a in counterpart.args[1:]] + [f"{k}={writer.arg(v)}"
                                                                    for k, v in counterpart.kwargs.items()]
            text = f"self.{source.target}.{method}({', '.join(words)})"
        else:
            return None
    except CannotCover:
        return None
    return f"{bound_name(node)} = {text}"


class Glue:
    """What the generated ``forward`` does itself where no kernel starts at a call of the split: make a
    tensor from sizes (:func:`statement`), take a view of a parameter or buffer (:func:`attribute_view`),
    or pass over a value another statement writes inline. ``seen``: every node's value on the small
    inputs; ``context``: the plan's (the task's policy, the model and its trace at the size being
    optimised); ``whole``: why the whole graph was not covered, for the messages."""

    def __init__(self, gm: torch.fx.GraphModule, seen: dict[str, Any], context: Any, whole: Exception) -> None:
        self.made, self.seen, self.context, self.whole = made_nodes(gm), seen, context, whole
        full = context.full_graph()
        self.there = {n.name: n for n in full.graph.nodes} if full is not None else {}
        self.here = {n.name: n for n in gm.graph.nodes}

    def spelled(self, node: torch.fx.Node, sizes: Any) -> str | None:
        """A number made from sizes, as an expression of ``forward`` (``sizes``: the names it holds)."""
        if node not in self.made or isinstance(self.seen.get(node.name), torch.Tensor):
            return None
        return number_source(node, self.there, {name: name for name in sizes})

    def take(self, node: torch.fx.Node, failure: str | None, sizes: Any) -> tuple[str, str] | None:
        """``(statement, name)`` for ``node`` (the statement empty where ``forward`` passes over it: a
        size or a value the next statement writes inline), or None where ``forward`` cannot take it.
        CannotCover (with ``failure``, why no kernel starts there) where a tensor made from sizes cannot
        be written, or the task is strict and torch would compute it."""
        named = {name: name for name in sizes}
        if node in self.made:
            if not (made_root(node, self.made, self.seen.get(node.name)) or is_factory(node)):
                return "", ""
            try:
                made = statement(node, self.there, named, self.context.allow_partial)
            except CannotCover as exc:
                raise CannotCover(f"{failure or self.whole}; made in forward, {exc}") from None
            self._note_numbers(node, made, lambda: statement(node, self.here, named, self.context.allow_partial))
            return made, bound_name(node)
        view = attribute_view(node, self.there, named, self._tensor_of_model)
        if view is not None:
            self._note_numbers(node, view, lambda: attribute_view(node, self.here, named, self._tensor_of_model))
        return (view, bound_name(node)) if view is not None else None

    def _note_numbers(self, node: torch.fx.Node, there: str, here: Any) -> None:
        """Where the statement written at the size being optimised holds other numbers than the traced
        size's (a group of 128 there, shrunk to 16 with the file's constants), the plan holds at that size
        alone: noted with the numbers adopted there, so a check at the small size plans it afresh."""
        try:
            small = here()
        except CannotCover:
            small = None
        if small != there:
            self.context.numbers_there = [*self.context.numbers_there, f"`{node.name}`: {there}"]

    def _tensor_of_model(self, path: str) -> bool:
        return not path.startswith(TRACED_CONSTANT) and isinstance(attribute_at(self.context.full, path), torch.Tensor)
