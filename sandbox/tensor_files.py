"""Tensors as files between processes: raw bytes in row-major order, in the order a permuted dense
tensor lies in memory, or as the storage a padded tensor spans, gaps included (which of these, its
strides alone say), with the dtype and shape a reader needs and the strides the producer's tensor had.

Imported on both sides of the trust boundary; it decides nothing. The reader opens a file without
following links and checks its kind and size before reading a byte.

Why staged through one page-locked buffer: a task's output can be gigabytes, and every checked
output crosses as a file. A device tensor goes to the host in slices copied into a pinned buffer
(at the bus's speed, with no page faults), and each slice is written or read with plain system
calls on that buffer; a fresh pageable host copy per slice, as ``tensor.cpu()`` makes, costs a
page fault per 4 KB and the driver's own bounce copy. ``bench/tensor_file_probe.py`` measures both
ways. Slices keep the host copy small: it counts against the candidate process's memory limit.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

ITEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
              "int8": 1, "uint8": 1, "bool": 1}
"""Bytes per value of each dtype a tensor file may declare, by the name torch prints without its prefix."""
DTYPES = tuple(ITEM_BYTES)

SLICE_BYTES = 64 << 20
"""Tensor files are written and read in slices of this size, so neither side holds a whole copy on the host."""


class TensorFile(BaseModel):
    """One tensor written to a file: what the reader needs, and the producer's layout."""

    file: str
    """The file's name inside the producer's exchange folder (no path: the reader joins it)."""
    dtype: str
    shape: list[int]
    strides: list[int] = Field(default_factory=list)
    """The producer tensor's strides in elements. Where they lay it out densely in another order than
    row-major (``storage_order``: ``buffer.T``, ``permute``), the file holds its bytes as they lie, with
    no copy on the producer's device (a copy is a kernel, which a forensic trace of the producer would
    count as its work), and the reader gives back a tensor of that layout; so too where they leave gaps
    and no overlaps in a span of at most ``SPAN_FACTOR`` times the values (``spanned``: the file holds
    that span, gaps included)."""
    storage_offset: int = 0
    device: str = "cpu"
    type_name: str = "Tensor"
    """The producer object's class name: only a plain ``Tensor`` is an acceptable output."""


_staging: list[Any] = []


def _staging_buffer() -> Any:
    """This process's one host buffer of ``SLICE_BYTES`` for slices of device tensors, made on first use:
    page-locked where the driver grants it (pageable otherwise, which is only slower)."""
    import torch

    if not _staging or _staging[0].numel() < SLICE_BYTES:
        try:
            buffer = torch.empty(SLICE_BYTES, dtype=torch.uint8, pin_memory=True)
        except RuntimeError:
            buffer = torch.empty(SLICE_BYTES, dtype=torch.uint8)
        _staging[:] = [buffer]
    return _staging[0]


def _host_slices(raw: Any) -> Any:
    """``raw``'s bytes (a flat uint8 tensor) as host memoryviews of at most ``SLICE_BYTES`` each; a
    view is valid until the next one is taken (device slices share the staging buffer)."""
    for start in range(0, raw.numel(), SLICE_BYTES):
        piece = raw[start:start + SLICE_BYTES]
        if raw.device.type != "cpu":
            piece = _staging_buffer()[:piece.numel()].copy_(piece)  # synchronous: on the host after it
        yield memoryview(piece.numpy()).cast("B")


def byte_view(flat: Any, any_bool_byte: bool = False) -> Any:
    """A 1-D tensor's values as a 1-D uint8 tensor in their order: a view where its elements lie one
    after another, else a copy. Not ``contiguous()``: it leaves a tensor of one element as it is,
    whatever its stride, and a byte view needs a stride of one. A bool is 0 or 1 (a copy), whatever
    byte holds it, unless ``any_bool_byte`` (a file: its reader makes every nonzero byte True)."""
    import torch

    dense = flat if flat.stride(0) == 1 else flat.clone(memory_format=torch.contiguous_format)
    if dense.dtype == torch.bool and not any_bool_byte:
        return dense.to(torch.uint8)
    return dense.view(torch.uint8)


Order = tuple[int, ...] | None
"""The dimensions of a tensor from outermost to innermost in memory, where that is not row-major (None:
row-major, or a layout no permutation makes dense)."""


def storage_order(shape: Sequence[int], strides: Sequence[int]) -> Order:
    """The order, outermost first, in which a tensor of ``shape`` and ``strides`` lies densely in
    memory, where it is not row-major and a permutation of its dimensions makes it contiguous; otherwise
    None. A pure function of the layout (torch's contiguity, which passes over dimensions of one
    value): a reader finds the same order from the strides a file names, which need not be any tensor's."""
    if len(shape) != len(strides) or len(shape) < 2 or any(int(s) < 0 for s in strides) or 0 in shape:
        return None
    if _dense(shape, strides, range(len(shape))):
        return None
    order = tuple(sorted(range(len(shape)), key=lambda d: (-int(strides[d]), d)))
    return order if _dense(shape, strides, order) else None


def _dense(shape: Sequence[int], strides: Sequence[int], order: Sequence[int]) -> bool:
    """Do the dimensions in ``order``, outermost first, lay the values out one after another?"""
    step = 1
    for d in reversed(order):
        if int(shape[d]) != 1:
            if int(strides[d]) != step:
                return False
            step *= int(shape[d])
    return True


def inverse(order: Sequence[int]) -> list[int]:
    """The permutation that puts dimensions taken in ``order`` back in their own order."""
    return sorted(range(len(order)), key=order.__getitem__)


SPAN_FACTOR = 1.25
"""A layout with gaps and no overlaps whose storage span is at most this many times its values (padded
rows, a slice of a slightly wider buffer) is carried as that span, gaps included, and read back at its
strides. Hashing the gaps costs a timed call wall time the reference's contiguous output does not; a
quarter more bytes hashed costs well under a row-major copy, which reads and writes every value;
wider gaps are copied."""


def spanned(shape: Sequence[int], strides: Sequence[int]) -> int | None:
    """The elements of storage a layout with gaps but no overlaps reaches, first to last, where that is
    at most ``SPAN_FACTOR`` times its values; None for any other layout (dense in some order,
    overlapping, too sparse, or not one a tensor can have). No overlaps: with its dimensions of more
    than one value taken from the smallest stride up, each stride clears everything the dimensions
    inside it reach, so every place in the span holds at most one value, found by division."""
    if len(shape) != len(strides) or any(int(s) < 0 for s in strides) or any(int(d) < 1 for d in shape):
        return None
    reach = 1
    for d in sorted((d for d in range(len(shape)) if int(shape[d]) > 1), key=lambda d: int(strides[d])):
        if int(strides[d]) < reach:
            return None
        reach += (int(shape[d]) - 1) * int(strides[d])
    values = math.prod(int(d) for d in shape)
    # no gaps (reach == values) is a dense layout, in row-major or another order; exact: both below 2^53
    return reach if values < reach <= SPAN_FACTOR * values else None


def file_elements(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The values a tensor file of this layout holds: its span where ``spanned``, else one a value."""
    span = spanned(shape, strides)
    return span if span is not None else math.prod(max(int(d), 0) for d in shape)


def span_view(t: Any) -> Any:
    """The storage a ``spanned`` tensor reaches, as a 1-D view from its first value (no copy)."""
    import torch

    return torch.as_strided(t, (spanned(t.shape, t.stride()),), (1,), t.storage_offset())


GATHER_ON_HOST_BYTES = 1 << 30
"""A device tensor with gaps or overlaps whose storage span and row-major copy each fit this many bytes
is made row-major on the host, from a memory copy of that span (no kernel); a larger one is copied
by a kernel on its device, which a forensic trace of the writer counts as its work. Both are held in
the writer's memory at once."""


def storage_span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements of storage a non-empty tensor's layout reaches from its offset, the first to the last."""
    return 1 + sum((int(d) - 1) * int(s) for d, s in zip(shape, strides))


def _row_major(t: Any) -> Any:
    """``t`` laid out row-major with a stride of one, made on a device without a kernel where the span
    and the copy fit ``GATHER_ON_HOST_BYTES`` (a single value too: its stride may be anything)."""
    import torch

    if t.device.type == "cpu" or not t.numel() or (t.is_contiguous() and t.numel() > 1):
        return torch.Tensor.contiguous(t)
    span = storage_span(t.shape, t.stride())
    if max(span, t.numel()) * t.element_size() > GATHER_ON_HOST_BYTES:
        return torch.Tensor.contiguous(t)
    return gathered_on_host(t, span)


def gathered_on_host(t: Any, span: int) -> Any:
    """``t``'s values row-major on the host, gathered there from a copy of the ``span`` elements of
    storage its layout reaches from its offset (a memory copy: no kernel on ``t``'s device)."""
    import torch

    storage = torch.empty(span, dtype=t.dtype)
    storage.copy_(torch.as_strided(t, (span,), (1,), t.storage_offset()))
    return torch.as_strided(storage, t.shape, t.stride(), 0).contiguous()


def _gaps_zeroed(t: Any) -> Any:
    """A ``spanned`` tensor's span, its values in place and zeros between them (a copy)."""
    import torch

    span = torch.zeros(spanned(t.shape, t.stride()), dtype=t.dtype, device=t.device)
    torch.as_strided(span, t.shape, t.stride(), 0).copy_(t)
    return span


def write_tensor(t: Any, folder: Path, name: str, zero_gaps: bool = False) -> TensorFile:
    """Write tensor ``t``'s values to ``folder/name``: as they lie where ``t`` is a permuted dense
    tensor; its storage span, gaps included, where it is ``spanned``; else row-major (a layout that
    overlaps or is sparser, gathered on the host: ``_row_major``). ``zero_gaps``: a span's gaps are
    written as zeros, not as what the writer's memory held there (a trusted writer's, sent to a
    candidate)."""

    t = t.detach()
    order = storage_order(t.shape, t.stride())
    meta = TensorFile(file=name, dtype=str(t.dtype).removeprefix("torch."), shape=list(t.shape),
                      strides=list(t.stride()), storage_offset=int(t.storage_offset()), device=t.device.type,
                      type_name=type(t).__name__)
    if order:
        flat = t.permute(order).reshape(-1)
    elif spanned(t.shape, t.stride()):
        flat = _gaps_zeroed(t) if zero_gaps else span_view(t)
    else:
        flat = _row_major(t).reshape(-1)
    raw = byte_view(flat, any_bool_byte=True)
    path = folder / name
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb", buffering=0) as handle:
        for view in _host_slices(raw):
            while view:  # a write may take fewer bytes than offered
                view = view[handle.write(view):]
    tmp.replace(path)
    return meta


def nbytes(dtype: str, shape: list[int]) -> int:
    """The bytes a tensor of ``dtype`` and ``shape`` holds (a dtype outside ``DTYPES``: 8 a value)."""
    count = 1
    for d in shape:
        count *= max(int(d), 0)
    return count * ITEM_BYTES.get(dtype, 8)


def _expected_bytes(meta: TensorFile, limit: int) -> tuple[int, int]:
    """``(elements, bytes)`` the file must hold, after refusing a malformed or oversized entry (the
    limit is on the tensor's values; a spanned file holds at most ``SPAN_FACTOR`` times their bytes)."""
    if meta.dtype not in DTYPES:
        raise ValueError(f"dtype {meta.dtype!r} is not one a tensor file may carry")
    if "/" in meta.file or meta.file in {"", ".", ".."} or any(d < 0 for d in meta.shape):
        raise ValueError(f"a malformed tensor file entry ({meta.file!r}, shape {meta.shape})")
    if nbytes(meta.dtype, meta.shape) > limit:
        raise ValueError(f"a tensor of {nbytes(meta.dtype, meta.shape)} bytes is over the limit of {limit}")
    elements = file_elements(meta.shape, meta.strides)
    return elements, elements * ITEM_BYTES[meta.dtype]


def _fill(fd: int, raw: Any, name: str) -> None:
    """Read the open file into flat uint8 tensor ``raw``, slice by slice (through the staging buffer
    where ``raw`` lives on a device)."""
    staged = raw.device.type != "cpu"
    for start in range(0, raw.numel(), SLICE_BYTES):
        target = raw[start:start + SLICE_BYTES]
        host = _staging_buffer()[:target.numel()] if staged else target
        view = memoryview(host.numpy()).cast("B")
        while view:
            got = os.readv(fd, [view])
            if got == 0:
                raise ValueError(f"{name} ended early (it was changed while being read)")
            view = view[got:]
        if staged:
            target.copy_(host)  # synchronous: the buffer is free again after it


def read_tensor(meta: TensorFile, folder: Path, device: str, limit: int) -> Any:
    """Read a tensor file written by another process: the name must be a plain file in ``folder``
    (no links, no other folders), its size must match its dtype and shape, and stay under ``limit``."""
    import torch

    numel, expected = _expected_bytes(meta, limit)
    # O_NONBLOCK: a FIFO named as an output opens at once (and fails the plain-file check below)
    # instead of blocking the reader until someone writes to it.
    fd = os.open(folder / meta.file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{meta.file} is not a plain file")
        if info.st_nlink != 1:  # a hard link to a file of the reader's (a reader may be root)
            raise ValueError(f"{meta.file} is linked elsewhere ({info.st_nlink} links): not a file its writer made")
        if info.st_size != expected:
            raise ValueError(f"{meta.file} holds {info.st_size} bytes; {meta.dtype} {meta.shape} needs {expected}")
        raw = torch.empty(expected, dtype=torch.uint8, device=device)
        _fill(fd, raw, meta.file)
    finally:
        os.close(fd)
    if meta.dtype == "bool":
        flat = raw.to(torch.bool)
    else:
        flat = raw.view(getattr(torch, meta.dtype)) if numel else torch.empty(0, dtype=getattr(torch, meta.dtype),
                                                                                device=device)
    order = storage_order(meta.shape, meta.strides)
    if spanned(meta.shape, meta.strides):
        return torch.as_strided(flat, meta.shape, meta.strides, 0)
    if not order:
        return flat.reshape(meta.shape)
    return flat.reshape([meta.shape[d] for d in order]).permute(inverse(order))
