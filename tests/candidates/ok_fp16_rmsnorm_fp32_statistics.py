"""fp16_rmsnorm_naive (tests/fixtures/tasks): RMSNorm with its statistics in fp32, the honest kernel: more
exact than eager where eager's fp16 x.pow(2) overflows and its output is zeros."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    tl.store(y_ptr + row * cols + c, (x * r * w).to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(cols))
        self.eps = eps

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        cols = x2.shape[1]
        rms_kernel[(x2.shape[0],)](x2, self.weight, y, cols, self.eps, BLOCK=triton.next_power_of_2(cols))
        return y.view(x.shape)
