"""The output digest of ``timed.tensor_digest`` as one Triton kernel, for large outputs on a GPU.

What it computes: for each element's raw bits ``b`` at position ``i`` and each of the digest's lane
keys ``k``, splitmix64's finalizer of ``b + i * GOLDEN + k``, summed mod 2^64 per lane: exactly the
figures of the torch expression in ``timed.py``, which stays the definition (and the path on a CPU
and for small outputs).

Why a kernel: in torch each of the finalizer's steps is its own pass over an int64 temporary, about
a dozen passes of 16 bytes per element per lane; with four lanes a 900M-value output took about
0.2 s after every timed call. Here each element's bits are read once (4 bytes for fp32), every lane
is mixed in registers and each program writes one partial sum per lane: one pass at memory speed.

Exactness: int64 adds and multiplies wrap mod 2^64 and ``>>`` shifts arithmetically, in Triton as in
torch, and a wrapping sum does not depend on its order. Still, a process checks the kernel against
the torch expression once before trusting it (:func:`kernel_agrees`), and keeps torch if it differs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 2048
"""Elements per program: 8 KB of fp32 read, four lanes of 2048 int64 values held in registers."""


@triton.jit
def _mix(z, M0: tl.constexpr, M1: tl.constexpr):
    """splitmix64's finalizer (its multipliers as signed int64, given by ``timed.py``)."""
    z = (z ^ (z >> 30)) * M0
    z = (z ^ (z >> 27)) * M1
    return z ^ (z >> 31)


# Not specialised on the values: the size and the keys change from call to call, and one compiled
# kernel (the one the self-check ran) serves them all.
@triton.jit(do_not_specialize=["n", "golden", "k0", "k1", "k2", "k3"])
def _digest_kernel(bits_ptr, n, golden, k0, k1, k2, k3, partial_ptr, M0: tl.constexpr, M1: tl.constexpr,
                   BLOCK: tl.constexpr):
    """Each program hashes ``BLOCK`` elements into four lane sums, stored at ``partial_ptr[pid, :]``."""
    pid = tl.program_id(0).to(tl.int64)
    offsets = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offsets < n
    bits = tl.load(bits_ptr + offsets, mask=mask, other=0).to(tl.int64)
    base = bits + offsets * golden
    tl.store(partial_ptr + pid * 4 + 0, tl.sum(tl.where(mask, _mix(base + k0, M0, M1), 0), axis=0))
    tl.store(partial_ptr + pid * 4 + 1, tl.sum(tl.where(mask, _mix(base + k1, M0, M1), 0), axis=0))
    tl.store(partial_ptr + pid * 4 + 2, tl.sum(tl.where(mask, _mix(base + k2, M0, M1), 0), axis=0))
    tl.store(partial_ptr + pid * 4 + 3, tl.sum(tl.where(mask, _mix(base + k3, M0, M1), 0), axis=0))


def kernel_lanes(bits: torch.Tensor, keys: list[int], golden: int, mix: tuple[int, int]) -> list[int]:
    """The four lane sums (mod 2^64) of a contiguous 1-D integer tensor holding each element's bits
    (unsigned 8-bit, or signed 16, 32 or 64-bit: widened to int64 as ``timed._torch_lanes`` widens them)."""
    assert len(keys) == 4 and bits.dim() == 1 and bits.is_contiguous()
    programs = max(1, triton.cdiv(bits.numel(), BLOCK))
    partial = torch.empty((programs, 4), dtype=torch.int64, device=bits.device)
    _digest_kernel[(programs,)](bits, bits.numel(), golden, *keys, partial, M0=mix[0], M1=mix[1], BLOCK=BLOCK)
    return [int(s) % (1 << 64) for s in partial.sum(dim=0).tolist()]
