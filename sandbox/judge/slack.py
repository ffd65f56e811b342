"""How far an honest kernel's output may be from eager's on one input set, beyond the task's tolerance:
the rounding scale of the answer there, measured in the oracle on the reference itself."""

from __future__ import annotations

from typing import Any

import torch

from kernelevo.sandbox.child.timed import flat_outputs
from kernelevo.sandbox.judge import compare
from kernelevo.sandbox.judge.exact import ExactReference


def sensitivity(model: torch.nn.Module, args: list[Any], want: list[Any], seed: int, device: str) -> list[float]:
    """How far each output moves when every floating input moves by one unit in its last place (up or
    down at random): the rounding scale of the answer on these inputs."""
    generator = torch.Generator(device=device).manual_seed(seed ^ 0x5EED)
    moved = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            # in place, in the input's own dtype: one tensor of the input's size at any moment (an
            # int64 draw and its temporaries took four times the input at a 6 GB input)
            nudged = torch.randint(0, 2, a.shape, generator=generator, device=a.device, dtype=a.dtype)
            a = nudged.mul_(2).sub_(1).mul_(torch.finfo(a.dtype).eps).mul_(a).add_(a)
        moved.append(a)
    try:
        with torch.no_grad():
            out = flat_outputs(model(*moved))
    except Exception:  # the reference refuses the moved inputs: no sensitivity, eager's error stands
        return [0.0] * len(want)
    return [compare.largest_difference(o, w) if isinstance(w, torch.Tensor) and isinstance(o, torch.Tensor) else 0.0
            for o, w in zip(out, want)]


def past_eager_overflow(model: torch.nn.Module, args: list[Any], want: list[Any], exact: list[Any] | None,
                        sensitivities: list[float], working: int | None, dtype: str | None) -> list[float]:
    """Where eager overflowed in half precision and float64 has a number (products past 65504 whose
    difference is small), neither eager's error nor its sensitivity says how close an honest kernel can
    come: the model run in float32, as a kernel accumulating in float32 computes, shows it, and its
    distance from float64 widens that output's slack. Only then: a float32 run costs a call."""
    if exact is None or dtype not in ("float16", "bfloat16"):
        return sensitivities
    overflowed = [isinstance(w, torch.Tensor) and isinstance(x, torch.Tensor)
                  and compare.overflowed_where_exact_is_not(w, x) for w, x in zip(want, exact)]
    if not any(overflowed):
        return sensitivities
    try:
        wider = ExactReference(torch.float32).compute(model, args, len(want), working).outputs
    except Exception:  # no float32 run: the slack stays as eager's figures set it
        wider = None
    if wider is None:
        return sensitivities
    return [max(s, compare.largest_difference(o, x)) if over else s
            for s, over, o, x in zip(sensitivities, overflowed, wider, exact)]
