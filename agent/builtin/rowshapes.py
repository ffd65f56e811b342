"""Shape facts the row lowering asks of the traced graph: which inputs are one value per row, and
which reductions take one value at a time. Pure functions of fx metadata."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

ONE_VALUE_REDUCTIONS = {"sum", "mean", "amax", "amin", "logsumexp", "norm"}
"""Reductions that give back the one value they reduce (a norm its magnitude)."""


def over_one_value(meta: tuple[tuple[int, ...], Any] | None, dim: Any) -> bool:
    """Does a reduction over ``dim`` of a value of shape ``meta[0]`` take one value at a time: is
    ``dim`` its last dimension, of size 1?"""
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    if meta is None or dim is None or len(dims) != 1 or not isinstance(dims[0], int):
        return False
    shape = meta[0]
    return bool(shape) and dims[0] in (-1, len(shape) - 1) and shape[-1] == 1


def unsqueezed_per_row(node: torch.fx.Node, value: torch.Tensor, rows: tuple[int, ...]) -> bool:
    """Is input ``node`` one value per row, used only through ``unsqueeze`` as a ``[..., 1]`` column
    (``d.unsqueeze(1) * B``: a diagonal matrix times B)? Then it is read per row, and so are its
    unsqueezed views. ``rows``: the first input's shape without its last dimension."""
    if not rows or tuple(value.shape) != rows or not node.users:
        return False
    for user in node.users:
        tm = user.meta.get("tensor_meta")
        if user.op != "call_method" or user.target != "unsqueeze" or tm is None:
            return False
        if tuple(tm.shape) != (*rows, 1):
            return False
    return True
