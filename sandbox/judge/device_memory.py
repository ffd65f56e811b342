"""How much device memory judging a task takes, and who is to blame when it runs out (pure logic).

The unit is the task's own footprint ``F``: one eager call's peak, its parameters, inputs and
outputs included (``ReferenceResult.eager_peak_bytes``, measured with the baselines). A judgement
runs two processes on the GPU at once:

- the candidate's process holds its inputs (refilled in place), the next input set's values while
  they are copied in, and its outputs: about ``CANDIDATE_SHARE`` x F, plus whatever the candidate
  allocates for itself;
- the oracle holds the reference, its own refilled inputs (for re-timing), and one input set with
  its expected outputs while the candidate runs: about ``ORACLE_SHARE`` x F. A float64 run of the
  reference (for the precision rule) takes ``EXACT_SHARE`` x the working set of the call on top;
  it is made only where that much is free, and skipped with a note otherwise.

Input sets are made, run and compared one at a time, the outputs compared in chunks, and each
output file is deleted once compared, so none of this grows with the number of checked sets.
"""

from __future__ import annotations

GIB = float(1 << 30)

CANDIDATE_SHARE = 2.0
ORACLE_SHARE = 2.0
EXACT_SHARE = 2.0
"""A float64 value takes twice a float32 one: the float64 run's inputs, intermediates and outputs."""
EXACT_MARGIN = 1.2
"""The float64 run is tried only with this much more free than it is expected to need."""
RELEASE_ABOVE_BYTES = 1 << 30
"""The oracle hands its cached free blocks back to the driver when they exceed this, so the
candidate's process (a separate process, with its own allocator) can use them."""


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.1f} GiB"


def judging_need(eager_peak: int) -> int:
    """The least device memory that judging a task of footprint ``eager_peak`` takes (no float64 run)."""
    return int((CANDIDATE_SHARE + ORACLE_SHARE) * eager_peak)


def refusal(eager_peak: int | None, device_total: int | None, device: str) -> str | None:
    """One line saying that the task cannot be judged on this GPU, or None where it fits."""
    if not eager_peak or not device_total:
        return None
    need = judging_need(eager_peak)
    if need <= device_total:
        return None
    return (f"this task cannot be judged on {device}: one eager call peaks at {gib(eager_peak)} of device memory, "
            f"judging runs the reference and the candidate side by side and needs at least {gib(need)} "
            f"({CANDIDATE_SHARE + ORACLE_SHARE:g}x that), and the GPU holds {gib(device_total)}; "
            "give the task smaller inputs")


def exact_skip_note(need: int, available: int) -> str | None:
    """Why the float64 reference is skipped for one input set (None: it may be computed)."""
    if need * EXACT_MARGIN <= available:
        return None
    return (f"no float64 reference on this input set: it needs about {gib(need)} of device memory and "
            f"{gib(available)} are free, so the plain tolerance alone judges it")


def candidate_crowded_out(held_by_others: int, device_total: int, eager_peak: int | None) -> bool:
    """Did the candidate's process (the only other judging process on this GPU) leave the oracle
    less than its share? Then the oracle running out of memory is the candidate's fault."""
    if not eager_peak:
        return False
    return device_total - held_by_others < ORACLE_SHARE * eager_peak
