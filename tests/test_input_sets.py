"""The input sets and the models both processes build (``sandbox/child/inputs.py``): pure functions of
the seeds, tested without a judge."""

from __future__ import annotations

import torch
import torch.nn as nn

from kernelevo.sandbox.child.inputs import (
    SHIFT_LEVELS,
    VARIANTS,
    build_model,
    far_from_generated,
    levels_for,
    with_offset,
)
from kernelevo.sandbox.child.trained_constants import change, load_drawn, put_back
from kernelevo.sandbox.judge.rules import CHECKED_SETS


def test_the_default_checks_one_set_of_each_variant() -> None:
    assert CHECKED_SETS == len(VARIANTS)
    assert [far_from_generated(v) for v in range(len(VARIANTS))] == [False, False, False, True, False, True]


def test_a_shifted_set_moves_rows_by_several_spreads_and_keeps_signs() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 256)
    moved = (with_offset(x) - x).mean(-1) / float(x.std())
    levels = sorted({round(float(m)) for m in moved})
    assert levels == [round(v) for v in SHIFT_LEVELS]  # every level, rows side by side
    assert float((with_offset(x) - x).std(-1).max()) < 1e-3  # one offset per row: the spread is kept
    assert float(with_offset(torch.rand(40, 10)).min()) > 0  # positive inputs stay positive
    assert float(with_offset(-torch.rand(40, 10)).max()) <= 0  # and negative ones (log-probabilities)
    assert float(with_offset(torch.tensor([-5.0, -4.0, 0.5])).mean()) > 0  # a mixed input moves up
    one_row = torch.randn(100)
    assert abs(float((with_offset(one_row) - one_row).mean()) - 64 * float(one_row.std())) < 1e-2
    # the levels a dtype holds: no row overflows float16, none collapses to one value in bfloat16
    assert levels_for(torch.float16, 20.0) == (0.0, 4.0, 64.0) and levels_for(torch.bfloat16, 1.0)[-1] == 64.0
    half = with_offset(torch.randn(64, 256).mul(20).half())
    assert bool(torch.isfinite(half).all()) and int(half.float().std(-1).eq(0).sum()) == 0
    wide = with_offset(torch.randn(64, 256).bfloat16())
    assert int(wide.float().std(-1).eq(0).sum()) == 0
    constant, broken = torch.full((8,), 3.0), torch.tensor([1.0, float("inf"), 2.0])
    assert torch.equal(with_offset(constant), constant) and torch.equal(with_offset(broken), broken)


class _Reference(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.bn = nn.BatchNorm1d(8)
        self.gate = nn.Parameter(torch.zeros(8))
        self.scale = nn.Parameter(torch.ones(1))  # a learned scale of one value: trained, it varies
        self.register_buffer("mask", torch.ones(8, 8))  # a buffer that is no norm's statistic: the task's meaning


class _Renamed(nn.Module):
    """A candidate holding the same tensors under other names, one norm written by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.ln = nn.Module()
        self.ln.gamma, self.ln.beta = nn.Parameter(torch.ones(8)), nn.Parameter(torch.zeros(8))
        self.stats = nn.Module()
        self.stats.weight, self.stats.bias = nn.Parameter(torch.ones(8)), nn.Parameter(torch.zeros(8))
        self.stats.register_buffer("running_mean", torch.zeros(8))
        self.stats.register_buffer("running_var", torch.ones(8))
        self.stats.register_buffer("num_batches_tracked", torch.tensor(0))
        self.gate = nn.Parameter(torch.zeros(8))
        self.temperature = nn.Parameter(torch.ones(1))
        self.register_buffer("mask", torch.ones(8, 8))


def test_constants_are_drawn_by_what_they_hold_alike_in_both_processes() -> None:
    reference, candidate = _Reference(), _Renamed()
    candidate.fc.load_state_dict(reference.linear.state_dict())
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    load_drawn(reference, 7)
    load_drawn(candidate, 7)
    after = reference.state_dict()
    assert [v.tolist() for v in after.values()] == [v.tolist() for v in candidate.state_dict().values()]
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {"norm.weight", "norm.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                       "gate", "scale"}
    assert float(after["bn.running_var"].min()) > 0 and float(after["norm.weight"].min()) > 0  # signs kept
    assert len({tuple(after[k].tolist()) for k in changed}) == len(changed)  # each drawn on its own
    load_drawn(reference, 8)  # drawn tensors are no longer constant: a second load changes nothing
    assert all(torch.equal(reference.state_dict()[k], v) for k, v in after.items())


def test_a_change_follows_contents_and_is_put_back() -> None:
    reference, candidate = _Reference(), _Renamed()
    candidate.load_state_dict(dict(zip(candidate.state_dict(), reference.state_dict().values(), strict=True)))
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    saved = change(reference, 5)
    change(candidate, 5)
    assert [v.tolist() for v in reference.state_dict().values()] == [v.tolist() for v in candidate.state_dict().values()]
    assert not torch.equal(reference.linear.weight, before["linear.weight"])
    assert torch.equal(reference.mask, before["mask"])  # a buffer that is no statistic: the task's meaning
    put_back(reference, saved)
    assert all(torch.equal(reference.state_dict()[k], v) for k, v in before.items())


class _ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class _Folded(nn.Module):
    """The BatchNorm folded into the convolution in ``__init__``; ``refold`` says whether it folds again
    when a state is loaded (as a user loading a checkpoint needs)."""

    def __init__(self, refold: bool) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)
        self._fold()
        if refold:
            self.register_load_state_dict_post_hook(lambda module, keys: module._fold())

    def _fold(self) -> None:
        bn = self.bn
        scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
        self.weight = self.conv.weight.detach() * scale[:, None, None, None]
        self.bias = (self.conv.bias.detach() - bn.running_mean) * scale + bn.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, self.weight, self.bias)


class _Task:
    @staticmethod
    def get_init_inputs() -> list:
        return []


def test_a_norm_folded_in_init_must_fold_again_when_a_state_is_loaded() -> None:
    """The constants arrive as a user's checkpoint does, through ``load_state_dict``: a fold kept up to
    date by a post-hook computes what the reference does; a fold made once in ``__init__`` is stale, as
    it would be after the user's load, and differs."""
    reference = build_model(_ConvBn, _Task, "cpu", None, 11)
    assert float(reference.bn.running_var.std()) > 0.05  # drawn, not the constructor's ones
    x = torch.randn(2, 3, 9, 9)
    with torch.no_grad():
        want = reference(x)
        hooked = build_model(type("Hooked", (_Folded,), {"__init__": lambda s: _Folded.__init__(s, True)}), _Task,
                             "cpu", None, 11)
        torch.testing.assert_close(hooked(x), want, rtol=1e-5, atol=1e-5)
        stale = build_model(type("Stale", (_Folded,), {"__init__": lambda s: _Folded.__init__(s, False)}), _Task,
                            "cpu", None, 11)
        assert float((stale(x) - want).abs().max()) > 0.1


class _TwoNorms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.batch_norm = nn.BatchNorm2d(4)
        self.group_norm = nn.GroupNorm(2, 4)


class _TwoNormsFlat(nn.Module):
    """The same tensors held flat on the module, a shorthand for one of them, another order of kinds: the
    state dict lists the module's own parameters, then its buffers (statistics and parameters interleave
    unlike the reference's)."""

    def __init__(self) -> None:
        super().__init__()
        self.bn_weight, self.bn_bias = nn.Parameter(torch.ones(4)), nn.Parameter(torch.zeros(4))
        self.alias = self.bn_weight  # the same Parameter under a second name: one tensor
        self.gn_weight, self.gn_bias = nn.Parameter(torch.ones(4)), nn.Parameter(torch.zeros(4))
        self.register_buffer("running_mean", torch.zeros(4))
        self.register_buffer("running_var", torch.ones(4))


def test_tensors_under_other_names_shorthands_and_lazy_modules_get_the_reference_draws() -> None:
    reference, candidate = _TwoNorms(), _TwoNormsFlat()
    load_drawn(reference, 3)
    load_drawn(candidate, 3)
    bn, gn = reference.batch_norm, reference.group_norm
    for mine, theirs in ((candidate.bn_weight, bn.weight), (candidate.bn_bias, bn.bias), (candidate.gn_weight, gn.weight),
                         (candidate.gn_bias, gn.bias), (candidate.running_mean, bn.running_mean),
                         (candidate.running_var, bn.running_var)):
        assert torch.equal(mine, theirs)
    assert candidate.alias is candidate.bn_weight
    lazy = nn.Sequential(nn.LazyLinear(4), nn.LayerNorm(4))
    load_drawn(lazy, 3)  # the lazy weight is left to its first call; the norm is drawn
    assert float(lazy[1].weight.std()) > 0
