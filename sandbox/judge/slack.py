"""How far an honest kernel's output may be from eager's on one input set, beyond the task's tolerance:
the rounding scale of the answer there, measured in the oracle on the reference itself."""

from __future__ import annotations

from typing import Any

import torch

from kernelevo.sandbox.child.timed import flat_outputs
from kernelevo.sandbox.judge import compare
from kernelevo.sandbox.judge.exact import ExactReference
from kernelevo.sandbox.judge.level_groups import LevelGroups


def nudged(args: list[Any], seed: int, device: str) -> list[Any]:
    """``args`` with every floating input moved by one unit in its last place, up or down at random
    (drawn from ``seed``); the rest as they are."""
    generator = torch.Generator(device=device).manual_seed(seed ^ 0x5EED)
    moved = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            # in place, in the input's own dtype: one tensor of the input's size at any moment (an
            # int64 draw and its temporaries took four times the input at a 6 GB input)
            nudge = torch.randint(0, 2, a.shape, generator=generator, device=a.device, dtype=a.dtype)
            a = nudge.mul_(2).sub_(1).mul_(torch.finfo(a.dtype).eps).mul_(a).add_(a)
        moved.append(a)
    return moved


FAR_NUDGES = 2
"""Nudged runs on sets far from the task's own (x100, shifted). Rows shifted far up hold values of one
size, so one unit in the last place up or down at random on each cancels in a dot product about one
time in five (eight ups and eight downs of 16), and the run then says the answer does not move where
rounding moves it most (attention scores of 1e6 a few apart): the larger of two runs cancels about
one time in 25."""


def sensitivity(model: torch.nn.Module, args: list[Any], want: list[Any], seed: int, device: str,
                groups: list[LevelGroups | None] | None = None, draws: int = 1) -> list[float | compare.Scale]:
    """How far each output moves when every floating input moves by one unit in its last place (up or
    down at random; the largest of ``draws`` runs): the rounding scale of the answer on these inputs;
    for an output whose values are in ``groups`` (the shifted set), a ``Scale`` with the same in each
    group as well."""
    moved = [0.0] * len(want)
    by_group = [torch.zeros(g.count, dtype=torch.float64) if g is not None else None
                for g in (groups or [None] * len(want))]
    for draw in range(draws):
        try:
            with torch.no_grad():
                out = flat_outputs(model(*nudged(args, seed + 7919 * draw, device)))
        except Exception:  # the reference refuses the moved inputs: no sensitivity, eager's error stands
            break
        for k, w in enumerate(want):
            o = out[k] if k < len(out) and isinstance(out[k], torch.Tensor) else None
            if not isinstance(w, torch.Tensor) or o is None:
                continue
            moved[k] = max(moved[k], compare.largest_difference(o, w))
            if groups is not None and by_group[k] is not None:
                by_group[k] = torch.maximum(by_group[k].to(o.device), compare.largest_by_group(o, w, groups[k]))
        del out
    return [compare.Scale(m, groups=groups[k], moved_by_group=g) if g is not None and groups is not None
            and groups[k] is not None else m for k, (m, g) in enumerate(zip(moved, by_group))]


def past_eager_overflow(model: torch.nn.Module, args: list[Any], want: list[Any], exact: list[Any] | None,
                        sensitivities: list[float | compare.Scale], working: int | None, dtype: str | None,
                        *, seed: int = 0, device: str = "cpu", float64: ExactReference | None = None, scale: float = 2.0
                        ) -> list[float | compare.Scale]:
    """Where eager overflowed and float64 has a number (an exp past float32's range that a kernel
    subtracting the row's max never takes; fp16 products past 65504 whose difference is small), the
    output is compared with float64's answer there, and neither eager's error nor its sensitivity,
    both measured only where eager has a number, says how close an honest kernel can come. A second
    run says it (``compare.Scale.past_overflow``, the slack of those values alone):

    - half precision: the model run in float32, as a kernel accumulating in float32 computes;
    - float32 and float64: the float64 model (``float64``, the oracle's own copy) on the inputs moved by
      one unit in their last place, the rounding scale of the answer where eager has none (scores of
      large magnitude whose rounding moves the probabilities of the row's leading few).

    Its distance from float64 is measured only where a value is compared with float64's answer (eager
    not a number there, float64's rounded to the output's dtype one): elsewhere float64's own values can
    lie far past the dtype's range (exp(512), about 1e222), and their distance says nothing of how close
    a finite value must be. Only then: the run costs a call. ``scale``: a float64 value's size against
    the task's (the run's room on the GPU)."""
    if exact is None:
        return list(sensitivities)
    overflowed = [isinstance(w, torch.Tensor) and isinstance(x, torch.Tensor)
                  and compare.overflowed_where_exact_is_not(w, x) for w, x in zip(want, exact)]
    if not any(overflowed):
        return list(sensitivities)
    try:
        if dtype in ("float16", "bfloat16"):
            wider = ExactReference(torch.float32).compute(model, args, len(want), working).outputs
        else:
            wider = (float64 or ExactReference()).compute(model, nudged(args, seed, device), len(want), working,
                                                          scale).outputs
    except Exception:  # no second run: the slack stays as eager's figures set it
        wider = None
    if wider is None:
        return list(sensitivities)
    return [_with_past(s, compare.largest_difference(o, x, past_overflow_of=w)) if over else s
            for s, over, w, o, x in zip(sensitivities, overflowed, want, wider, exact)]


def _with_past(scale: float | compare.Scale, past: float) -> compare.Scale:
    """``scale`` with the slack measured past eager's overflow, its groups kept."""
    if isinstance(scale, compare.Scale):
        return scale._replace(past_overflow=past)
    return compare.Scale(float(scale), past)
