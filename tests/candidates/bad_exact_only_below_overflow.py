"""exp_gate (tests/fixtures/tasks/exp_gate.py): computes exp(clamp(x, -6, 6)) * w + b: right for the
inputs randn draws (|x| > 6 about once in 5e8 values) and wrong for every |x| > 6. On the large-values
set eager's output holds infinities; the rest of that set shows the clamp."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gate_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    c = offs % cols
    w = tl.load(w_ptr + c, mask=mask)
    b = tl.load(b_ptr + c, mask=mask)
    x = tl.minimum(tl.maximum(x, -6.0), 6.0)
    tl.store(y_ptr + offs, tl.exp(x) * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.w = nn.Parameter(torch.randn(cols))
        self.b = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gate_kernel[(triton.cdiv(n, 1024),)](x, self.w, self.b, y, n, x.shape[-1], BLOCK=1024)
        return y
