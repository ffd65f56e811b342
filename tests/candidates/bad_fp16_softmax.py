"""softmax: computes in fp32 and rounds the result to fp16 before returning it as fp32 (class 11 of
the judge review). The error, about 2e-4 relative, fits the 1e-4 tolerance on many input sets and
failed only with more seeds; the precision rule compares it with eager's own error against float64
and rejects it on every run."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * n_cols + cols, y.to(tl.float16).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[-1], BLOCK=triton.next_power_of_2(x.shape[-1]))
        return y
