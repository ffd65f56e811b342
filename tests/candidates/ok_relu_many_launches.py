"""relu in sixteen Triton launches, one per slice: correct, but its host work (sixteen launches from
Python) takes several times longer than its kernels on a small input. The timed call's cover hides up
to 0.26 ms of host work; back-to-back calls cannot hide it, so the judge must count the pace."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SLICES = 16


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous().view(-1)
        y = torch.empty_like(x)
        step = triton.cdiv(x.numel(), SLICES)
        for start in range(0, x.numel(), step):
            n = min(step, x.numel() - start)
            relu_kernel[(triton.cdiv(n, 1024),)](x[start:], y[start:], n, BLOCK=1024)
        return y
