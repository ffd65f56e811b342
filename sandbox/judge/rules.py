"""Rules the judge applies to what the oracle and the session measured (pure logic).

The precision rule: a float32 (or float64) task must be computed at that precision. Over every
checked output that has a float64 reference, the candidate's summed absolute error against float64
may be at most ``PRECISION_FACTOR`` times eager's own, plus a floor of ``PRECISION_FLOOR`` relative
to the outputs' magnitude (for outputs eager computes exactly). Honest kernels that sum in another
order, or use a faster exp, stay within a few times eager's error; fp16 or bf16 arithmetic, or TF32
products, are hundreds to thousands of times off, on every input set, so the rule does not depend
on which inputs happened to be drawn.
"""

from __future__ import annotations

from kernelevo.sandbox.judge.record import PrecisionSums

PRECISION_FACTOR = 64.0
AS_EXACT_AS_EAGER = 4.0
"""A kernel whose error against float64 is within this many times eager's sums as exactly as eager does
(another order of the same fp32 sums). The precision rule allows more; a network that amplifies
rounding may need its regions' kernels this exact."""
PRECISION_FLOOR = {"float32": 2.0**-21, "float64": 2.0**-50}
"""Relative error always allowed: about four units in the last place of each dtype."""


def precision_problem(sums: PrecisionSums, dtype: str) -> str | None:
    """Why the candidate's outputs are less precise than the task's dtype allows (None if they are not)."""
    floor = PRECISION_FLOOR.get(dtype)
    if floor is None or sums.outputs == 0 or sums.magnitude <= 0:
        return None
    allowed = PRECISION_FACTOR * sums.err_eager + floor * sums.magnitude
    if sums.err_candidate <= allowed:
        return None
    mine, eager = sums.err_candidate / sums.magnitude, sums.err_eager / sums.magnitude
    return (f"the outputs are {mine:.3g} from float64 on average (relative), eager's are {eager:.3g}: more than "
            f"{PRECISION_FACTOR:g}x eager's error plus {floor:.2g}, over {sums.outputs} checked outputs. The work is "
            f"done in a lower precision than the task's {dtype} (fp16/bf16 arithmetic, or TF32 products)")


def precision_ratio(sums: PrecisionSums, dtype: str) -> float | None:
    """The candidate's summed error against float64 over eager's, eager's taken as at least the floor
    the precision rule always allows (a ReLU or a max is exact in eager, and in an exact kernel);
    None without a float64 reference (half-precision outputs have none)."""
    floor = PRECISION_FLOOR.get(dtype)
    if floor is None or sums.outputs == 0 or sums.magnitude <= 0:
        return None
    return sums.err_candidate / max(sums.err_eager, floor * sums.magnitude)


def precision_detail(sums: PrecisionSums) -> str:
    if sums.outputs == 0 or sums.magnitude <= 0:
        return "no float64 reference for these outputs"
    ratio = sums.err_candidate / sums.err_eager if sums.err_eager > 0 else float("inf")
    return (f"error against float64 {sums.err_candidate / sums.magnitude:.3g} (relative), eager's "
            f"{sums.err_eager / sums.magnitude:.3g}" + (f", {ratio:.2g}x eager's" if ratio != float("inf") else ""))
