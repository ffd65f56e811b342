"""fp16_rmsnorm_naive (tests/fixtures/tasks): RMSNorm with fp32 statistics, right, except on an input set
where some row's fp16 x.pow(2) overflows (|x| > 256): there eager's output is finite zeros (x * rsqrt(inf)),
no infinity anywhere, and eager's error (the answer's own size, 1 to 5) read as the rounding scale of the
whole output would pass anything; then every row eager gets right is written as zeros."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def flag_kernel(x_ptr, flag_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0).to(tl.float32)
    tl.atomic_max(flag_ptr, tl.where(tl.max(tl.abs(x), axis=0) > 256.0, 1, 0))


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, flag_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + row * cols + c, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    y = x * r * w
    flag = tl.load(flag_ptr)
    # wrong only in the rows eager gets right (no |x| past 256), once some row's statistics overflowed
    y = tl.where((flag > 0) & (tl.max(tl.abs(x), axis=0) <= 256.0), 0.0, y)
    tl.store(y_ptr + row * cols + c, y.to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(cols))
        self.eps = eps

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        cols = x2.shape[1]
        flag = torch.zeros(1, device=x.device, dtype=torch.int32)
        B = triton.next_power_of_2(cols)
        flag_kernel[(x2.shape[0],)](x2, flag, cols, BLOCK=B)
        rms_kernel[(x2.shape[0],)](x2, self.weight, y, flag, cols, self.eps, BLOCK=B)
        return y.view(x.shape)
