"""relu accumulated into a zeroed output with atomic adds, the way a split-K GEMM or a scatter adds
partial results: the zeroing is part of every call, as a user pays it. The honest twin of
``bad_preps_in_the_warm_call``."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.atomic_add(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        n = x.numel()
        relu_add_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y
