"""Input sets from a seed: the task's own ``get_inputs()`` under that seed, then a value variant.

The oracle and the candidate's process run this same code on the same seed and get the same
values, so the inputs never have to travel: the trusted side keeps the seeds secret and reveals
one only for the call that uses it. A candidate that tampers with its copy of this code computes
on other inputs than the oracle, and its answers stop matching.
"""

from __future__ import annotations

import math
import random
import sys
from typing import Any

import torch

from kernelevo.sandbox.child import trained_constants

SHIFT_LEVELS = (0.0, 4.0, 64.0, 512.0, 4096.0)
"""The shifted set's offsets, in standard deviations of the input, one per row (the input's last dim),
the rows cycling through them from a random start (those the input's dtype holds, ``levels_for``):
statistics taken in one pass (``E[x^2] - E[x]^2``) cancel to errors that grow with the square of the
offset in float32 (percent-level at 512, past the value itself at 4096), as on real activations with an
offset, while a two-pass or Welford kernel's error and the answer's own rounding scale grow with the
offset alone: the top level keeps the two far apart whatever order a GPU sums in. Rows of other offsets
side by side defeat one pivot taken for the whole tensor. An input of one row moves by 64."""

VARIANTS = (
    ("as generated", 1.0, False, False),
    ("as generated, another seed", 1.0, False, False),
    ("small values (x0.01)", 0.01, False, False),
    ("large values (x100)", 100.0, False, False),
    ("ties (17 levels of its scale, a tenth of magnitudes clamped)", 1.0, True, False),
    ("shifted (rows plus 0 to 4096 standard deviations)", 1.0, False, True),
)
"""(label, scale, ties, shifted): checked calls cycle through them; timed calls use the first. Every
variant but the shifted one keeps the inputs' mean at zero where the task's generator does."""

CALL_MODES = (("off", False), ("on", False), ("off", True), ("on", True))
"""(gradients, fresh input tensors) of checked calls, by the set's index. Users call a model with
gradients off (inference) and on (training), on tensors made anew each call or on the same tensors
refilled (a static buffer, a CUDA graph's inputs); a candidate that behaves otherwise in any of these
is wrong for some users, so its output is checked in each (with gradients on, inputs made anew need
gradients themselves, as a training step's activations do). Timed calls run with gradients off on
the same tensors refilled (:class:`InputBuffers`)."""


def call_mode(index: int) -> tuple[str, bool]:
    return CALL_MODES[index % len(CALL_MODES)]


def far_from_generated(variant: int) -> bool:
    """Does the variant move values far from the task's own (scaled up, or shifted)? There an exp can
    overflow in float64 too, and no reference says what the answer is."""
    _, scale, _, shifted = VARIANTS[variant % len(VARIANTS)]
    return scale > 1 or shifted


def variant_label(variant: int) -> str:
    return VARIANTS[variant % len(VARIANTS)][0]


def generate(module: Any, seed: int, variant: int, device: str, dtype: str | None,
             row_levels: list[tuple[tuple[int, ...], Any]] | None = None) -> list[Any]:
    """Input set for ``seed``: floating inputs cast to the task's dtype, scaled or rounded to ties
    by the variant (integer inputs, such as class targets, keep the task's generator); on the shifted
    set, ``row_levels`` (where given) gets each shifted input's rows and the index of each row's level
    (``with_offset``). The global
    random states (torch's, CUDA's, Python's, NumPy's) are put back afterwards: a seed that changed on
    every judged call would tell a candidate it is being judged (a user's process seeds once)."""
    numpy = sys.modules.get("numpy")
    python_state = random.getstate()
    numpy_state = numpy.random.get_state() if numpy is not None else None
    devices = [torch.cuda.current_device()] if device == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            return _generate(module, seed, variant, device, dtype, numpy, row_levels)
    finally:
        random.setstate(python_state)
        if numpy is not None:
            numpy.random.set_state(numpy_state)


def _generate(module: Any, seed: int, variant: int, device: str, dtype: str | None, numpy: Any,
              row_levels: list[tuple[tuple[int, ...], Any]] | None) -> list[Any]:
    torch.manual_seed(seed)
    random.seed(seed)
    if numpy is not None:
        numpy.random.seed(seed % 2**32)
    with torch.device(device):
        raw = module.get_inputs()
    _, scale, ties, shifted = VARIANTS[variant % len(VARIANTS)]
    cast = getattr(torch, dtype) if dtype else None
    inputs = []
    for x in raw:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if x.is_floating_point():
                if cast is not None:
                    x = x.to(cast)
                if ties:
                    x = with_ties(x)
                elif shifted:
                    x = with_offset(x, row_levels)
                elif scale != 1.0:
                    x = x * scale
            x = x.contiguous()
        inputs.append(x)
    return inputs


TIE_QUANTILE = 0.9
TIE_LEVELS = 8
TIE_SAMPLE = 65536
"""Values read to estimate an input's scale (the ties' bound, the shift's spread): evenly spaced."""


def _sample(flat: Any) -> Any:
    """About ``TIE_SAMPLE`` evenly spaced values of a flat tensor."""
    return flat[::max(1, flat.numel() // TIE_SAMPLE)]



def with_ties(x: Any) -> Any:
    """``x`` on a grid of its own scale, clamped at the 90th percentile of its magnitude: a tenth of
    the values share the two extreme levels (of signed, symmetric inputs about a twentieth each), so
    a maximum, a sort or a top-k meets ties along every dimension, whatever the input's scale. Signs are kept, so inputs
    that must be positive stay non-negative."""
    flat = x.detach().reshape(-1)
    if flat.numel() == 0:
        return x
    sample = _sample(flat).abs().float()
    k = max(1, int(TIE_QUANTILE * sample.numel()))
    bound = float(sample.kthvalue(k).values)
    if not math.isfinite(bound) or bound == 0.0:
        return torch.round(x * 4) / 4
    grid = bound / TIE_LEVELS
    return (torch.round(x.clamp(-bound, bound) / grid) * grid).to(x.dtype)


def with_offset(x: Any, row_levels: list[tuple[tuple[int, ...], Any]] | None = None) -> Any:
    """``x`` with each row (along its last dim) moved by one of ``SHIFT_LEVELS`` standard deviations of
    the whole input (estimated from a sample): upwards, or downwards where no value is positive, so
    inputs that must be positive (or negative, as log-probabilities) keep their sign, and a symmetric
    input always moves the same way. Drawn from torch's generator, which the set's seed has seeded. An
    input with no spread, or with values that are not finite, is left as it is. ``row_levels``, where
    given, gets ``(x's rows, each row's level index)`` for an input of several rows moved."""
    flat = x.detach().reshape(-1)
    if flat.numel() < 2:
        return x
    sample = _sample(flat).double()
    spread = float(sample.std())
    if not math.isfinite(spread) or spread == 0.0:
        return x
    step = (-spread if bool((flat <= 0).all()) else spread)
    rows = x.shape[:-1] if x.dim() > 1 else ()
    count = math.prod(rows)
    if count <= 1:
        return (x + 64.0 * step).to(x.dtype)
    kept = levels_for(x.dtype, spread)
    start = int(torch.randint(0, len(kept), ()))
    levels = torch.tensor(kept, dtype=torch.float32, device=x.device)
    index = (torch.arange(count, device=x.device) + start) % len(kept)
    if row_levels is not None:
        row_levels.append((tuple(rows), index))
    picked = levels[index]
    return x + (picked * step).to(x.dtype).reshape(*rows, 1)  # offsets in x's dtype: no wider copy of x


def levels_for(dtype: torch.dtype, spread: float) -> tuple[float, ...]:
    """The ``SHIFT_LEVELS`` an input of ``dtype`` and ``spread`` can hold: a row moved so far that one unit
    in its last place exceeds the spread is a constant row (bfloat16 past 128 standard deviations), and
    one near the dtype's largest value overflows (float16 past 4096 at a spread of 16)."""
    info = torch.finfo(dtype)
    return tuple(level for level in SHIFT_LEVELS
                 if level * info.eps < 1.0 and level * spread < info.max / 16) or (0.0,)


class InputBuffers:
    """The same tensors for every call, refilled with each call's values: a kernel that keys a cache
    on where its inputs live, rather than on what they hold, returns stale answers and fails."""

    def __init__(self) -> None:
        self.tensors: list[Any] | None = None

    def fill(self, values: list[Any]) -> list[Any]:
        if self.tensors is None or not self._same_layout(values):
            self.tensors = list(values)
            return self.tensors
        for k, (buffer, value) in enumerate(zip(self.tensors, values)):
            if isinstance(buffer, torch.Tensor):
                buffer.copy_(value)
            else:
                self.tensors[k] = value
        return self.tensors

    def _same_layout(self, values: list[Any]) -> bool:
        assert self.tensors is not None
        if len(values) != len(self.tensors):
            return False
        for old, new in zip(self.tensors, values):
            if isinstance(old, torch.Tensor) != isinstance(new, torch.Tensor):
                return False
            if isinstance(old, torch.Tensor) and (old.shape != new.shape or old.dtype != new.dtype):
                return False
        return True


def build_model(cls: type, module: Any, device: str, dtype: str | None, init_seed: int) -> torch.nn.Module:
    """Build ``cls`` as KernelBench does: the task's init inputs under the init seed, so that
    ``Model`` and ``ModelNew`` get the same parameters; cast to the task's dtype; its constants loaded
    as a trained network has them (``trained_constants``). Then eval mode, where
    KernelBench's harness leaves training mode on: kernelevo judges the inference function (a
    BatchNorm's running statistics, no dropout)."""
    torch.manual_seed(init_seed)
    random.seed(init_seed)
    with torch.device(device):
        model = cls(*module.get_init_inputs())
    model = model.to(device)
    if dtype:
        model = model.to(getattr(torch, dtype))
    trained_constants.load_drawn(model, init_seed)
    return model.eval()

