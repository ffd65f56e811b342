"""Rules the judge applies to what the oracle and the session measured (pure logic).

The precision rule: a task must be computed at its dtype's precision. Over every checked output that
has a float64 reference, the candidate's summed absolute error against float64 may be at most
``PRECISION_FACTOR`` times eager's own, plus a floor of ``PRECISION_FLOOR`` relative to the outputs'
magnitude (for outputs eager computes exactly). Sums over every value of every checked output: the
rule does not depend on which inputs happened to be drawn, nor on one value's luck. It holds again on
each way of calling alone (gradients on or off, inputs made anew or refilled), over the sets of the
task's own values: a kernel less precise in one of them would hide in sums the far sets carry.

- float32 (and float64): honest kernels that sum in another order, or use a faster exp, stay within
  a few times eager's error; fp16 or bf16 arithmetic, or TF32 products, are hundreds to thousands of
  times off.
- bfloat16 and float16: eager's error is mostly the rounding of each output (its sums run in fp32), and
  an honest kernel rounds its outputs the same way: within about twice eager's error, or below it where
  it fuses ops eager rounds one by one. Operands rounded to fp8 before the products, or a running sum
  kept in bf16, are many times eager's (measured in docs/BENCHMARKS.md and test_compare.py).
"""

from __future__ import annotations

from kernelevo.sandbox.judge.record import PrecisionSums

CHECKED_SETS = 6
"""Input sets checked per evaluation by default: one for each value variant (``inputs.VARIANTS``)."""
CHANGED_SET = 4
"""The checked set called with every parameter changed since the calls before it, as a user's new
checkpoint would (``trained_constants.change``), and put back after it: a kernel that folded or packed
its weights at its first call and kept them is stale there. The ties set: values of the input's own
scale, where weights and biases both weigh in the output (x0.01 leaves mostly biases, x100 mostly
weights). ``--seeds`` below 5 leaves it out."""

PRECISION_FACTOR = 64.0
"""float32 and float64: how many times eager's summed error against float64 a candidate's may be."""
HALF_PRECISION_FACTOR = 8.0
"""bfloat16 and float16: the same, where the outputs' own rounding sets both errors."""
AS_EXACT_AS_EAGER = 4.0
"""A kernel whose error against float64 is within this many times eager's sums as exactly as eager does
(another order of the same fp32 sums). The precision rule allows more; a network that amplifies
rounding may need its regions' kernels this exact."""
PRECISION_FLOOR = {"float32": 2.0**-21, "float64": 2.0**-50, "bfloat16": 2.0**-9, "float16": 2.0**-12}
"""Relative error always allowed: about four units in the last place of float32 and float64, and for the
half types the mean error of rounding to them (a quarter of a unit in the last place), so that an fp8
kernel's error is not within the floor."""


def factor(dtype: str) -> float:
    """The precision rule's factor for ``dtype``."""
    return HALF_PRECISION_FACTOR if dtype in ("bfloat16", "float16") else PRECISION_FACTOR


def precision_problem(sums: PrecisionSums, dtype: str) -> str | None:
    """Why the candidate's outputs are less precise than the task's dtype allows (None if they are not):
    over all checked outputs together, and over each large output of each set on its own."""
    floor = PRECISION_FLOOR.get(dtype)
    if floor is None or sums.outputs == 0 or sums.magnitude <= 0:
        return None
    worst = None
    # each set's large outputs on their own in half precision only: there one set's overflowed statistics
    # can carry every set's sums, and eager's error is the output's rounding, steady from set to set; in
    # fp32 an honest exp on the large-values set alone comes near the factor (42-58x on the H200)
    parts = sums.parts if dtype in ("bfloat16", "float16") else []
    for err_c, err_e, magnitude in [(sums.err_candidate, sums.err_eager, sums.magnitude), *parts]:
        if magnitude > 0 and err_c > factor(dtype) * err_e + floor * magnitude:
            worst = (err_c, err_e, magnitude)
            break
    if worst is None:
        return None
    err_c, err_e, magnitude = worst
    mine, eager = err_c / magnitude, err_e / magnitude
    where = f"over {sums.outputs} checked outputs" if worst[2] == sums.magnitude else "on one checked output"
    how = "fp8 operands, or half-precision sums" if dtype in ("bfloat16", "float16") else \
        "fp16/bf16 arithmetic, or TF32 products"
    return (f"the outputs are {mine:.3g} from float64 on average (relative), eager's are {eager:.3g}: more than "
            f"{factor(dtype):g}x eager's error plus {floor:.2g}, {where}. The work is done in a lower precision "
            f"than the task's {dtype} ({how})")


def precision_problem_by_mode(by_mode: dict[str, PrecisionSums], dtype: str) -> str | None:
    """The precision rule held on each way of calling on its own (``Record.precision_by_mode``)."""
    for mode, sums in by_mode.items():
        problem = precision_problem(sums, dtype)
        if problem is not None:
            return f"in the calls with {mode}: {problem}"
    return None


def precision_ratio(sums: PrecisionSums, dtype: str) -> float | None:
    """The candidate's summed error against float64 over eager's, eager's taken as at least the floor
    the precision rule always allows (a ReLU or a max is exact in eager, and in an exact kernel);
    None without a float64 reference."""
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
