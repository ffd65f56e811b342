"""Calls written with keywords (``F.linear(input=x, weight=w, bias=b)``, as ``torch.export`` and dynamo
write every call of a captured region, and as some people write theirs) rewritten with their leading
arguments by position.

The templates read a call's tensor as its first argument; a call that names it by keyword means the
same and must be planned the same. Only calls with no positional argument are rewritten (others are
read as written), and only a prefix of parameters that every signature of the function accepting
the call takes by position at the same place is moved, so the rewritten call binds exactly as the
original did.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch.fx
from torch.fx.operator_schemas import get_signature_for_torch_op

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def leading_arguments_by_position(graph: torch.fx.Graph) -> int:
    """Rewrite each function call of ``graph`` given all its arguments by keyword; the number of calls
    rewritten."""
    rewritten = 0
    for node in graph.nodes:
        if node.op != "call_function" or node.args or not node.kwargs:
            continue  # a call with its tensor by position is read as written
        names = _movable(node.target, node.args, node.kwargs)
        if names:
            kwargs = dict(node.kwargs)
            node.args = (*node.args, *(kwargs.pop(name) for name in names))
            node.kwargs = kwargs
            rewritten += 1
    return rewritten


def _movable(target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """The keyword arguments that may follow ``args`` by position, in order (none where a signature
    that accepts the call disagrees about where they go)."""
    signatures = [s for s in _signatures(target) if _accepts(s, args, kwargs)]
    if not signatures:
        return []
    names: list[str] = []
    for place in range(len(args), len(args) + len(kwargs)):
        at = {_positional_name(s, place) for s in signatures}
        if len(at) != 1 or (name := at.pop()) is None or name not in kwargs:
            break
        names.append(name)
    return names


def _signatures(target: Callable[..., Any]) -> list[inspect.Signature]:
    try:
        return [inspect.signature(target)]
    except (TypeError, ValueError):
        return list(get_signature_for_torch_op(target) or [])


def _accepts(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _positional_name(signature: inspect.Signature, place: int) -> str | None:
    parameters = list(signature.parameters.values())
    if place >= len(parameters) or parameters[place].kind not in _POSITIONAL:
        return None
    return parameters[place].name
