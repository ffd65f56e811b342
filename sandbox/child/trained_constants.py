"""Constants as a trained network has them, drawn alike in the reference's process and the candidate's.

A constructor leaves a norm's weight at ones, its bias and running mean at zeros, its running variance
at ones, a learned scale at one, a gate at zeros. In a trained network they vary, and a kernel that
ignored them would be right on every input and wrong after ``load_state_dict``. So once the model is
built, both processes load into it, through its own ``load_state_dict`` as a user loading a checkpoint
does, a value drawn for each parameter still holding one value throughout (of any size) and for each
running mean and variance (by their names, whatever module holds them). A kernel that folded them in
``__init__`` must fold again when they are loaded (a ``load_state_dict`` post-hook); one that cannot is
wrong after a user's load, and is rejected here.

Each tensor's values are drawn uniformly within half its value either way (zero: within 0.5), so signs
and scales are kept (a variance stays positive), from a generator seeded by the init seed and the
tensor's name in the state dict: a ModelNew whose state dict names its tensors as Model's does (as
loading a checkpoint requires) gets the same values, in whatever order it made them, and the global
random state the weights' own draws use is untouched. Other buffers (masks, position ids, tables) are
the task's meaning and stay as built.
"""

from __future__ import annotations

import hashlib

import torch

STATISTICS = ("running_mean", "running_var")
"""Buffers drawn by name: a norm's statistics, in torch's norms and in hand-written ones."""


def drawn(init_seed: int, name: str, like: torch.Tensor, value: float) -> torch.Tensor:
    """The draw for state-dict entry ``name`` (a tensor like ``like``, built holding ``value``)."""
    digest = hashlib.sha256(f"{init_seed}:{name}".encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") % 2**63)
    low, high = (-0.5, 0.5) if value == 0 else sorted((value * 0.5, value * 1.5))
    return torch.empty(like.shape, dtype=torch.float32).uniform_(low, high, generator=generator)


def constants(model: torch.nn.Module) -> dict[str, float]:
    """The state-dict entries to draw, with the one value each holds as built."""
    parameters = {id(p) for p in model.parameters()}
    found = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tensor.numel() == 0:
            continue
        if id(tensor) not in parameters and name.rsplit(".", 1)[-1] not in STATISTICS:
            continue
        flat = tensor.detach().reshape(-1)
        if bool(torch.isfinite(flat[0])) and bool((flat == flat[0]).all()):
            found[name] = float(flat[0])
    return found


def load_drawn(model: torch.nn.Module, init_seed: int) -> None:
    """Load a drawn value into each of ``model``'s constants, through its ``load_state_dict``."""
    state = model.state_dict()
    values = {name: drawn(init_seed, name, state[name], value).to(state[name].dtype)
              for name, value in constants(model).items()}
    if values:
        model.load_state_dict(values, strict=False)
