"""How much device memory judging a task takes, and who is to blame when it runs out (pure logic).

The unit is the task's own footprint ``F``: one eager call's peak, its parameters, inputs and
outputs included (``ReferenceResult.eager_peak_bytes``, measured with the baselines). A judgement
runs two processes on the GPU at once:

- the candidate's process holds its inputs (refilled in place), the next input set's values while
  they are copied in, and its outputs: about ``CANDIDATE_SHARE`` x F, plus whatever the candidate
  allocates for itself (``candidate_share`` is what it may hold before it is the one crowding the
  judge);
- the oracle holds the reference, its own refilled inputs (for re-timing), and one input set with
  its expected outputs while the candidate runs: about ``ORACLE_SHARE`` x F. A float64 run of the
  reference (for the precision rule) takes ``EXACT_SHARE`` x the working set of the call on top;
  it is made on the device where that much is free, on the host otherwise; where the candidate's
  process holds more than its share and leaves no room, the candidate is rejected, so a process
  cannot switch the precision rule off by filling the GPU.

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


def reference_alone_refusal(device_total: int, device: str) -> str:
    """One line for a task whose reference alone runs out of device memory while its baseline is measured."""
    return (f"this task cannot be judged on {device}: its reference alone ran out of device memory while its "
            f"baseline was measured (the GPU holds {gib(device_total)}); give the task smaller inputs")


def exact_fits(need: int, available: int) -> bool:
    """Does a float64 run needing ``need`` bytes fit in ``available`` free bytes, with a margin?"""
    return need * EXACT_MARGIN <= available


def candidate_share(eager_peak: int | None) -> int | None:
    """What the other processes on the GPU may hold before the candidate's is the one crowding the
    judge: the candidate's share, one idle kept oracle of another evaluation on the same GPU (its
    reference and inputs, at most F), and a gigabyte for CUDA contexts and allocator slack."""
    if not eager_peak:
        return None
    return int((CANDIDATE_SHARE + 1.0) * eager_peak + GIB)


def candidate_crowded_out(held_by_others: int, eager_peak: int | None) -> bool:
    """Did the candidate's process hold more of the GPU than its share while the judge needed room?
    Then the judge running out of memory, or having no room for its float64 reference, is the
    candidate's fault: a kernel that needs that much cannot be judged beside the reference here."""
    allowed = candidate_share(eager_peak)
    return allowed is not None and held_by_others > allowed


def crowding_reason(held_by_others: int, device_total: int, eager_peak: int, what: str) -> str:
    return (f"the candidate's process held {gib(held_by_others)} of the GPU's {gib(device_total)} while the judge "
            f"needed room for {what}; its share is about {gib(candidate_share(eager_peak) or 0)} (the task's own "
            f"footprint is {gib(eager_peak)})")
