"""wide_scale: the kernel writes ``2 * x`` into a buffer whose rows are padded by a quarter (the widest
padding carried as the storage it spans), and ``forward`` returns ``buffer[:, :cols]``: the right values
in a layout with gaps.
Honest: accepted, and its timed calls' digests cost what a contiguous output's do (the digest hashes the
storage the output spans, gaps included, where it lies; a row-major copy of 2 GiB would not fit the
clock's allowance)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_into_padded_rows_kernel(x_ptr, out_ptr, n, n_cols, pitch, BLOCK: tl.constexpr):
    # Each program scales BLOCK consecutive values of x (16 bytes a thread, coalesced) and stores them
    # at the same column of the padded row: reads n * 4 bytes, writes as many.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + (offs // n_cols) * pitch + offs % n_cols, x * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        pitch = cols + cols // 4
        buffer = torch.empty(rows, pitch, dtype=x.dtype, device=x.device)
        block = 4096
        scale_into_padded_rows_kernel[(triton.cdiv(x.numel(), block),)](x, buffer, x.numel(), cols, pitch,
                                                                         BLOCK=block)
        return buffer[:, :cols]
