"""relu: reads every value into Python (``unbind`` and ``float()``), computes there, and copies the
result back with a kernel (class 7 of the judge review); a strict candidate may read only a few
values into Python per call."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        values = [max(float(v), 0.0) for v in x.reshape(-1).unbind(0)]
        staged = torch.tensor(values, dtype=x.dtype, device=x.device).view(x.shape)
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](staged, y, x.numel(), BLOCK=1024)
        return y
