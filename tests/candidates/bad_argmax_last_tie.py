"""row_argmax: last index of the maximum on ties; right whenever values are distinct (loophole 10)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_idx = tl.full([BLOCK], 2147483647, tl.int64)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
        take = x >= best
        best_idx = tl.where(take, cols.to(tl.int64), best_idx)
        best = tl.where(take, x, best)
    row_max = tl.max(best, axis=0)
    idx = tl.max(tl.where(best == row_max, best_idx, -1), axis=0)
    tl.store(out_ptr + row, idx)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=torch.int64, device=x.device)
        argmax_kernel[(rows,)](x, out, cols, BLOCK=1024)
        return out
