"""softmax: a launch that always raises, caught narrowly; torch computes instead (loophole 2, runtime)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch_copy(x, y):
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        try:
            copy_kernel[(1,)](x, y)  # wrong arguments: always raises TypeError
        except TypeError:
            y = x.softmax(-1)
        return y
