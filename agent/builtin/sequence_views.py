"""Glue between the segments of a sequence plan: views, size reads and chunks that ``forward`` takes
in torch, no kernel, so that the kernels around them read their inputs through strides.

A view of the value flowing from one segment to the next (``.unsqueeze(1)``, ``.flatten(2)``), of
an earlier segment's kept output, or of an input read otherwise too; ``view_as`` of an input; a
basic index of an input (``sparse[:, i]``); the parts of a ``chunk`` or ``split`` no kernel reads
whole; the sizes ``forward`` reads for them (``x.shape``, ``x.size(1)``). Sizes named as numbers took
them from the small trace, so a view keeps them only where they give the node's shape at the size
being optimised.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.shape_reads import INTEGER_ARITHMETIC
from kernelevo.agent.builtin.vocabulary import is_call, plain_int, reads_metadata, view_method

FLOW = "_kernelevo_flow"
"""What ``forward`` calls the value flowing from one segment to the next."""


def size_of(node: torch.fx.Node, flow: torch.fx.Node | None, sizes: Collection[str]) -> str | None:
    """``node`` as a statement reading sizes of ``flow`` or of a forward input (``x.shape``,
    ``x.size(1)``, an element of either), with ``flow`` written ``FLOW``; else None. The sizes are
    read from the tensor itself when ``forward`` runs, so a view built from them holds at every size."""
    tensor = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
    of = FLOW if tensor is not None and tensor is flow else (
        tensor.name if tensor is not None and tensor.op == "placeholder" else None)
    if of is not None and node.op == "call_function" and node.target is getattr and len(node.args) == 2 and \
            node.args[1] == "shape":
        return f"{node.name} = {of}.shape"
    if of is not None and node.op == "call_method" and node.target == "size" and not node.kwargs and \
            all(plain_int(a) for a in node.args[1:]):
        return f"{node.name} = {of}.size({', '.join(map(repr, node.args[1:]))})"
    if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2 and \
            isinstance(node.args[0], torch.fx.Node) and node.args[0].name in sizes and _plain_index(node.args[1]):
        return f"{node.name} = {node.args[0].name}[{node.args[1]!r}]"
    return None


def feeds_a_view(node: torch.fx.Node) -> bool:
    """Does this read of sizes reach a view (directly, or through items of it and arithmetic)? Such
    reads are glue in ``forward``; others (a normalized shape, a scale from a size) stay with the ops
    that use them, which fold them to numbers."""
    pending, seen = list(node.users), set()
    while pending:
        user = pending.pop()
        if user in seen:
            continue
        seen.add(user)
        if view_method(user) is not None:
            return True
        if user.op == "call_function" and (user.target is operator.getitem or user.target in INTEGER_ARITHMETIC):
            pending.extend(user.users)
    return False


def _plain_index(index: Any) -> bool:
    """An int, or a slice of ints and Nones (``shape[1:]``)."""
    if isinstance(index, slice):
        return all(part is None or plain_int(part) for part in (index.start, index.stop, index.step))
    return plain_int(index)


SHAPED_AS = {"view_as", "reshape_as"}
"""Views to another tensor's shape."""


def view_of(node: torch.fx.Node, flow: torch.fx.Node | None, full: dict[str, tuple[int, ...]],
             sizes: Collection[str] = (), spelled: Callable[[torch.fx.Node], str | None] = lambda n: None,
             name: str = FLOW, into: str | None = None) -> str | None:
    """``node`` as the statement that takes a view of ``flow`` and nothing else (``.unsqueeze(1)``),
    when ``flow`` is used by it alone (and by reads of its sizes) and its arguments are plain numbers
    or sizes read in ``forward`` (``sizes``: their names); else None. Such a view between two segments (a pooling over
    a 2-D GEMM output seen as one channel, a softmax over the spatial dimensions flattened) is torch's
    glue in ``forward``, not a kernel. A ``view`` or ``reshape`` that names sizes as numbers took them
    from the small model: it is kept only where they give the node's own shape at the size being
    optimised (``full``); sizes read in ``forward`` hold at every size, beside them only ``-1``, and so
    does arithmetic on them (``spelled``: such a number's expression, or None). ``name``: what
    ``forward`` calls ``flow`` (an earlier kernel's output kept for later is viewed the same way);
    ``into``: the name the view is kept under, where not ``name`` (``flow`` may then have other readers)."""
    if flow is None or not node.args or node.args[0] is not flow or \
            (into is None and any(user is not node and user.name not in sizes for user in flow.users)):
        return None
    method = view_method(node) or (node.target if node.op == "call_method" and node.target in SHAPED_AS else None)
    if method is None:
        return None
    if method in SHAPED_AS:  # the shape of an input: ``y.view_as(x)``
        other = node.args[1] if len(node.args) == 2 and not node.kwargs else None
        return f"{into or name} = {name}.{method}({other.name})" if isinstance(other, torch.fx.Node) and \
            other.op == "placeholder" else None

    def read(a: Any) -> bool:
        return isinstance(a, torch.fx.Node) and (a.name in sizes or spelled(a) is not None)

    def plain(a: Any) -> bool:
        return plain_int(a) or read(a) or (isinstance(a, (tuple, list)) and all(plain_int(x) or read(x) for x in a))

    rest, kwargs = list(node.args[1:]), dict(node.kwargs)
    if not all(plain(a) for a in [*rest, *kwargs.values()]):
        return None
    flat = [x for a in [*rest, *kwargs.values()] for x in (a if isinstance(a, (tuple, list)) else [a])]
    if any(read(x) for x in flat):
        if any(plain_int(x) and x != -1 for x in flat):
            rest = _inferred(node, rest, kwargs, full, read)
            if rest is None:
                return None
    elif method in ("view", "reshape") and not _same_at_full_size(flow, node, rest, kwargs, full):
        return None

    def word(a: Any) -> str:
        if isinstance(a, (tuple, list)):
            return "(" + "".join(f"{word(x)}, " for x in a) + ")"
        if isinstance(a, torch.fx.Node):
            return a.name if a.name in sizes else str(spelled(a))
        return repr(a)

    words = [word(a) for a in rest] + [f"{k}={word(v)}" for k, v in kwargs.items()]
    return f"{into or name} = {name}.{method}({', '.join(words)})"


def _inferred(node: torch.fx.Node, rest: list[Any], kwargs: dict[str, Any], full: dict[str, tuple[int, ...]],
              read: Callable[[Any], bool]) -> list[Any] | None:
    """A view's sizes beside sizes read in ``forward`` (``x.view(x.shape[0], heads, self.head_dim)``)
    where each number is the view's size there at the size being optimised too, or one alone is not
    (a constructor's size the small model holds smaller): that one written ``-1``, which torch infers
    at both sizes. None where neither holds."""
    sizes = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
    there = full.get(node.name)
    if kwargs or view_method(node) not in ("view", "reshape") or there is None or len(sizes) != len(there) or \
            any(plain_int(x) and x == -1 for x in sizes):
        return None
    differ = [i for i, x in enumerate(sizes) if not read(x) and x != there[i]]
    if len(differ) > 1:
        return None
    return [-1 if i in differ else x for i, x in enumerate(sizes)]


def kept_view(node: torch.fx.Node, earlier: dict[torch.fx.Node, str], full: dict[str, tuple[int, ...]],
               sizes: Collection[str], spelled: Callable[[torch.fx.Node], str | None]) -> str | None:
    """A view of an earlier kernel's output (not the one flowing) as the statement that takes it, the
    view then kept under the same name (``earlier`` gains ``node``); None where ``node`` is no such view."""
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node) or source not in earlier:
        return None
    view = view_of(node, source, full, sizes, spelled, name=earlier[source])
    if view is not None:
        earlier[node] = earlier[source]
    return view


def input_view(node: torch.fx.Node, earlier: dict[torch.fx.Node, str], full: dict[str, tuple[int, ...]],
                sizes: Collection[str], spelled: Callable[[torch.fx.Node], str | None]) -> str | None:
    """``node`` a view of an input that is read otherwise too (``x.flatten(1)`` before the first kernel,
    ``view_as(x)`` after the last) as the statement that takes it under a name of its own (``earlier``
    gains ``node``: later kernels read the view by that name); None where it is no such view."""
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node) or source.op != "placeholder" or \
            all(user is node or reads_metadata(user) for user in source.users):
        return None  # an input read through this view alone is planned as the view (``leading_views``)
    into = f"_kernelevo_view_{node.name}"
    index = _index_text(node.args[1]) if node.op == "call_function" and node.target is operator.getitem else None
    view = f"{into} = {source.name}[{index}]" if index is not None else \
        view_of(node, source, full, sizes, spelled, name=source.name, into=into)
    if view is not None:
        earlier[node] = into
    return view


def _index_text(index: Any) -> str | None:
    """A basic index (ints, slices of ints, None, ``...``) as Python source; None for any other."""
    def part(p: Any) -> str | None:
        if p is None or p is Ellipsis:
            return repr(p)
        if plain_int(p):
            return repr(p)
        if isinstance(p, slice) and all(b is None or plain_int(b) for b in (p.start, p.stop, p.step)):
            return ":".join("" if b is None else repr(b) for b in (p.start, p.stop)) + (
                f":{p.step!r}" if p.step is not None else "")
        return None

    parts = [part(p) for p in (index if isinstance(index, tuple) else (index,))]
    return None if None in parts else ", ".join(parts)  # type: ignore[arg-type]


def chunk_parts(node: torch.fx.Node, earlier: dict[torch.fx.Node, str],
                 spelled: Callable[[torch.fx.Node], str | None]) -> list[str] | None:
    """``node`` a ``chunk`` or ``split`` of an earlier kernel's output (``gamma, beta =
    self.style(w).chunk(2, 1)``, ``q, k, v = self.c_attn(x).split(self.n_embd, dim=2)``) whose every
    use takes one part by a plain index, as the statements that take each part under a name of its own
    (``earlier`` gains the parts); None where it is no such call. A part is a view: the kernels after
    it read it through its strides, as they read any other view. A size read in ``forward`` is
    spelled as ``forward`` reads it (``spelled``)."""
    source = node.args[0] if node.args else None
    method = "split" if is_call(node, (torch.split,), ("split",)) else "chunk"
    if not is_call(node, (torch.chunk, torch.split), ("chunk", "split")) or not isinstance(source, torch.fx.Node) \
            or source not in earlier or not node.users:
        return None
    def text(a: Any) -> str | None:
        if isinstance(a, (list, tuple)):  # split's sizes
            items = [text(x) for x in a]
            return None if None in items else f"[{', '.join(items)}]"  # type: ignore[arg-type]
        return repr(a) if plain_int(a) else spelled(a) if isinstance(a, torch.fx.Node) else None

    parts = list(node.users)
    texts = [text(a) for a in node.args[1:]] + [f"{k}={text(v)}" for k, v in node.kwargs.items()]
    if any(t is None or t.endswith("=None") for t in texts) or not all(
            part.op == "call_function" and part.target is operator.getitem and plain_int(part.args[1])
            and part.args[1] >= 0 for part in parts):
        return None
    how = ", ".join(texts)  # type: ignore[arg-type]
    statements = []
    for part in parts:
        earlier[part] = f"{earlier[source]}_part{part.args[1]}"
        statements.append(f"{earlier[part]} = {earlier[source]}.{method}({how})[{part.args[1]}]")
    return statements


def _same_at_full_size(flow: torch.fx.Node, node: torch.fx.Node, args: list[Any], kwargs: dict[str, Any],
                       full: dict[str, tuple[int, ...]]) -> bool:
    if flow.name not in full or node.name not in full:
        return False
    sizes = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else kwargs.get("shape", args)
    try:
        return tuple(torch.empty(full[flow.name], device="meta").reshape(*sizes).shape) == full[node.name]
    except (RuntimeError, TypeError):
        return False
