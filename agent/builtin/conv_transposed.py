"""A transposed convolution (``nn.ConvTranspose1d/2d/3d`` with stride) as implicit GEMMs by output
phase.

Output pixel ``o`` of a transposed convolution sums tap ``t`` of the weights against input
``(o + pad - t) / stride`` only where that divides exactly. Seen from one output pixel, a stride of 2
leaves half the taps of each dim with no input: an implicit GEMM over every tap multiplies zeros in
3 of 4 steps in 2-D, 7 of 8 in 3-D. Split the outputs by phase instead (``o mod stride`` in each dim):
all outputs of one phase use the same taps (``t ≡ (phase + pad) mod stride``), every ``stride``-th
one, and read input ``(o + pad - t0) / stride - j`` for the ``j``-th of them. Each program computes
BLOCK_M output pixels of one phase x BLOCK_N output channels of one group, summing over input
channels x that phase's taps only: the tensor cores see no structural zeros, and each input value is
read about once per phase from L2. With dilation a phase's taps are every stride / gcd(stride,
dilation)-th, and some phases have none; their taps are counted per program (``phase_taps``). The
signature, the K step's end, the bias and the epilogue are the convolution's (``conv.py``).
"""

from __future__ import annotations

import math

from kernelevo.agent.builtin import conv_taps

PHASE_PIXELS = '''\
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
'''
"""Program (m, n, group * phases + phase)'s output pixels of one phase and channels of one group."""

FIRST_TAPS = '''\
    # the phase's first tap per dim, and the input index it reads (exact: o + pad - t0 divides)
    t0 = (pd + PT) % ST
    r0 = (ph + PR) % SR
    s0 = (pw + PS) % SS
    d0 = (od + PT - t0) // ST
    h0 = (oh + PR - r0) // SR
    w0 = (ow + PS - s0) // SS
'''
"""Without dilation: the phase's first tap per dim (the next is a stride further) and the input
index it reads (the next is one earlier)."""

PHASE_TILE = PHASE_PIXELS + FIRST_TAPS


PHASED_LOADS = '''\
        inside = (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        ok = row_ok[:, None] & tap_ok[None, :] & inside
        a = tl.load(x_ptr + x_base[:, None] + ((c[None, :] * D + di) * H + hi) * W + wi, mask=ok, other=0.0)
        # the weights are [in, out per group, taps]
        w_offsets = ((group * CG + c)[:, None] * KG + cols[None, :]) * (KT * KR * KS) + ((t * KR + r) * KS + s)[:, None]
        b = tl.load(w_ptr + w_offsets, mask=tap_ok[:, None] & col_ok[None, :], other=0.0)
'''
"""A phased implicit GEMM step's loads: the input tile (zero past the input's edges) and the weights'."""

def k_steps(total: str, counts: tuple[str, str, str], steps: tuple[str, str, str]) -> str:
    """A phased implicit GEMM's K loop head: step ``ks`` of ``total`` split into (input channel ``c``,
    the phase's ``j``-th tap per dim) with ``counts`` taps a dim, and the taps ``t``, ``r``, ``s`` they
    are (``steps`` apart from the phase's first)."""
    (nt, nr, ns), (ts, rs, ss) = counts, steps
    return f"""\
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, {total}, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < {total}
        j_s = ks % {ns}
        j_r = (ks // {ns}) % {nr}
        j_t = (ks // ({ns} * {nr})) % {nt}
        c = ks // ({ns} * {nr} * {nt})
        t = t0 + {ts} * j_t
        r = r0 + {rs} * j_r
        s = s0 + {ss} * j_s
"""


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
''' + k_steps("KTOT", ("KTP", "KRP", "KSP"), ("ST", "SR", "SS")) + '''\
        tap_ok = k_ok & (t < KT) & (r < KR) & (s < KS)
        di = d0[:, None] - j_t[None, :]
        hi = h0[:, None] - j_r[None, :]
        wi = w0[:, None] - j_s[None, :]
''' + PHASED_LOADS
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
    steps = nt * nr * ns * CHUNKS
    nt = tl.maximum(nt, 1)  # divisors never zero (see DILATED_TAPS_BODY)
    nr = tl.maximum(nr, 1)
    ns = tl.maximum(ns, 1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, steps):
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


PHASE_TAPS_HELPER = '''@triton.jit
def phase_taps(p, PAD: tl.constexpr, S: tl.constexpr, DIL: tl.constexpr, K: tl.constexpr):
    # Of a K-tap kernel dim with stride S and dilation DIL, the taps t that output phase p reads an
    # input through (p + PAD - t * DIL divides by S): the first, how many, and the step between them
    # (S / gcd(S, DIL)). A phase may have none: then K, 0 and 1. One walk over the taps, per program.
    first = p * 0 + K
    second = p * 0 + K
    count = p * 0
    for t in tl.static_range(K):
        hit = (p + PAD - t * DIL) % S == 0
        second = tl.where(hit & (first < K) & (second == K), t, second)
        first = tl.where(hit & (first == K), t, first)
        count += tl.where(hit, 1, 0)
    return first, count, tl.where(second < K, second - first, 1)
'''
"""The dilated phase split's helper (in the candidate's file beside the kernel)."""

DILATED_TAPS = '''\
    # With dilation, the taps of one phase are every step-th from its first (step = stride /
    # gcd(stride, dilation), per dim); each next one reads an input step * dilation / stride earlier.
    t0, nt, t_step = phase_taps(pd, PT, ST, DT, KT)
    r0, nr, r_step = phase_taps(ph, PR, SR, DR, KR)
    s0, ns, s_step = phase_taps(pw, PS, SS, DS, KS)
    d0 = (od + PT - t0 * DT) // ST
    h0 = (oh + PR - r0 * DR) // SR
    w0 = (ow + PS - s0 * DS) // SS
    d_step = t_step * DT // ST
    h_step = r_step * DR // SR
    w_step = s_step * DS // SS
'''
"""With dilation: the phase's taps per dim (first, count, step) and the inputs they read."""

DILATED_BODY = '''\
    # PHASED_BODY with dilation: the GEMM's K is (input channel, the phase's taps), counted per
    # program, so a phase without taps runs no step.
    PHASES: tl.constexpr = ST * SR * SS
''' + PHASE_PIXELS + DILATED_TAPS + '''\
    x_base = n.to(tl.int64) * C_IN * D * H * W + group * CG * D * H * W
    ktot = CG * nt * nr * ns
    nt1 = tl.maximum(nt, 1)  # divisors (with a zero count no step runs)
    nr1 = tl.maximum(nr, 1)
    ns1 = tl.maximum(ns, 1)
''' + k_steps("ktot", ("nt1", "nr1", "ns1"), ("t_step", "r_step", "s_step")) + '''\
        # The input tile is gathered as [taps, pixels] and transposed for the product: a warp's loads
        # then run along a phase's pixels (every stride-th input), not across channels' planes; with
        # the store the same way, 5.09 ms against 12.32 ms on the H200 for a 2-D kernel of stride (2, 3),
        # dilation (2, 1) and 4 groups of 8 input channels.
        di = d0[None, :] - (d_step * j_t)[:, None]
        hi = h0[None, :] - (h_step * j_r)[:, None]
        wi = w0[None, :] - (w_step * j_s)[:, None]
        inside = (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        ok = row_ok[None, :] & k_ok[:, None] & inside
        a = tl.trans(tl.load(x_ptr + x_base[None, :] + ((c[:, None] * D + di) * H + hi) * W + wi, mask=ok,
                             other=0.0))
        w_offsets = ((group * CG + c)[:, None] * KG + cols[None, :]) * (KT * KR * KS) + ((t * KR + r) * KS + s)[:, None]
        b = tl.load(w_ptr + w_offsets, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
'''
"""The dilated phased kernel's body, between ``conv.GEMM_SIGNATURE`` and ``conv.DOT_STEP``; its tiles
are read pixel-major (:func:`pixel_major`)."""

DILATED_TAPS_BODY = '''\
    # PHASED_TAPS_BODY with dilation: the phase's taps per dim counted per program.
    PHASES: tl.constexpr = ST * SR * SS
    CHUNKS: tl.constexpr = (CG + BLOCK_K - 1) // BLOCK_K
''' + PHASE_PIXELS + DILATED_TAPS + conv_taps.INPUT_LAYOUT + '''\
    chans = tl.arange(0, BLOCK_K)
    w_cols = cols + group * CG * KG  # the permuted weights are [taps, C_IN, KG]
    steps = nt * nr * ns * CHUNKS
    # Divisors never zero: a phase without taps runs no step, but a pipelined loop computes its first
    # steps' indices ahead of the trip-count test, and a division by zero there hangs the GPU (this
    # kernel at stride 5, dilation 2: every launch at three stages, none at one or with the guard).
    nt = tl.maximum(nt, 1)
    nr = tl.maximum(nr, 1)
    ns = tl.maximum(ns, 1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, steps):
        j = k // CHUNKS
        j_s = j % ns
        j_r = (j // ns) % nr
        j_t = j // (ns * nr)
        c = (k % CHUNKS) * BLOCK_K + chans
        c_ok = c < CG
        di = d0 - d_step * j_t
        hi = h0 - h_step * j_r
        wi = w0 - w_step * j_s
        inside = row_ok & (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
        a = tl.load(x_ptr + (x_row + ((di * H + hi) * W + wi) * pixel_step)[:, None] + (c * channel_step)[None, :],
                    mask=inside[:, None] & c_ok[None, :], other=0.0)
        tap = ((t0 + t_step * j_t) * KR + r0 + r_step * j_r) * KS + s0 + s_step * j_s
        b = tl.load(w_ptr + tap * (C_IN * KG) + (c * KG)[:, None] + w_cols[None, :],
                    mask=c_ok[:, None] & col_ok[None, :], other=0.0)
'''
"""The dilated phased kernel walked tap-major, between its signature and ``conv.DOT_STEP``."""


def with_helper(source: str) -> str:
    """A phased kernel's source, with :data:`PHASE_TAPS_HELPER` before it where it counts taps."""
    return (PHASE_TAPS_HELPER + "\n\n" + source) if "phase_taps(" in source else source


def body(dilation: tuple[int, int, int], tap_major: bool) -> str:
    """The phased kernel's body: the plain phase split without dilation, the counted one with it."""
    if dilation == (1, 1, 1):
        return PHASED_TAPS_BODY if tap_major else PHASED_BODY
    return DILATED_TAPS_BODY if tap_major else DILATED_BODY


def pixel_major(dilation: tuple[int, int, int], tap_major: bool) -> bool:
    """Does the body read its input tiles, and so store its outputs, pixel-major (``DILATED_BODY``)?
    Measured only there: the plain implicit GEMM read that way was 3.6x slower (a 3-D convolution of
    3 input channels, on the H200)."""
    return dilation != (1, 1, 1) and not tap_major


GRID_Z = 65535
"""CUDA's limit on a launch grid's third dimension, which holds groups x phases."""


def phased(transposed: bool, stride: tuple[int, int, int], groups: int) -> bool:
    """Does the phase split apply: a transposed convolution with a stride whose groups x phases fit a
    grid (with dilation too: a phase's taps are then every stride / gcd(stride, dilation)-th)."""
    phases = stride[0] * stride[1] * stride[2]
    return transposed and phases > 1 and groups * phases <= GRID_Z


def phase_taps(kernel: tuple[int, int, int], stride: tuple[int, int, int], dilation: tuple[int, int, int]) -> int:
    """Taps the fullest phase visits."""
    out = 1
    for k, s, d in zip(kernel, stride, dilation):
        out *= -(-k // (s // math.gcd(s, d)))
    return out


def grid(x: str, params: dict) -> str:
    """The launch grid: row tiles of the largest phase, channel tiles, groups x phases."""
    return (f"(ceil_div({x}.shape[0] * ceil_div(od, st) * ceil_div(oh, sr) * ceil_div(ow, ss), "
            f"{params['BLOCK_M']}), ceil_div(k_out // groups, {params['BLOCK_N']}), groups * st * sr * ss)")
