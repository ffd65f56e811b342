"""Output comparison and out-of-process fingerprints (pure logic, CPU)."""

from __future__ import annotations

import torch

from kernelevo.sandbox.compare import compare_prints, describe_mismatch, differs, fingerprint, sample_positions


def test_within_tolerance_passes_and_outside_reports_the_worst_element() -> None:
    ref = torch.randn(10, 20)
    assert describe_mismatch(ref + 5e-5, ref, 1e-4, 1e-4) is None
    bad = ref.clone()
    bad[3, 7] += 1.0
    message = describe_mismatch(bad, ref, 1e-4, 1e-4)
    assert message and "1 of 200" in message and "(3, 7)" in message


def test_nan_and_inf_never_match() -> None:
    ref = torch.zeros(4)
    assert "NaN" in describe_mismatch(torch.tensor([0.0, float("nan"), 0.0, 0.0]), ref, 1, 1)
    inf = torch.tensor([float("inf")])
    assert describe_mismatch(inf, inf, 1e-4, 1e-4) is not None


def test_dtype_shape_and_type_must_match() -> None:
    ref = torch.ones(3)
    assert "dtype" in describe_mismatch(ref.half(), ref, 1, 1)
    assert "shape" in describe_mismatch(torch.ones(4), ref, 1, 1)

    class Sub(torch.Tensor):
        pass

    assert "plain torch.Tensor" in describe_mismatch(ref.as_subclass(Sub), ref, 1, 1)


def test_integer_outputs_must_match_exactly() -> None:
    ref = torch.tensor([1, 2, 3])
    assert describe_mismatch(ref.clone(), ref, 1, 1) is None
    assert "1 of 3 values differ" in describe_mismatch(torch.tensor([1, 2, 4]), ref, 1, 1)


def test_differs_treats_nan_as_changed() -> None:
    a = torch.ones(3)
    assert not differs(a, a.clone())
    assert differs(a, torch.full((3,), float("nan")))


def test_sample_positions_are_deterministic() -> None:
    assert torch.equal(sample_positions(1000, 7), sample_positions(1000, 7))
    assert not torch.equal(sample_positions(1000, 7), sample_positions(1000, 8))


def test_fingerprints_catch_a_wrong_element_outside_the_samples() -> None:
    ref = torch.randn(100_000)
    good, bad = ref + 1e-6, ref.clone()
    positions = set(sample_positions(ref.numel(), 3).tolist())
    wrong = next(i for i in range(ref.numel()) if i not in positions)
    bad[wrong] += 50.0  # invisible to the samples, visible to the sum
    want = fingerprint(ref, 3)
    assert compare_prints(fingerprint(good, 3), want, 1e-4, 1e-4) is None
    assert "sum" in compare_prints(fingerprint(bad, 3), want, 1e-4, 1e-4)


def test_fingerprint_of_non_finite_output_is_rejected() -> None:
    ref = fingerprint(torch.ones(10), 1)
    assert "NaN" in compare_prints(fingerprint(torch.full((10,), float("nan")), 1), ref, 1e-4, 1e-4)


def test_excess_error_is_what_eager_strays_beyond_the_tolerance() -> None:
    from kernelevo.sandbox.compare import excess_error

    exact = torch.tensor([1.0, 100.0, -3.0], dtype=torch.float64)
    assert excess_error(exact.float(), exact, 1e-4, 1e-4) == 0.0
    off = torch.tensor([1.0, 100.0, -3.05])
    assert abs(excess_error(off, exact, 1e-4, 1e-4) - (0.05 - 1e-4 - 3e-4)) < 1e-6
    assert excess_error(torch.tensor([1, 2]), torch.tensor([1, 2]), 0, 0) == 0.0


def test_slack_widens_the_bound_by_exactly_its_amount() -> None:
    ref = torch.zeros(4)
    assert describe_mismatch(ref + 0.02, ref, 1e-4, 1e-4, slack=0.03) is None
    message = describe_mismatch(ref + 0.04, ref, 1e-4, 1e-4, slack=0.03)
    assert message and "eager's own error" in message


def test_out_of_process_prints_allow_the_reference_excess_too() -> None:
    ref = torch.zeros(8)
    want = fingerprint(ref, 3)
    got = fingerprint(ref + 0.02, 3)
    assert compare_prints(got, want, 1e-4, 1e-4) is not None
    want.excess = 0.01  # eager itself strays 0.01 beyond the tolerance: up to 3x that is allowed
    assert compare_prints(got, want, 1e-4, 1e-4) is None
    assert compare_prints(fingerprint(ref + 0.05, 3), want, 1e-4, 1e-4) is not None
