"""Parameters as a trained network has them, and as a user changes them, alike in the reference's process
and the candidate's.

A constructor leaves a norm's weight at ones, its bias and running mean at zeros, its running variance at
ones, a learned scale at one, a gate at zeros. In a trained network they vary, and a kernel that ignored
them would be right on every input and wrong after ``load_state_dict``. So once the model is built, both
processes load into it, through its own ``load_state_dict`` as a user's checkpoint arrives, a value
drawn for each trainable parameter, and each running mean and variance, still holding one value
throughout (of any size; :func:`load_drawn`). Later, for one checked set, every parameter and running statistic is
changed the same way and put back after (:func:`change`, :func:`put_back`): a kernel that folded or
packed weights in ``__init__`` or at its first call, and never again, is stale there, as it would be
after a user's new checkpoint (folding again in a ``load_state_dict`` post-hook keeps it right).

Each draw is a function of what the tensor holds, never of its name or of where the model keeps it: a
constant by its shape, its value and how many tensors of that shape and value came before it in the
state dict; a change by the tensor's contents. So a ModelNew that holds the reference's tensors under
other names gets the same values, as long as equal constants come in the same relative order; one that
holds them transformed (a weight
transposed or fused in ``__init__`` and kept as a parameter) has other contents, is changed otherwise,
and fails, as it would after a user's load. Draws are uniform within half the value either way (zero:
within 0.5) for constants and by a factor within [0.75, 1.25] for changes, so signs are kept (a
variance stays positive), from generators of their own: the global random state is untouched. Other
buffers (masks, position ids, tables) are the task's meaning and stay as built.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

STATISTICS = ("running_mean", "running_var")
"""Buffers drawn and changed by name: a norm's statistics, in torch's norms and in hand-written ones
that name them as torch does (statistics under other names are taken for the task's own buffers)."""


def _generator(*key: object) -> torch.Generator:
    digest = hashlib.sha256(":".join(map(str, key)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") % 2**63)


def _drawable(model: torch.nn.Module, state: dict[str, Any]) -> dict[str, list[str]]:
    """The tensors drawn and changed, each once (a tensor held under several names, as tied weights or a
    shorthand attribute are, is one tensor): floating parameters that train (not ``requires_grad=False``
    ones, fixed by design), and running statistics. By the first name each has in the state dict, to all
    its names (``state``: the model's state dict, with its tensors as they are)."""
    parameters = {id(p) for p in model.parameters()}
    names: dict[int, list[str]] = {}
    for name, tensor in state.items():
        if isinstance(tensor, torch.nn.parameter.UninitializedTensorMixin):
            continue  # a lazy module's, shaped at its first call
        frozen = isinstance(tensor, torch.nn.Parameter) and not tensor.requires_grad  # a fixed filter, by design
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.numel() > 0 and not frozen and \
                (id(tensor) in parameters or _statistic(name)):
            names.setdefault(id(tensor), []).append(name)
    return {found[0]: found for found in names.values()}


def _statistic(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in STATISTICS


def load_drawn(model: torch.nn.Module, init_seed: int) -> None:
    """Load a drawn value into each of ``model``'s constants (tensors holding one value), through its
    ``load_state_dict``. Parameters and statistics are counted apart: a module lists its own parameters,
    then its own buffers, then its children's, so the two kinds interleave differently in a model that
    holds the same tensors in other modules."""
    state = model.state_dict(keep_vars=True)
    seen: dict[tuple[object, ...], int] = {}
    values = {}
    for first, names in _drawable(model, state).items():
        tensor = state[first]
        flat = tensor.detach().reshape(-1)
        if not bool(torch.isfinite(flat[0])) or not bool((flat == flat[0]).all()):
            continue
        value = float(flat[0])
        kind = (_statistic(first), tuple(tensor.shape), value)
        seen[kind] = seen.get(kind, -1) + 1
        low, high = (-0.5, 0.5) if value == 0 else sorted((value * 0.5, value * 1.5))
        drawn = torch.empty(tensor.shape, dtype=torch.float32).uniform_(
            low, high, generator=_generator(init_seed, *kind, seen[kind])).to(tensor.dtype)
        values.update({name: drawn for name in names})
    if values:
        model.load_state_dict(values, strict=False)


def change(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter and running statistic of ``model`` times a factor drawn per value within [0.75,
    1.25], from its contents, loaded through ``load_state_dict`` as a user's new checkpoint would be.
    Returns what they held, for :func:`put_back` (one copy of each tensor, under all its names: with
    the changed values loaded, about twice the parameters' bytes at the peak)."""
    state = model.state_dict(keep_vars=True)
    saved, values = {}, {}
    for first, names in _drawable(model, state).items():
        held = state[first].detach()
        contents = hashlib.sha256(held.cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
        factor = torch.empty(held.shape, dtype=torch.float32).uniform_(
            0.75, 1.25, generator=_generator(seed, held.dtype, tuple(held.shape), contents))
        kept, changed = held.clone(), held * factor.to(held.device, held.dtype)
        saved.update({name: kept for name in names})
        values.update({name: changed for name in names})
    if values:
        model.load_state_dict(values, strict=False)
    return saved


def put_back(model: torch.nn.Module, saved: dict[str, torch.Tensor]) -> None:
    """Load what :func:`change` took (the same way, so hooks fold the old values back in)."""
    if saved:
        model.load_state_dict(saved, strict=False)


class Changes:
    """One process's side of the changed-parameters set: the ``parameters`` request of the worker and
    of the oracle (``seed``: the factors' seed, or None to put back what the last change took)."""

    def __init__(self) -> None:
        self.saved: dict[str, torch.Tensor] = {}

    def request(self, model: torch.nn.Module, seed: int | None) -> None:
        if seed is not None:
            self.saved = change(model, int(seed))
        else:
            put_back(model, self.saved)
            self.saved = {}
