"""Constants as a trained network has them, drawn alike in the reference's process and the candidate's.

A constructor leaves a norm's weight at ones, its bias and running mean at zeros, its running variance
at ones, a gate at zeros. In a trained network they vary, and a kernel that ignored them would be
right on every input and wrong after ``load_state_dict``. So both processes draw them: while the model
is built, the norms' resets and ``torch.nn.init.ones_``/``zeros_`` fill with drawn values (a ModelNew
that folds a BatchNorm into a convolution's weights in ``__init__`` folds the drawn ones); after it,
every floating parameter still holding one value throughout is redrawn (``nn.Parameter(torch.ones(d))``
in a hand-written RMSNorm). Values are drawn uniformly within half the value either way (zero: within
0.5), so signs and scales are kept (a variance stays positive), from a generator of the draws' own,
seeded by the init seed: the global random state, which the weights' own draws use, is untouched, and a
ModelNew that builds its modules as Model does (as its random weights already require) gets the same
values in the same order. Other buffers (masks, position ids, tables) are the task's meaning and stay
as built; so does a tensor of one value (a scalar meant as it is).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.nn.modules.batchnorm import _NormBase

CONSTANTS_SEED = 0xC0457
"""Mixed into the init seed for the draws' generator."""


class Draws:
    """The draws of one build (``init_seed``: the session's, shared by both processes)."""

    def __init__(self, init_seed: int) -> None:
        self.generator = torch.Generator().manual_seed((init_seed ^ CONSTANTS_SEED) % 2**63)

    def fill(self, tensor: torch.Tensor, value: float) -> None:
        """``tensor`` (meant to hold ``value`` throughout) drawn about ``value`` instead."""
        low, high = (-0.5, 0.5) if value == 0 else sorted((value * 0.5, value * 1.5))
        drawn = torch.empty(tensor.shape, dtype=torch.float32).uniform_(low, high, generator=self.generator)
        with torch.no_grad():
            tensor.copy_(drawn)

    @contextlib.contextmanager
    def during_construction(self) -> Iterator[None]:
        """Norms built inside draw their constants (``init.ones_``/``zeros_`` and running statistics)."""
        init, reset = torch.nn.init, _NormBase.reset_running_stats
        ones, zeros = init.ones_, init.zeros_

        def drawn(original: Any, value: float) -> Any:
            def fill(tensor: torch.Tensor) -> torch.Tensor:
                original(tensor)
                if _drawable(tensor):
                    self.fill(tensor, value)
                return tensor
            return fill

        def reset_running_stats(norm: _NormBase) -> None:
            reset(norm)
            for name, value in (("running_mean", 0.0), ("running_var", 1.0)):
                if _drawable(getattr(norm, name, None)):
                    self.fill(getattr(norm, name), value)

        init.ones_, init.zeros_ = drawn(ones, 1.0), drawn(zeros, 0.0)
        _NormBase.reset_running_stats = reset_running_stats  # type: ignore[method-assign]
        try:
            yield
        finally:
            init.ones_, init.zeros_ = ones, zeros
            _NormBase.reset_running_stats = reset  # type: ignore[method-assign]

    def vary_constants(self, model: torch.nn.Module) -> None:
        """Redraw each floating parameter, and each norm's running statistic, still holding one value."""
        seen: set[int] = set()
        for module in model.modules():
            tensors = [t for _, t in module.named_parameters(recurse=False)]
            if isinstance(module, _NormBase):
                tensors += [t for n, t in module.named_buffers(recurse=False) if n.startswith("running_")]
            for tensor in tensors:
                if id(tensor) in seen or not _drawable(tensor):
                    continue
                seen.add(id(tensor))
                flat = tensor.detach().reshape(-1)
                if bool(torch.isfinite(flat[0])) and bool((flat == flat[0]).all()):
                    self.fill(tensor, float(flat[0]))


def _drawable(tensor: Any) -> bool:
    return isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.numel() >= 2
