"""The commitment a timed call makes to its output: a SHA-256 tree hash of the output's exact bytes.

A timed call returns, with its time, a digest of its output; the session decides only afterwards
whether to ask for the output itself, and the oracle recomputes the digest on the bytes shipped. The
digest must therefore bind: no candidate may return a digest first and find, later, an output that
is correct and has that digest. A sum of per-element hashes does not bind, however many bits it has:
a candidate free to choose each of many elements among values within the tolerance can steer the sum
onto any target with a generalized-birthday (Wagner) search. A cryptographic hash does: finding
another message with the same SHA-256 is out of reach.

Definition, a tree of two levels: the output's bytes (contiguous, in memory order) are cut into
leaves of :data:`LEAF_BYTES` (the last may be shorter) and each leaf's SHA-256 taken, in order; those
hashes, concatenated, are cut and hashed the same way once more; the second level's hashes follow a
header naming the digest, the request's seed, the output's index, dtype, shape and size, and the
digest is the SHA-256 of the whole, as four 64-bit integers. The leaves are independent, so a GPU
hashes them all at once (``digest_kernel.py``: one read of the output, checked once per process
against ``hashlib`` before it is used); on a CPU, and for small outputs, ``hashlib`` hashes each leaf.
The second level is why a large output's digest is cheap: a 6 GB output has 50 MB of leaf hashes,
which the host would take a tenth of a second to copy and hash, and 400 KB of second-level ones.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from typing import Any

import torch

LEAF_BYTES = 4096
DIGEST_LANES = 4
"""The digest as four 64-bit integers (the 32 bytes of the root hash)."""
KERNEL_FROM_BYTES = 1 << 20
"""Outputs of at least this many bytes on a GPU are hashed there (``digest_kernel.py``, well under a
millisecond); smaller ones are copied to the host and hashed by ``hashlib`` (under a millisecond
too). A digest on the host for large outputs would take tens of milliseconds per call, wall time that
would widen the share of the reference's unexplained time a candidate's calls are allowed."""
HEADER = b"kernelevo output digest, SHA-256 tree, 4096-byte leaves\0"


def output_bytes(value: torch.Tensor) -> torch.Tensor:
    """The tensor's elements, contiguous in logical order, as a 1-D uint8 tensor on its device."""
    return value.detach().reshape(-1).contiguous().view(torch.uint8)


def host_leaves(data: torch.Tensor) -> bytes:
    """Each leaf's SHA-256, in order, computed by ``hashlib`` (``data``: 1-D uint8 on the CPU)."""
    view = memoryview(data.numpy()) if data.numel() else memoryview(b"")
    return b"".join(hashlib.sha256(view[start:start + LEAF_BYTES]).digest()
                    for start in range(0, len(view), LEAF_BYTES))


_KERNEL_AGREES: dict[str, bool] = {}


def kernel_agrees(device: torch.device) -> bool:
    """Does the GPU leaf hash give ``hashlib``'s bytes on ``device``? Checked once per process (full
    leaves, with every byte value); where it does not, or fails to compile, this process copies
    outputs to the host instead and says so once."""
    key = str(device)
    if key not in _KERNEL_AGREES:
        from kernelevo.sandbox.child import digest_kernel

        sample = torch.randint(0, 256, (3 * LEAF_BYTES,), dtype=torch.uint8, generator=torch.Generator().manual_seed(7))
        try:
            agrees = digest_kernel.full_leaves(sample.to(device)) == host_leaves(sample)
        except Exception as exc:  # noqa: BLE001 (any failure of the fast path leaves the host's)
            print(f"kernelevo: the digest kernel failed on {device} ({type(exc).__name__}: {exc}); hashing "
                  "outputs on the host", file=sys.stderr)
            agrees = False
        else:
            if not agrees:
                print(f"kernelevo: the digest kernel disagrees with hashlib on {device}; hashing outputs on "
                      "the host", file=sys.stderr)
        _KERNEL_AGREES[key] = agrees
    return _KERNEL_AGREES[key]


def leaves(data: torch.Tensor) -> bytes:
    """Every leaf's SHA-256 of a 1-D uint8 tensor, on its own device where that is faster."""
    return level_hashes(data).cpu().numpy().tobytes()


def level_hashes(data: torch.Tensor) -> torch.Tensor:
    """Every leaf's SHA-256 of a 1-D uint8 tensor, concatenated, as a 1-D uint8 tensor on ``data``'s
    device: one level of the tree, hashed by the GPU kernel where that is faster."""
    if data.is_cuda and data.numel() >= KERNEL_FROM_BYTES and kernel_agrees(data.device):
        from kernelevo.sandbox.child import digest_kernel

        whole = data.numel() // LEAF_BYTES * LEAF_BYTES
        tail = host_leaves(data[whole:].cpu())
        hashed = digest_kernel.leaf_hashes(data[:whole])
        if not tail:
            return hashed
        return torch.cat([hashed, torch.frombuffer(bytearray(tail), dtype=torch.uint8).to(data.device)])
    hashed = host_leaves(data.cpu())
    return torch.frombuffer(bytearray(hashed), dtype=torch.uint8) if hashed else torch.empty(0, dtype=torch.uint8)


def tensor_digest(value: Any, seed: int, index: int) -> list[int]:
    """The digest of output ``index`` of a call made with ``seed`` (see the module); zeros for
    something that is not a tensor."""
    if not isinstance(value, torch.Tensor):
        return [0] * DIGEST_LANES
    data = output_bytes(value)
    header = HEADER + struct.pack("<QqQ", seed % (1 << 64), index, data.numel()) + \
        f"{value.dtype}{tuple(value.shape)}".encode()
    second = level_hashes(level_hashes(data)).cpu().numpy().tobytes()
    root = hashlib.sha256(header + second).digest()
    return [int.from_bytes(root[8 * k:8 * k + 8], "little") for k in range(DIGEST_LANES)]
