"""A direct convolution for one input channel per group (depthwise convolutions, and any with as
many groups as input channels): no GEMM to make, so no tensor cores; each program walks the taps of
one output channel's plane, unrolled, over BLOCK_M output pixels. The signature's geometry, the
bias and the epilogue are the implicit GEMMs' (``conv.py``)."""

from __future__ import annotations

PLANE_PIXELS = '''\
    pixels = OD * OH * OW
    blocks = tl.cdiv(pixels, BLOCK_M)
    plane = tl.program_id(0) // blocks
    pix = (tl.program_id(0) % blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = pix < pixels
    n = plane // K_OUT + tl.zeros((BLOCK_M,), dtype=tl.int32)
    kout = plane % K_OUT + tl.zeros((1,), dtype=tl.int32)
    col_ok = kout < K_OUT
    ow = pix % OW
    oh = (pix // OW) % OH
    od = pix // (OW * OH)
'''
"""Program p's BLOCK_M output pixels of one (image, channel) plane, K_OUT channels an image, and their
coordinates; shared with the pooling kernel (``pool.py``), which walks a window the same way."""

WINDOW_TAP = '''\
                di = od * ST - PT + t * DT
                hi = oh * SR - PR + r * DR
                wi = ow * SS - PS + s * DS
                ok = row_ok & (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
'''
"""Tap (t, r, s) of each pixel's window: its input coordinates, and whether they are inside the input."""

DIRECT = '''@triton.jit
def conv_kernel(x_ptr, w_ptr, b_ptr, {params}out_ptr, BATCH, C_IN, D, H, W, OD, OH, OW, K_OUT,
                CG: tl.constexpr, KG: tl.constexpr, KT: tl.constexpr, KR: tl.constexpr, KS: tl.constexpr,
                ST: tl.constexpr, SR: tl.constexpr, SS: tl.constexpr, PT: tl.constexpr, PR: tl.constexpr,
                PS: tl.constexpr, DT: tl.constexpr, DR: tl.constexpr, DS: tl.constexpr,
                HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr):
    # Program p: BLOCK_M output pixels of one (image, output channel) plane. Its one input channel is
    # read tap by tap (the taps unrolled at compile time); neighbouring taps hit the same lines in L1.
''' + PLANE_PIXELS + '''\
    x_base = (plane // K_OUT).to(tl.int64) * C_IN * D * H * W + (plane % K_OUT) // KG * D * H * W
    w_base = (plane % K_OUT) * (KT * KR * KS)
    total = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in tl.static_range(KT):
        for r in tl.static_range(KR):
            for s in tl.static_range(KS):
''' + WINDOW_TAP + '''\
                value = tl.load(x_ptr + x_base + (di * H + hi) * W + wi, mask=ok, other=0.0).to(tl.float32)
                tap = tl.load(w_ptr + w_base + (t * KR + r) * KS + s).to(tl.float32)
                total += value * tap
    acc = total[:, None]
{finish}'''
"""The direct kernel, with ``{params}`` (the epilogue's operands) and ``{finish}`` (``conv.FINISH``)."""
