"""How much work one call of a reference does: FLOPs and the minimum bytes it must move."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode


def _tensors(values: object) -> list[torch.Tensor]:
    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, (list, tuple)):
        return [t for v in values for t in _tensors(v)]
    return []


def tensor_bytes(values: object) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(values))


def count_flops(model: torch.nn.Module, inputs: Sequence[object]) -> int:
    """FLOPs of matmuls, convolutions and attention in one forward (torch.utils.flop_counter); 0 where
    torch's counter fails on a call it has a formula for (its attention formula asserts that k has q's
    heads, which grouped-query attention does not): the speed-of-light floor then counts bytes alone,
    lower than the truth, never a reason to refuse a reference that runs."""
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*inputs)
    except AssertionError:
        return 0
    return int(counter.get_total_flops())


def count_bytes(model: torch.nn.Module, inputs: Sequence[object], outputs: object) -> int:
    """Each input, parameter and buffer read once, each output written once."""
    state = list(model.parameters()) + list(model.buffers())
    return tensor_bytes(list(inputs)) + tensor_bytes(state) + tensor_bytes(outputs)
