"""softplus_by_hand (tests/fixtures/tasks): softplus in its stable form, max(x, 0) + log1p(exp(-|x|)),
times w. Honest: equal to log1p(exp(x)) in exact arithmetic, and finite where eager's exp overflows."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softplus_kernel(x_ptr, w_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    w = tl.load(w_ptr + offs % cols, mask=mask)
    sp = tl.maximum(x, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x)))
    tl.store(y_ptr + offs, sp * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.w = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softplus_kernel[(triton.cdiv(x.numel(), 1024),)](x, self.w, y, x.numel(), x.shape[-1], BLOCK=1024)
        return y
