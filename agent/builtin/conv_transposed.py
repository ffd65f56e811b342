"""A transposed convolution (``nn.ConvTranspose1d/2d/3d`` with stride and no dilation) as implicit
GEMMs by output phase.

Output pixel ``o`` of a transposed convolution sums tap ``t`` of the weights against input
``(o + pad - t) / stride`` only where that divides exactly. Seen from one output pixel, a stride of 2
leaves half the taps of each dim with no input: an implicit GEMM over every tap multiplies zeros in
3 of 4 steps in 2-D, 7 of 8 in 3-D. Split the outputs by phase instead (``o mod stride`` in each dim):
all outputs of one phase use the same taps (``t ≡ (phase + pad) mod stride``), every ``stride``-th
one, and read input ``(o + pad - t0) / stride - j`` for the ``j``-th of them. Each program computes
BLOCK_M output pixels of one phase x BLOCK_N output channels of one group, summing over input
channels x that phase's taps only: the tensor cores see no structural zeros, and each input value is
read about once per phase from L2. The signature, the K step's end, the bias and the epilogue are the
convolution's (``conv.py``).
"""

from __future__ import annotations

from kernelevo.agent.builtin import conv_taps

PHASE_TILE = '''\
    group = tl.program_id(2) // PHASES
    phase = tl.program_id(2) % PHASES
    pd = phase // (SR * SS)
    ph = (phase // SS) % SR
    pw = phase % SS
    odp = tl.cdiv(OD, ST)
    ohp = tl.cdiv(OH, SR)
    owp = tl.cdiv(OW, SS)
    per_image = odp * ohp * owp
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = rows // per_image
    q = rows % per_image
    od = pd + ST * (q // (ohp * owp))
    oh = ph + SR * ((q // owp) % ohp)
    ow = pw + SS * (q % owp)
    row_ok = (n < BATCH) & (od < OD) & (oh < OH) & (ow < OW)
    pixels = OD * OH * OW
    pix = (od * OH + oh) * OW + ow
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < KG
    kout = group * KG + cols
    # the phase's first tap per dim, and the input index it reads (exact: o + pad - t0 divides)
    t0 = (pd + PT) % ST
    r0 = (ph + PR) % SR
    s0 = (pw + PS) % SS
    d0 = (od + PT - t0) // ST
    h0 = (oh + PR - r0) // SR
    w0 = (ow + PS - s0) // SS
'''
"""Program (m, n, group * phases + phase)'s output pixels of one phase and channels of one group,
the phase's first tap per dim and the input index it reads; shared by both phased walks."""

PHASED_BODY = '''\
    # Program (m, n, group * phases + phase): BLOCK_M output pixels of one phase (each output index
    # mod the stride, per dim) x BLOCK_N output channels of one group. The GEMM's K is (input
    # channel, the phase's taps): every ST-th, SR-th, SS-th tap from the first that lands on an input.
    PHASES: tl.constexpr = ST * SR * SS
    KTP: tl.constexpr = (KT + ST - 1) // ST
    KRP: tl.constexpr = (KR + SR - 1) // SR
    KSP: tl.constexpr = (KS + SS - 1) // SS
    KTOT: tl.constexpr = CG * KTP * KRP * KSP
''' + PHASE_TILE + '''\
    x_base = n.to(tl.int64) * C_IN * D * H * W + group * CG * D * H * W
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, KTOT, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < KTOT
        j_s = ks % KSP
        j_r = (ks // KSP) % KRP
        j_t = (ks // (KSP * KRP)) % KTP
        c = ks // (KSP * KRP * KTP)
        t = t0 + ST * j_t
        r = r0 + SR * j_r
        s = s0 + SS * j_s
        tap_ok = k_ok & (t < KT) & (r < KR) & (s < KS)
        di = d0[:, None] - j_t[None, :]
        hi = h0[:, None] - j_r[None, :]
        wi = w0[:, None] - j_s[None, :]
        inside = (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        ok = row_ok[:, None] & tap_ok[None, :] & inside
        a = tl.load(x_ptr + x_base[:, None] + ((c[None, :] * D + di) * H + hi) * W + wi, mask=ok, other=0.0)
        # the weights are [in, out per group, taps]
        w_offsets = ((group * CG + c)[:, None] * KG + cols[None, :]) * (KT * KR * KS) + ((t * KR + r) * KS + s)[:, None]
        b = tl.load(w_ptr + w_offsets, mask=tap_ok[:, None] & col_ok[None, :], other=0.0)
'''
"""The phased kernel's body, between ``conv.GEMM_SIGNATURE`` and ``conv.DOT_STEP``."""


PHASED_TAPS_BODY = '''\
    # Program (m, n, group * phases + phase): BLOCK_M output pixels of one phase x BLOCK_N output
    # channels of one group. K is walked tap by tap over the phase's taps (every ST-th, SR-th, SS-th
    # from the first that lands on an input), BLOCK_K input channels a step: a step's channels share
    # their input coordinates, so its padding test is per pixel and an address is one add.
    PHASES: tl.constexpr = ST * SR * SS
    CHUNKS: tl.constexpr = (CG + BLOCK_K - 1) // BLOCK_K
''' + PHASE_TILE + '''\
''' + conv_taps.INPUT_LAYOUT + '''\
    chans = tl.arange(0, BLOCK_K)
    w_cols = cols + group * CG * KG  # the permuted weights are [taps, C_IN, KG]
    # This phase's taps per dim, from its first to the kernel's end: one fewer than the largest
    # phase's where the kernel does not divide by the stride, none where it is shorter than the
    # phase's start. The loop visits only taps that exist (a 3x3x3 kernel at stride 2: 27 tap
    # steps over the 8 phases, not 64).
    nt = (KT - t0 + ST - 1) // ST
    nr = (KR - r0 + SR - 1) // SR
    ns = (KS - s0 + SS - 1) // SS
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, nt * nr * ns * CHUNKS):
        j = k // CHUNKS
        j_s = j % ns
        j_r = (j // ns) % nr
        j_t = j // (ns * nr)
        c = (k % CHUNKS) * BLOCK_K + chans
        c_ok = c < CG
        di = d0 - j_t
        hi = h0 - j_r
        wi = w0 - j_s
        inside = row_ok & (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        a = tl.load(x_ptr + (x_row + ((di * H + hi) * W + wi) * pixel_step)[:, None] + (c * channel_step)[None, :],
                    mask=inside[:, None] & c_ok[None, :], other=0.0)
        tap = ((t0 + ST * j_t) * KR + r0 + SR * j_r) * KS + s0 + SS * j_s
        b = tl.load(w_ptr + tap * (C_IN * KG) + (c * KG)[:, None] + w_cols[None, :],
                    mask=c_ok[:, None] & col_ok[None, :], other=0.0)
'''
"""The phased kernel walked tap-major (``conv_taps.py``), between its signature and ``conv.DOT_STEP``."""


GRID_Z = 65535
"""CUDA's limit on a launch grid's third dimension, which holds groups x phases."""


def phased(transposed: bool, stride: tuple[int, int, int], dilation: tuple[int, int, int], groups: int) -> bool:
    """Does the phase split apply: a transposed convolution with a stride, without dilation (with
    one, a phase's taps are no longer every stride-th), whose groups x phases fit a grid."""
    phases = stride[0] * stride[1] * stride[2]
    return transposed and dilation == (1, 1, 1) and phases > 1 and groups * phases <= GRID_Z


def phase_taps(kernel: tuple[int, int, int], stride: tuple[int, int, int]) -> int:
    """Taps one phase visits (some of them past the kernel's edge in phases that start late)."""
    return -(-kernel[0] // stride[0]) * -(-kernel[1] // stride[1]) * -(-kernel[2] // stride[2])


def grid(x: str, params: dict) -> str:
    """The launch grid: row tiles of the largest phase, channel tiles, groups x phases."""
    return (f"(triton.cdiv({x}.shape[0] * triton.cdiv(od, st) * triton.cdiv(oh, sr) * triton.cdiv(ow, ss), "
            f"{params['BLOCK_M']}), triton.cdiv(k_out // groups, {params['BLOCK_N']}), groups * st * sr * ss)")
