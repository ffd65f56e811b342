"""Output comparison and fingerprints, written against torch functions captured at import.

The harness imports this module before any candidate code, so the function references below are
the real ones even if a candidate later rebinds ``torch.allclose`` or tensor methods. Comparisons
call these captured functions only, never tensor methods or operators.
"""

from __future__ import annotations

import torch

from kernelevo.sandbox.models import TensorPrint

_abs = torch.abs
_sub = torch.sub
_mul = torch.mul
_add = torch.add
_le = torch.le
_all = torch.all
_any = torch.any
_isfinite = torch.isfinite
_isnan = torch.isnan
_equal = torch.equal
_sum = torch.sum
_logical_not = torch.logical_not
_logical_and = torch.logical_and
_count_nonzero = torch.count_nonzero
_argmax = torch.argmax
_maximum = torch.max
_randint = torch.randint
_to = torch.Tensor.to
_flatten = torch.flatten
_index_select = torch.index_select
_zeros_like = torch.zeros_like
_float64 = torch.float64
_eq = torch.eq
_where = torch.where
_full_like = torch.full_like
_unravel_index = torch.unravel_index
_tensor = torch.tensor


SLACK_FACTOR = 3.0
"""A candidate may exceed ``atol + rtol*|ref|`` by this many times the reference's own excess error
against float64 on the same inputs (TensorPrint.excess): a correct kernel that sums in a different
order than eager must not fail where eager itself is that far from the exact answer, and a kernel
that is wrong, or computes in a lower precision, still fails wherever eager is accurate."""


def excess_error(ref: torch.Tensor, exact: torch.Tensor, atol: float, rtol: float) -> float:
    """The largest amount by which ``ref`` strays from ``exact`` (float64) beyond atol + rtol*|exact|."""
    if not ref.is_floating_point() or ref.numel() == 0 or ref.shape != exact.shape:
        return 0.0
    r = _to(ref, _float64)
    e = _to(exact, _float64)
    over = _sub(_abs(_sub(r, e)), _add(_mul(_abs(e), rtol), atol))
    worst = float(_maximum(over))
    return worst if worst > 0 and worst != float("inf") else 0.0


def flat_outputs(out: object) -> list[object]:
    """A forward's result as a list (a tensor, or a tuple/list of them)."""
    return list(out) if isinstance(out, (tuple, list)) else [out]


def describe_mismatch(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
                      slack: float = 0.0) -> str | None:
    """None when ``out`` matches ``ref`` elementwise within ``atol + rtol*|ref| + slack``; otherwise
    why not, in words."""
    if type(out) is not torch.Tensor:
        return f"output is a {type(out).__name__}, not a plain torch.Tensor"
    if out.shape != ref.shape:
        return f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        got, want = str(out.dtype).removeprefix("torch."), str(ref.dtype).removeprefix("torch.")
        return f"output dtype {got} != reference {want}"
    if out.device != ref.device:
        return f"output on {out.device}, reference on {ref.device}"
    if out.numel() == 0:
        return None
    if not ref.is_floating_point():
        if _equal(out, ref):
            return None
        wrong = int(_count_nonzero(_logical_not(_eq(out, ref))))
        return f"{wrong} of {ref.numel()} values differ (integer output must match exactly)"
    o = _to(out, _float64)
    r = _to(ref, _float64)
    err = _abs(_sub(o, r))
    bound = _add(_mul(_abs(r), rtol), atol + slack)
    ok = _le(err, bound)  # NaN compares False: NaN or Inf never match
    if bool(_all(ok)):
        return None
    bad = _logical_not(ok)
    count = int(_count_nonzero(bad))
    nan = int(_count_nonzero(_isnan(o)))
    worst = _flatten(_sub(err, bound))
    worst = _where(_isnan(worst), _full_like(worst, float("inf")), worst)
    index = int(_argmax(worst))
    at = tuple(int(i) for i in _unravel_index(_tensor(index), ref.shape))
    allowed = f"{atol:g} + {rtol:g}*|ref|" + (f" + {slack:.3g} (eager's own error)" if slack else "")
    detail = (
        f"{count} of {ref.numel()} values outside |out - ref| <= {allowed}; "
        f"worst at {at}: got {float(_flatten(o)[index]):.6g}, expected {float(_flatten(r)[index]):.6g}"
    )
    if nan:
        detail += f"; {nan} NaN (unwritten memory is poisoned with NaN)"
    return detail


def differs(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two outputs are not bitwise the same (NaN counts as different)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return True
    if a.is_floating_point() and (bool(_any(_isnan(a))) or bool(_any(_isnan(b)))):
        return True
    return not _equal(a, b)


def sample_positions(numel: int, seed: int, count: int = 1024) -> torch.Tensor:
    """Positions of the fingerprint's samples: the same in every process for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    return _randint(0, max(numel, 1), (min(count, max(numel, 1)),), generator=generator)


def fingerprint(t: torch.Tensor, seed: int) -> TensorPrint:
    """Shape, dtype, float64 sums and sampled values of one output (computed on its device)."""
    flat = _to(_flatten(t.detach()), _float64)
    finite = bool(_all(_isfinite(flat))) if flat.numel() else True
    idx = _to(sample_positions(flat.numel(), seed), flat.device)
    sample = _index_select(flat, 0, idx).cpu().tolist() if flat.numel() else []
    return TensorPrint(
        shape=list(t.shape),
        dtype=str(t.dtype).removeprefix("torch."),
        finite=finite,
        sum=float(_sum(flat)) if flat.numel() else 0.0,
        abs_sum=float(_sum(_abs(flat))) if flat.numel() else 0.0,
        sample=[float(v) for v in sample],
    )


def compare_prints(out: TensorPrint, ref: TensorPrint, atol: float, rtol: float) -> str | None:
    """Compare fingerprints out of process: None when consistent with a within-tolerance output.

    If every element is within ``atol' + rtol*|ref|`` (``atol' = atol + SLACK_FACTOR*ref.excess``),
    every sample is, and the sums differ by at most ``n*atol' + rtol*sum|ref|`` (plus float64
    rounding); a mismatch proves a wrong output.
    """
    atol = atol + SLACK_FACTOR * ref.excess
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return f"shape/dtype {out.shape}/{out.dtype} != reference {ref.shape}/{ref.dtype}"
    if not out.finite:
        return "output holds NaN or Inf"
    numel = 1
    for d in ref.shape:
        numel *= d
    exact = not ref.dtype.startswith(("float", "bfloat"))
    for i, (o, r) in enumerate(zip(out.sample, ref.sample)):
        if (o != r) if exact else abs(o - r) > atol + rtol * abs(r):
            return f"sample {i}: got {o:.6g}, expected {r:.6g}"
    slack = 1e-9 * (ref.abs_sum + out.abs_sum) + 1e-12
    bound = 0.0 if exact else numel * atol + rtol * ref.abs_sum
    if abs(out.sum - ref.sum) > bound + slack:
        return f"sum of the output {out.sum:.9g} != reference {ref.sum:.9g} beyond the tolerance"
    return None
