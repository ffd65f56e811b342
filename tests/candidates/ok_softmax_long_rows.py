"""softmax over rows too long for one block (hundreds of thousands of columns).

One program per row walks the row twice in blocks: the first pass keeps a running maximum and a
running sum of exponentials, rescaling the sum whenever the maximum grows (the online softmax); the
second writes exp(x - max) / sum. Each row is read twice and written once: 12 bytes per fp32 value,
against eager's kernel that moves the same.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def long_row_softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = row * n_cols
    cols = tl.arange(0, BLOCK)
    running_max = tl.full([BLOCK], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK], tl.float32)
    for offset in range(0, n_cols, BLOCK):
        mask = offset + cols < n_cols
        x = tl.load(x_ptr + start + offset + cols, mask=mask, other=float("-inf"))
        new_max = tl.maximum(running_max, x)
        # lanes that have seen only -inf keep a zero sum (exp(-inf - -inf) would be NaN)
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
        term = tl.where(new_max == float("-inf"), 0.0, tl.exp(x - new_max))
        running_sum = running_sum * scale + term
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)
    for offset in range(0, n_cols, BLOCK):
        mask = offset + cols < n_cols
        x = tl.load(x_ptr + start + offset + cols, mask=mask, other=0.0)
        tl.store(y_ptr + start + offset + cols, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        long_row_softmax_kernel[(rows,)](x, y, cols, BLOCK=2048, num_warps=8)
        return y
