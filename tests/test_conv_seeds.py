"""The convolution seeds' pure logic: which kernel applies, K steps, precision order, shared memory."""

from __future__ import annotations

import pytest

from kernelevo.agent.builtin import conv, conv_taps, conv_transposed

HOPPER_SHARED = 232448


def _conv(cin: int, cout: int, kernel: tuple[int, int, int], stride: tuple[int, int, int] = (1, 1, 1),
          groups: int = 1, transposed: bool = False, dilation: tuple[int, int, int] = (1, 1, 1)) -> conv.Conv:
    return conv.Conv(module="conv", dims=2, in_channels=cin, out_channels=cout, groups=groups, kernel=kernel,
                     stride=stride, padding=(0, 1, 1), dilation=dilation, has_bias=True, epilogue=None,
                     out_dtype="float32", input="x", inputs=["x"], transposed=transposed)


@pytest.mark.parametrize(("transposed", "stride", "phased", "channels", "applies"), [
    (False, (1, 2, 3), False, 16, True),
    (False, (1, 1, 1), False, 15, False),   # too few channels to fill a K step
    (True, (1, 1, 1), False, 64, True),
    (True, (1, 2, 2), True, 64, True),      # split by phase
    (True, (1, 2, 2), False, 64, False),    # strided, not split by phase (groups x phases past the grid)
])
def test_tap_major_applies_where_its_walk_is_exact(transposed: bool, stride: tuple, phased: bool, channels: int,
                                                   applies: bool) -> None:
    assert conv_taps.applies(transposed, stride, phased, channels) is applies


def test_a_strided_dilated_transposed_convolution_is_split_by_phase_with_counted_taps() -> None:
    """With dilation, a phase's taps are every stride / gcd(stride, dilation)-th and some phases have
    none: both phased kernels count them per program (``phase_taps``), and the seeds size K by the
    fullest phase (3 taps a dim at stride 2, dilation 2: every tap lands on an input in half the phases)."""
    strided = _conv(16, 8, (1, 3, 3), stride=(1, 2, 2), transposed=True, dilation=(1, 2, 2))
    for strategy in ("tap_major", "implicit_gemm"):
        source = conv.kernel(strided, strategy, "bf16x3")
        assert source.startswith(conv_transposed.PHASE_TAPS_HELPER) and "phase_taps(pd, PT, ST, DT, KT)" in source
    assert conv_transposed.phase_taps((1, 3, 3), (1, 2, 2), (1, 2, 2)) == 9
    assert conv_transposed.phase_taps((1, 3, 3), (1, 2, 2), (1, 1, 1)) == 4
    assert any(strategy == "tap_major" for strategy, _, _ in conv.seeds(strided, "float32", HOPPER_SHARED))
    plain = _conv(16, 8, (1, 3, 3), stride=(1, 2, 2), transposed=True)  # no dilation: the kernels as before
    assert "phase_taps(" not in conv.kernel(plain, "tap_major", "bf16x3")


@pytest.mark.parametrize(("channels", "step"), [(16, 16), (40, 16), (64, 64), (80, 16), (96, 32), (128, 64),
                                                (192, 64), (36, 16)])
def test_a_k_step_pads_a_taps_channels_by_at_most_an_eighth(channels: int, step: int) -> None:
    assert conv_taps.block_k(channels) == step


def test_fp32_seeds_put_six_bf16_products_first_and_three_second() -> None:
    # three products keep 16 bits of each operand: over a sum that mostly cancels, not fp32-level
    for shape in (_conv(64, 128, (1, 3, 3)), _conv(16, 32, (1, 1, 1)), _conv(8, 64, (1, 3, 3))):
        seeds = conv.seeds(shape, "float32", HOPPER_SHARED)
        assert seeds[0][1]["precision"] == "bf16x6"
        assert seeds[1][1]["precision"] == "bf16x3" and seeds[1][0] == seeds[0][0]  # a short search measures both
        for kind in {strategy for strategy, _, _ in seeds}:  # each kernel's own seeds: six, then three
            own = [params.get("precision") for strategy, params, _ in seeds if strategy == kind]
            assert own[0] == "bf16x6" and own.count("bf16x3") == 1 and own.index("bf16x3") == 1
    few = conv.seeds(_conv(3, 16, (1, 3, 3)), "float32", HOPPER_SHARED)  # 3 channels: the packed kernel
    assert few[0][0] == "implicit_gemm" and few[0][1]["precision"] == "bf16x6"
    bf16 = conv.seeds(_conv(64, 128, (1, 3, 3)), "bfloat16", HOPPER_SHARED)
    assert all("precision" not in params for _, params, _ in bf16)
    assert len({str(params) for _, params, _ in bf16}) == len(bf16)


@pytest.mark.parametrize("shared", [HOPPER_SHARED, 100 * 1024])
def test_every_seed_fits_the_shared_memory_it_is_given(shared: int) -> None:
    for strategy, params, _ in conv.seeds(_conv(64, 128, (1, 3, 3)), "float32", shared):
        if strategy == "tap_major":
            need = params["num_stages"] * (params["BLOCK_M"] + params["BLOCK_N"]) * params["BLOCK_K"] * 4
            assert 2 <= params["num_stages"] and need <= shared, params
