"""relu_padded: relu of each value into the first of eight columns of a zeroed output (the rest stays
zero). The zeroing writes the whole output, the kernel one value in eight; it is part of every call,
as a user pays it. The honest twin of ``bad_preps_in_the_warm_call``."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

COLUMNS = 8


@triton.jit
def relu_column_kernel(x_ptr, y_ptr, n, COLUMNS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs * COLUMNS, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.numel()
        y = torch.zeros(n, COLUMNS, device=x.device, dtype=x.dtype)
        relu_column_kernel[(triton.cdiv(n, 1024),)](x, y, n, COLUMNS=COLUMNS, BLOCK=1024)
        return y
