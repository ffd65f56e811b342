"""SHA-256 of many 4096-byte leaves at once, as one Triton kernel: the GPU half of the output digest
(``digest.py`` defines it; ``hashlib`` is the reference every process checks this kernel against
before trusting it).

Each lane of a program hashes one leaf: 64 blocks of 64 bytes, then SHA-256's padding block for a
4096-byte message, the state and a 16-word window of the message schedule in uint32 registers per
lane. The leaves are independent, so a 2 GB output's 512K leaves keep every SM busy; the output is
read once, and 32 bytes per leaf are written, byte-swapped so that memory holds the digest's bytes
(the next level of the tree reads them as its message). About 550 GB/s on an H200: wider loads, more
lanes per program or unrolled rounds measured within 10% of this shape. The 64 rounds are a loop,
not unrolled: unrolled, the kernel took over half a minute to compile, and every process that hashes
compiles it once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LANES = 64
"""Leaves hashed per program."""
WARPS = LANES // 32
"""One thread per lane: more warps than that would each repeat the same lanes' work."""
WORDS_PER_LEAF = 1024
INITIAL = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
ROUND_CONSTANTS = (
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2)


def _as_int32(values: tuple[int, ...]) -> list[int]:
    return [v - (1 << 32) if v >= 1 << 31 else v for v in values]


@triton.jit
def _rotr(x, n: tl.constexpr):
    return (x >> n) | (x << (32 - n))


@triton.jit
def _word(ptr, offset, ok):
    """A big-endian message word from little-endian memory."""
    return _swap(tl.load(ptr + offset, mask=ok, other=0).to(tl.uint32, bitcast=True))


@triton.jit
def _swap(x):
    """A uint32's four bytes in the other order."""
    return ((x & 0xFF) << 24) | ((x & 0xFF00) << 8) | ((x >> 8) & 0xFF00) | (x >> 24)


@triton.jit
def _big_endian(x):
    """``x``'s bytes swapped: stored, a state word reads as the bytes of SHA-256's digest."""
    return _swap(x.to(tl.uint32, bitcast=True)).to(tl.int32, bitcast=True)


@triton.jit(do_not_specialize=["n_leaves"])
def _sha256_leaves(words_ptr, k_ptr, state_ptr, n_leaves, out_ptr, LANES: tl.constexpr):
    leaf = tl.program_id(0) * LANES + tl.arange(0, LANES)
    ok = leaf < n_leaves
    base = leaf.to(tl.int64) * 1024
    zero = tl.zeros([LANES], dtype=tl.uint32)
    h0 = zero + tl.load(state_ptr + 0).to(tl.uint32, bitcast=True)
    h1 = zero + tl.load(state_ptr + 1).to(tl.uint32, bitcast=True)
    h2 = zero + tl.load(state_ptr + 2).to(tl.uint32, bitcast=True)
    h3 = zero + tl.load(state_ptr + 3).to(tl.uint32, bitcast=True)
    h4 = zero + tl.load(state_ptr + 4).to(tl.uint32, bitcast=True)
    h5 = zero + tl.load(state_ptr + 5).to(tl.uint32, bitcast=True)
    h6 = zero + tl.load(state_ptr + 6).to(tl.uint32, bitcast=True)
    h7 = zero + tl.load(state_ptr + 7).to(tl.uint32, bitcast=True)
    first_pad = (zero + 1) << 31  # 0x80000000, built without a literal wider than int32
    length = zero + 4096 * 8
    for block in range(65):
        # Blocks 0-63: the leaf's bytes. Block 64: SHA-256's padding for a 4096-byte message (a one
        # bit, zeros, the length in bits).
        data = ok & (block < 64)
        at = base + block * 16
        w0 = tl.where(block < 64, _word(words_ptr, at + 0, data), first_pad)
        w1 = _word(words_ptr, at + 1, data)
        w2 = _word(words_ptr, at + 2, data)
        w3 = _word(words_ptr, at + 3, data)
        w4 = _word(words_ptr, at + 4, data)
        w5 = _word(words_ptr, at + 5, data)
        w6 = _word(words_ptr, at + 6, data)
        w7 = _word(words_ptr, at + 7, data)
        w8 = _word(words_ptr, at + 8, data)
        w9 = _word(words_ptr, at + 9, data)
        w10 = _word(words_ptr, at + 10, data)
        w11 = _word(words_ptr, at + 11, data)
        w12 = _word(words_ptr, at + 12, data)
        w13 = _word(words_ptr, at + 13, data)
        w14 = _word(words_ptr, at + 14, data)
        w15 = tl.where(block < 64, _word(words_ptr, at + 15, data), length)
        a, b, c, d, e, f, g, h = h0, h1, h2, h3, h4, h5, h6, h7
        for r in range(64):
            s1 = _rotr(e, 6) ^ _rotr(e, 11) ^ _rotr(e, 25)
            choose = (e & f) ^ (~e & g)
            t1 = h + s1 + choose + tl.load(k_ptr + r).to(tl.uint32, bitcast=True) + w0
            s0 = _rotr(a, 2) ^ _rotr(a, 13) ^ _rotr(a, 22)
            majority = (a & b) ^ (a & c) ^ (b & c)
            h, g, f, e, d, c, b, a = g, f, e, d + t1, c, b, a, t1 + s0 + majority
            # the message schedule: a window of the next 16 words
            sigma0 = _rotr(w1, 7) ^ _rotr(w1, 18) ^ (w1 >> 3)
            sigma1 = _rotr(w14, 17) ^ _rotr(w14, 19) ^ (w14 >> 10)
            w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 = (
                w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15, w0 + sigma0 + w9 + sigma1)
        h0 += a
        h1 += b
        h2 += c
        h3 += d
        h4 += e
        h5 += f
        h6 += g
        h7 += h
    out = out_ptr + leaf.to(tl.int64) * 8
    tl.store(out + 0, _big_endian(h0), mask=ok)
    tl.store(out + 1, _big_endian(h1), mask=ok)
    tl.store(out + 2, _big_endian(h2), mask=ok)
    tl.store(out + 3, _big_endian(h3), mask=ok)
    tl.store(out + 4, _big_endian(h4), mask=ok)
    tl.store(out + 5, _big_endian(h5), mask=ok)
    tl.store(out + 6, _big_endian(h6), mask=ok)
    tl.store(out + 7, _big_endian(h7), mask=ok)


_CONSTANTS: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}


def full_leaves(data: torch.Tensor) -> bytes:
    """The SHA-256 of each 4096-byte leaf of ``data`` (1-D uint8, a whole number of leaves), in order:
    the bytes ``hashlib`` gives for each leaf, concatenated."""
    return leaf_hashes(data).cpu().numpy().tobytes()


def leaf_hashes(data: torch.Tensor) -> torch.Tensor:
    """As :func:`full_leaves`, left on ``data``'s device as a 1-D uint8 tensor (32 bytes a leaf)."""
    assert data.dim() == 1 and data.numel() % 4096 == 0
    n_leaves = data.numel() // 4096
    if n_leaves == 0:
        return torch.empty(0, dtype=torch.uint8, device=data.device)
    if data.data_ptr() % 4:  # word loads need 4-byte alignment
        data = data.clone()
    key = str(data.device)
    if key not in _CONSTANTS:
        _CONSTANTS[key] = (torch.tensor(_as_int32(ROUND_CONSTANTS), dtype=torch.int32, device=data.device),
                           torch.tensor(_as_int32(INITIAL), dtype=torch.int32, device=data.device))
    rounds, initial = _CONSTANTS[key]
    out = torch.empty(n_leaves * 8, dtype=torch.int32, device=data.device)
    _sha256_leaves[(triton.cdiv(n_leaves, LANES),)](data.view(torch.int32), rounds, initial, n_leaves, out,
                                                      LANES=LANES, num_warps=WARPS)
    return out.view(torch.uint8)
