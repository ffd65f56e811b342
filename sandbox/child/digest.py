"""The commitment a timed call makes to its output: a SHA-256 tree hash of the output's exact bytes.

A timed call returns, with its time, a digest of its output; the session decides only afterwards
whether to ask for the output itself, and the oracle recomputes the digest on the bytes shipped. The
digest must therefore bind: no candidate may return a digest first and find, later, an output that
is correct and has that digest. A sum of per-element hashes does not bind, however many bits it has:
a candidate free to choose each of many elements among values within the tolerance can steer the sum
onto any target with a generalized-birthday (Wagner) search. A cryptographic hash does: finding
another message with the same SHA-256 is out of reach.

Definition, a tree of two levels: the output's bytes, in the order its storage holds them, are cut
into leaves of :data:`LEAF_BYTES` (the last may be shorter) and each leaf's SHA-256 taken, in order;
those hashes, concatenated, are cut and hashed the same way once more; the second level's hashes
follow a header naming the digest, the request's seed, the output's index, dtype, shape and size (and
its layout where the bytes are not taken row-major), and the digest is the SHA-256 of the whole, as
four 64-bit integers. Storage order, not the logical one, as a tensor file carries the output
(``tensor_files``): an output that is a transposed view of the buffer a kernel wrote (dense, its
dimensions permuted) is hashed where it lies, as is the storage a padded output spans, gaps included;
so neither is copied in the timed call's wall time. Only a layout that overlaps, or whose span is
more than a quarter larger than its values (``tensor_files.spanned``), is copied row-major first. The
leaves are independent, so a GPU hashes them all at once (``digest_kernel.py``: one read of the
output, checked once per process against ``hashlib`` before it is used); on a CPU, and for small
outputs, ``hashlib`` hashes each leaf.
The second level is why a large output's digest is cheap: a 6 GB output has 50 MB of leaf hashes,
which the host would take a tenth of a second to copy and hash, and 400 KB of second-level ones.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from typing import Any

import torch

from kernelevo.sandbox import tensor_files
from kernelevo.sandbox.tensor_files import storage_order

LEAF_BYTES = 4096
DIGEST_LANES = 4
"""The digest as four 64-bit integers (the 32 bytes of the root hash)."""
KERNEL_FROM_BYTES = 1 << 20
"""Outputs of at least this many bytes on a GPU are hashed there (``digest_kernel.py``, well under a
millisecond); smaller ones are copied to the host and hashed by ``hashlib`` (under a millisecond
too). A digest on the host for large outputs would take tens of milliseconds per call, wall time that
would widen the share of the reference's unexplained time a candidate's calls are allowed."""
HEADER = b"kernelevo output digest, SHA-256 tree, 4096-byte leaves\0"


def own_strides(value: torch.Tensor) -> list[int] | None:
    """The strides that say how ``value``'s bytes are hashed: None for a contiguous tensor (asked at
    once: every timed call's output is), else its own."""
    return None if value.is_contiguous() else list(value.stride())


def output_bytes(value: torch.Tensor, strides: list[int] | None = None) -> torch.Tensor:
    """The tensor's bytes, as a 1-D uint8 tensor on its device, in the order a tensor file of
    ``strides`` holds them (row-major where None): with its dimensions in their order in memory where
    a permutation makes it dense (``storage_order``); the storage it spans, gaps included, where it is
    ``spanned`` (``value`` must then lie at those strides); else row-major. A view where the tensor lies
    so, else a copy; a bool as 0 or 1, whatever byte holds it."""
    value = value.detach()
    order = storage_order(value.shape, strides) if strides is not None else None
    if order:
        return tensor_files.byte_view(value.permute(order).reshape(-1))
    if strides is not None and tensor_files.spanned(value.shape, strides):
        if list(value.stride()) != list(strides):
            raise ValueError(f"a tensor at strides {value.stride()} hashed as one at {strides}")
        return tensor_files.byte_view(tensor_files.span_view(value))
    return tensor_files.byte_view(value.reshape(-1))


def layout_words(shape: Any, strides: list[int] | None) -> bytes:
    """What the header says of the layout the bytes were taken in (nothing for row-major)."""
    if strides is None:
        return b""
    order = storage_order(shape, strides)
    if order:
        return f" in memory order {tuple(order)}".encode()
    span = tensor_files.spanned(shape, strides)
    return f" spanning {span} at strides {tuple(int(s) for s in strides)}".encode() if span else b""


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


def _header(seed: int, index: int, size: int, dtype: Any, shape: Any, strides: list[int] | None) -> bytes:
    named = HEADER + struct.pack("<QqQ", seed % (1 << 64), index, size) + f"{dtype}{tuple(shape)}".encode()
    return named + layout_words(shape, strides)


def _lanes(root: bytes) -> list[int]:
    return [int.from_bytes(root[8 * k:8 * k + 8], "little") for k in range(DIGEST_LANES)]


def tensor_digest(value: Any, seed: int, index: int, strides: list[int] | None | str = "own") -> list[int]:
    """The digest of output ``index`` of a call made with ``seed`` (see the module), its bytes taken
    as a tensor file of ``strides`` holds them (``"own"``: ``value``'s own layout; the oracle passes
    the strides the output's file names, which it was read back at); zeros for something that is not
    a tensor."""
    if not isinstance(value, torch.Tensor):
        return [0] * DIGEST_LANES
    strides = own_strides(value) if strides == "own" else strides
    data = output_bytes(value, strides)
    second = level_hashes(level_hashes(data)).cpu().numpy().tobytes()
    header = _header(seed, index, data.numel(), value.dtype, value.shape, strides)
    return _lanes(hashlib.sha256(header + second).digest())


FANOUT = LEAF_BYTES // 32
"""Leaf hashes in one leaf of the second level."""


def leaf_count(size: int) -> int:
    """Leaves of a level of ``size`` bytes (the last may be shorter)."""
    return -(-size // LEAF_BYTES)


def leaves_within(leaves: list[int], size: int) -> list[int]:
    """The asked leaves an output of ``size`` bytes, as hashed, has: leaves are drawn before its layout
    is known, over as many bytes as a padded layout may span, and the rest are dropped on both sides."""
    return [k for k in leaves if k < leaf_count(size)]


def _piece(size: int, k: int) -> slice:
    """Leaf ``k`` of a level of ``size`` bytes."""
    return slice(k * LEAF_BYTES, min(size, (k + 1) * LEAF_BYTES))


def proof_bytes(size: int, leaves: list[int]) -> int:
    """The length of :func:`leaf_proof`'s answer for an output of ``size`` bytes."""
    first = 32 * leaf_count(size)
    total = 32 * leaf_count(first)
    for k in leaves:
        piece, chunk = _piece(size, k), _piece(first, k // FANOUT)
        total += (chunk.stop - chunk.start) + (piece.stop - piece.start)
    return total


def leaf_proof(value: torch.Tensor, leaves: list[int]) -> torch.Tensor:
    """What proves some leaves of an output to its digest without shipping all of it: the second level
    of the tree, then for each leaf asked for, the first-level leaf holding its hash and its own bytes
    (1-D uint8 on the host). The asker draws the leaves after the digest was given: a tree that was
    fixed then either holds the right bytes in them or does not."""
    data = output_bytes(value, own_strides(value))
    first = level_hashes(data)
    parts = [level_hashes(first).cpu()]
    for k in leaves:
        parts += [first[_piece(first.numel(), k // FANOUT)].cpu(), data[_piece(data.numel(), k)].cpu()]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.uint8)


def open_leaf_proof(proof: bytes, seed: int, index: int, size: int, dtype: Any, shape: Any,
                    leaves: list[int], strides: list[int] | None = None) -> tuple[list[int], list[bytes]] | str:
    """Check a :func:`leaf_proof` against the tree it claims (an output of ``size`` bytes, ``dtype`` and
    ``shape``, hashed at ``strides``): every leaf's bytes hash to the hash the first level holds for
    it, every first-level leaf to its hash in the second level. Returns the digest that second level
    gives (for the caller to hold against the one committed to) and each leaf's bytes; or, if the
    proof is inconsistent, why."""
    if len(proof) != proof_bytes(size, leaves):
        return f"the proof holds {len(proof)} bytes, not {proof_bytes(size, leaves)}"
    first = 32 * leaf_count(size)
    at = 32 * leaf_count(first)
    second, found = proof[:at], []
    for k in leaves:
        chunk = _piece(first, k // FANOUT)
        hashes = proof[at:at + chunk.stop - chunk.start]
        at += chunk.stop - chunk.start
        piece = _piece(size, k)
        leaf = proof[at:at + piece.stop - piece.start]
        at += piece.stop - piece.start
        j = k // FANOUT
        if hashlib.sha256(hashes).digest() != second[32 * j:32 * j + 32]:
            return f"leaf {k}: its first-level hashes are not the ones the second level holds"
        slot = 32 * (k % FANOUT)
        if hashlib.sha256(leaf).digest() != hashes[slot:slot + 32]:
            return f"leaf {k}: its bytes are not the ones the tree holds"
        found.append(leaf)
    return _lanes(hashlib.sha256(_header(seed, index, size, dtype, shape, strides) + second).digest()), found
