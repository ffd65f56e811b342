"""The input sets and the models both processes build (``sandbox/child/inputs.py``): pure functions of
the seeds, tested without a judge."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelevo.sandbox.child.inputs import SHIFT_SPREADS, VARIANTS, build_model, far_from_generated, with_offset
from kernelevo.sandbox.child.trained_constants import Draws
from kernelevo.sandbox.judge.rules import CHECKED_SETS


def test_the_default_checks_one_set_of_each_variant() -> None:
    assert CHECKED_SETS == len(VARIANTS)
    assert [far_from_generated(v) for v in range(len(VARIANTS))] == [False, False, False, True, False, True]


def test_a_shifted_set_moves_by_its_spread_and_keeps_signs() -> None:
    x = torch.randn(512, 256)
    shifted = with_offset(x)
    assert abs(float((shifted - x).mean()) - SHIFT_SPREADS * float(x.std())) < 0.05 * SHIFT_SPREADS
    assert float((shifted - x).max() - (shifted - x).min()) < 1e-4  # one offset for all: the spread is kept
    assert float(with_offset(torch.rand(1000)).min()) > 0  # positive inputs stay positive
    assert float(with_offset(-torch.rand(1000)).max()) < 0  # and negative ones (log-probabilities) negative
    assert float(with_offset(torch.tensor([-5.0, -4.0, 0.5])).mean()) > 0  # a mixed input always moves up
    constant, broken = torch.full((8,), 3.0), torch.tensor([1.0, float("inf"), 2.0])
    assert torch.equal(with_offset(constant), constant) and torch.equal(with_offset(broken), broken)


class _Reference(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.bn = nn.BatchNorm1d(8)
        self.gate = nn.Parameter(torch.zeros(8))
        self.gain = nn.Parameter(torch.ones(()))  # one value: a scalar the task means as it is
        self.register_buffer("mask", torch.ones(8, 8))  # a buffer that is no norm's statistic


class _Wrapping(nn.Module):
    """A candidate that builds the reference's modules by building the reference inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _Reference()


def test_constant_parameters_and_norm_statistics_are_redrawn_alike_in_both_processes() -> None:
    torch.manual_seed(0)
    reference = _Reference()
    torch.manual_seed(0)
    candidate = _Wrapping()
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    Draws(7).vary_constants(reference)
    Draws(7).vary_constants(candidate)
    after = reference.state_dict()
    assert all(torch.equal(after[k], v) for k, v in candidate.inner.state_dict().items())
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"norm.weight", "norm.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                       "gate"}
    assert float(after["bn.running_var"].min()) > 0 and float(after["norm.weight"].min()) > 0  # signs kept
    assert len({tuple(after[k].tolist()) for k in changed}) == len(changed)  # each drawn on its own
    Draws(8).vary_constants(reference)  # redrawn tensors are no longer constant: a second call changes nothing
    assert all(torch.equal(reference.state_dict()[k], v) for k, v in after.items())


class _ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class _FoldedInInit(nn.Module):
    """An honest candidate: the BatchNorm folded into the convolution once, in ``__init__``."""

    def __init__(self) -> None:
        super().__init__()
        reference = _ConvBn().eval()
        bn = reference.bn
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        self.conv = reference.conv
        with torch.no_grad():
            self.conv.weight.mul_(scale[:, None, None, None])
            self.conv.bias.copy_((self.conv.bias - bn.running_mean) * scale + bn.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class _Task:
    @staticmethod
    def get_init_inputs() -> list:
        return []


def test_a_norm_folded_in_init_sees_the_drawn_constants() -> None:
    """The norm's constants are drawn while it is built, so a candidate that folds them into a weight in
    ``__init__`` folds the values the reference computes with (drawn after construction, the fold would
    have taken the constructor's ones and zeros, and an honest candidate would fail)."""
    reference = build_model(_ConvBn, _Task, "cpu", None, 11)
    folded = build_model(_FoldedInInit, _Task, "cpu", None, 11)
    assert float(reference.bn.running_var.std()) > 0.05  # drawn, not the constructor's ones
    x = torch.randn(2, 3, 9, 9)
    with torch.no_grad():
        torch.testing.assert_close(folded(x), reference(x), rtol=1e-5, atol=1e-5)
    assert torch.nn.init.ones_.__module__ == "torch.nn.init"  # put back after the build
