"""Views of a forward input that change only its strides and where it starts: ``x.transpose(1, 2)``,
``x.permute(...)``, ``x.unsqueeze(1)``, ``x[:, None]``, ``x.T``, ``x[:, 1:]``. A kernel reads such a view
through its strides (from its own first element) as well as it reads the input itself, so an input used
only through them becomes one operand per view, whose source in ``ModelNew.forward`` is the view's own
expression (no copy is made). Views whose arguments are sizes (``view``, ``reshape``) are not among
them: their numbers would hold for the traced shapes only."""

from __future__ import annotations

import builtins
import operator
from typing import Any

import torch
import torch.fx

STRIDE_METHODS = {"transpose", "permute", "unsqueeze", "t", "swapaxes", "movedim"}
STRIDE_ATTRIBUTES = {"T", "mT"}


def _plain(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or (
        isinstance(value, (tuple, list)) and all(_plain(v) for v in value))


def _index_text(index: Any) -> str | None:
    """``index`` as Python text where it only adds dimensions, keeps whole ones (None, ``:``, ``...``) or
    keeps a run of neighbouring positions given by numbers."""
    parts = index if isinstance(index, tuple) else (index,)
    words = []
    for part in parts:
        if part is None:
            words.append("None")
        elif part is Ellipsis:
            words.append("...")
        elif isinstance(part, slice) and part.step in (None, 1) and all(
                bound is None or (isinstance(bound, int) and not isinstance(bound, bool))
                for bound in (part.start, part.stop)):
            # a run of positions counted from either end, whatever the size (``1:``, ``:-1``)
            words.append(":".join("" if bound is None else str(bound) for bound in (part.start, part.stop)))
        else:
            return None
    return ", ".join(words)


def view_text(node: torch.fx.Node, source: str) -> str | None:
    """The expression of ``node`` applied to ``source`` if ``node`` is a view that changes only strides
    (see the module), else None."""
    if node.op == "call_method" and node.target in STRIDE_METHODS and not node.kwargs:
        if all(_plain(a) for a in node.args[1:]):
            return f"{source}.{node.target}({', '.join(repr(a) for a in node.args[1:])})"
        return None
    if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2:
        text = _index_text(node.args[1])
        return f"{source}[{text}]" if text is not None else None
    if node.op == "call_function" and node.target is builtins.getattr and node.args[1] in STRIDE_ATTRIBUTES:
        return f"{source}.{node.args[1]}"
    if node.op == "call_function" and node.target in (torch.transpose, torch.permute, torch.unsqueeze) \
            and not node.kwargs and all(_plain(a) for a in node.args[1:]):
        return f"{source}.{node.target.__name__}({', '.join(repr(a) for a in node.args[1:])})"
    return None


def only_viewed(node: torch.fx.Node) -> bool:
    """Is ``node`` used, and only through views that change strides?"""
    return bool(node.users) and all(view_text(user, node.name) is not None for user in node.users)

