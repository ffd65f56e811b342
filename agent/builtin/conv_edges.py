"""Convolutions whose padding repeats the input's edges (``padding_mode`` ``reflect``, ``replicate`` or
``circular``): the input padded first by a kernel of its own, then convolved without padding.

The padding kernel writes the padded input once, each value read from where the mode says: mirrored
about the edge (reflect), the edge itself (replicate) or wrapped around (circular). That costs one
read and one write of the input, small next to the convolution that reads it once per tap, and it
lets every convolution kernel keep its unpadded path, whose taps need no bounds test.
"""

from __future__ import annotations

MODES = {"reflect": 0, "replicate": 1, "circular": 2}
PADDED = "padded"
"""The padded copy's name in ``forward`` (one of ``recognize.GENERATED_NAMES``)."""

KERNEL = '''@triton.jit
def edge_index(i, n, MODE: tl.constexpr):
    # Where index i (maybe outside [0, n)) reads from: mirrored about the edge without repeating it
    # (reflect), the nearest edge (replicate), or wrapped around (circular).
    if MODE == 0:
        i = tl.where(i < 0, -i, i)
        i = tl.where(i >= n, 2 * n - 2 - i, i)
    elif MODE == 1:
        i = tl.minimum(tl.maximum(i, 0), n - 1)
    else:
        i = (i % n + n) % n
    return i


@triton.jit
def edge_pad_kernel(x_ptr, out_ptr, N, D, H, W, OD, OH, OW, PT, PR, PS, MODE: tl.constexpr, BLOCK: tl.constexpr):
    # Program p: padded positions [p * BLOCK, (p + 1) * BLOCK) in memory order, as (image x channel,
    # depth, row, column); each reads the input value its mode maps it to. One read and one write a value.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    ow = offs % OW
    rest = offs // OW
    oh = rest % OH
    rest = rest // OH
    od = rest % OD
    plane = rest // OD
    w = edge_index(ow - PS, W, MODE)
    h = edge_index(oh - PR, H, MODE)
    d = edge_index(od - PT, D, MODE)
    value = tl.load(x_ptr + ((plane * D + d) * H + h) * W + w, mask=ok)
    tl.store(out_ptr + offs, value, mask=ok)


'''


def pad_lines(x: str, dims: int, mode: str) -> list[str]:
    """``forward`` lines after ``conv_geometry``: :data:`PADDED`, ``x`` padded by the edges' mode (``x``
    itself where the padding is zero), the sizes grown by the padding and the padding set to zero for
    the convolution kernel. ``x`` is left as it is: an epilogue may read it."""
    grown = ("d + 2 * pt", "h + 2 * pr", "w + 2 * ps")
    return [f"{PADDED} = {x}",
            "if pt or pr or ps:",
            f"    {PADDED} = torch.empty(({x}.shape[0], {x}.shape[1], {', '.join(grown[3 - dims:])}), "
            f"dtype={x}.dtype, device={x}.device)",
            f"    if {PADDED}.numel():",
            f"        edge_pad_kernel[(ceil_div({PADDED}.numel(), 1024),)](",
            f"            {x}, {PADDED}, {PADDED}.numel(), d, h, w, {', '.join(grown)}, pt, pr, ps, "
            f"MODE={MODES[mode]}, BLOCK=1024)",
            f"    (d, h, w), (pt, pr, ps) = ({', '.join(grown)}), (0, 0, 0)"]
