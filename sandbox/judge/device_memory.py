"""How much device memory judging a task takes, and who is to blame when it runs out (pure logic).

The unit is the task's own footprint ``F``: one eager call's peak, its parameters, inputs and
outputs included (``ReferenceResult.eager_peak_bytes``, measured with the baselines). A judgement
runs two processes on the GPU at once:

- the candidate's process holds its inputs (refilled in place), the next input set's values while
  they are copied in, and its outputs: about ``CANDIDATE_SHARE`` x F, plus whatever the candidate
  allocates for itself (``candidate_share`` is what it may hold before an out-of-memory in the
  judge is its fault);
- the oracle holds the reference, its own refilled inputs (for re-timing), and one input set with
  its expected outputs while the candidate runs: about ``ORACLE_SHARE`` x F. A float64 run of the
  reference (for the precision rule) takes ``EXACT_SHARE`` x the working set of the call on top;
  it is made on the device where that much is free, on the host otherwise (``exact.py``), so a
  process cannot switch the precision rule off by filling the GPU.

Input sets are made, run and compared one at a time, the outputs compared in chunks, and each
output file is deleted once compared, so none of this grows with the number of checked sets.
"""

from __future__ import annotations

from kernelevo.sandbox.tensor_files import SPAN_FACTOR

GIB = float(1 << 30)

CANDIDATE_SHARE = 2.0
ORACLE_SHARE = 2.0 + (SPAN_FACTOR - 1.0)
"""Its reference, refilled inputs, one set's expected outputs, and the candidate's output read back: a
padded one as the storage it spans, up to ``SPAN_FACTOR`` of it (``tensor_files.spanned``)."""
EXACT_SHARE = 2.0
"""A float64 value takes twice a float32 one: the float64 run's inputs, intermediates and outputs."""
EXACT_MARGIN = 1.2
"""The float64 run is tried only with this much more free than it is expected to need."""


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


def reference_alone_refusal(use: dict[str, int], device: str) -> str:
    """One line for a task whose reference ran out of device memory while its baseline was measured
    (``use``: the GPU's total and free bytes and the oracle's own, as the oracle reported them)."""
    total, free, own = int(use.get("total", 0)), int(use.get("free", 0)), int(use.get("own", 0))
    others = max(total - free - own, 0)
    if others <= GIB:
        return (f"this task cannot be judged on {device}: its reference alone ran out of device memory while its "
                f"baseline was measured (the GPU holds {gib(total)}); give the task smaller inputs")
    return (f"the task's reference ran out of device memory on {device} while its baseline was measured: other "
            f"processes held {gib(others)} of the GPU's {gib(total)}; free the GPU, or give the task smaller inputs")


def exact_fits(need: int, available: int) -> bool:
    """Does a float64 run needing ``need`` bytes fit in ``available`` free bytes, with a margin?"""
    return need * EXACT_MARGIN <= available


def candidate_share(eager_peak: int | None, measured: bool) -> int | None:
    """What the candidate may hold on the GPU before it, not the judge, is to blame for the judge
    running out: its 2F and a gigabyte for its CUDA context and allocator slack. ``measured``: the
    figure is its own processes' (the driver's per-process count); otherwise it is everything but the
    oracle, so one idle kept oracle of another evaluation on the same GPU (at most F) is allowed too."""
    if not eager_peak:
        return None
    return int((CANDIDATE_SHARE + (0.0 if measured else 1.0)) * eager_peak + GIB)
