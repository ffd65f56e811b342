"""Shape facts the row lowering asks of the traced graph: which inputs are one value per row, and
which reductions take one value at a time. Pure functions of fx metadata."""

from __future__ import annotations

import operator
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
    from kernelevo.agent.builtin.vocabulary import reads_metadata  # it imports this module's neighbours

    uses = [u for u in node.users if not reads_metadata(u)]  # ``device=t.device`` reads no values
    if not rows or tuple(value.shape) != rows or not uses:
        return False
    for user in uses:
        tm = user.meta.get("tensor_meta")
        if not adds_a_last_dim(user) or tm is None or tuple(tm.shape) != (*rows, 1):
            return False
    return True


def adds_a_last_dim(node: torch.fx.Node) -> bool:
    """Is ``node`` a view adding a dimension of 1 after the last: ``x.unsqueeze(-1)`` (or of ``dim``,
    ``torch.unsqueeze``) or ``x[:, None]``, ``x[..., None]``, or a view or reshape to one more dimension
    (``label.view(-1, 1)``)? The caller checks the resulting shape against the input's."""
    if (node.op == "call_method" and node.target in ("unsqueeze", "view", "reshape")) or (
            node.op == "call_function" and node.target in (torch.unsqueeze, torch.reshape)):
        return True
    if node.op != "call_function" or node.target is not operator.getitem or len(node.args) != 2:
        return False
    index = node.args[1]
    return isinstance(index, tuple) and len(index) >= 2 and index[-1] is None and all(
        i is Ellipsis or (isinstance(i, slice) and i == slice(None)) for i in index[:-1])
