"""layernorm (builtin): honest. Two-pass LayerNorm in one Triton kernel; the affine parameters are the
module's own nn.Parameters, made as the task's Model makes them (ones and zeros, then the same randn
perturbation in the same order), instead of being held by an nn.LayerNorm. Reads both on every call."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, d * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.eps = 1e-5
        self.weight = nn.Parameter(torch.ones(cols))
        self.bias = nn.Parameter(torch.zeros(cols))
        with torch.no_grad():
            self.weight.add_(torch.randn(cols) * 0.1)
            self.bias.add_(torch.randn(cols) * 0.1)

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        ln_kernel[(rows,)](x, self.weight, self.bias, y, cols, self.eps, BLOCK=triton.next_power_of_2(cols))
        return y
