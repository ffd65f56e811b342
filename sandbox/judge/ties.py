"""Eager's outputs again with its order among ties made stable, in the oracle.

``torch.topk`` and an unstable ``torch.sort``/``argsort`` return tied values in an order torch does not
specify: eager's is one valid answer, and a kernel that returns tied values lowest index first (the
usual convention of a hand-written top-k) is as right. Integer outputs must otherwise match eager's
exactly, so where the reference runs such an op the oracle runs it once more with each of them made
stable, and an integer output that matches that run instead of eager's passes. An argmax's first
index among ties is specified by torch and is not relaxed.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelevo.sandbox.child.timed import flat_outputs


def _topk(tensor: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
    values, indices = torch.sort(tensor, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((values.narrow(dim, 0, k), indices.narrow(dim, 0, k)))


class StableTies(TorchFunctionMode):
    """While on, ``topk``, ``sort`` and ``argsort`` keep tied values in index order (lowest first);
    ``replaced``: whether any of them ran."""

    def __init__(self) -> None:
        super().__init__()
        self.replaced = False

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's signature
        kwargs = kwargs or {}
        if func in (torch.topk, torch.Tensor.topk):
            self.replaced = True
            return _topk(*args, **kwargs)
        if func in (torch.sort, torch.Tensor.sort, torch.argsort, torch.Tensor.argsort):
            self.replaced = True
            return func(*args, **{**kwargs, "stable": True})
        return func(*args, **kwargs)


def stable_tie_outputs(model: torch.nn.Module, args: list[Any], want: list[Any]) -> tuple[list[Any] | None, bool]:
    """The reference's outputs on ``args`` with its order among ties stable, where it has integer
    outputs and runs an op whose order among ties is not specified and they differ from ``want``
    (else None); and whether it runs such an op (``False``: no need to ask again)."""
    if not any(isinstance(w, torch.Tensor) and not w.is_floating_point() for w in want):
        return None, False
    mode = StableTies()
    with torch.no_grad(), mode:
        other = flat_outputs(model(*args))
    differs = any(isinstance(w, torch.Tensor) and not (isinstance(o, torch.Tensor) and torch.equal(o, w))
                  for o, w in zip(other, want))
    return (other if differs and len(other) == len(want) else None), mode.replaced


def order_matched(got: torch.Tensor, want: Any, other: Any, at: Any = None) -> Any:
    """The expected output ``got`` is held to: eager's ``want``, or ``other`` (its stable-order run)
    where ``want`` is an integer output and ``got`` equals ``other`` (at ``at``'s places of it, for a
    sample); eager's order among tied values is not specified, so index order is as right."""
    if not isinstance(want, torch.Tensor) or want.is_floating_point() or not isinstance(other, torch.Tensor):
        return want
    return other if torch.equal(got, at(other) if at is not None else other) else want
