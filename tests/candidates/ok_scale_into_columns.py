"""wide_scale: the kernel writes ``2 * x`` transposed, into a (cols, rows) buffer, and ``forward``
returns ``buffer.T``: the right values, column-major. Honest: accepted, and its timed calls' digests
cost what a contiguous output's do (the digest hashes the buffer in the order it lies)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_into_columns_kernel(x_ptr, t_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # One tile of x, read along its rows and written along the buffer's: Triton stages the tile
    # through shared memory so both the load and the store are coalesced.
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * n_cols + cols[None, :], mask=mask)
    tl.store(t_ptr + cols[None, :].to(tl.int64) * n_rows + rows[:, None], x * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        buffer = torch.empty(cols, rows, dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(rows, 64), triton.cdiv(cols, 64))
        scale_into_columns_kernel[grid](x, buffer, rows, cols, BLOCK_R=64, BLOCK_C=64)
        return buffer.T
