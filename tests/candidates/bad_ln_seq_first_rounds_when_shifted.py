"""layernorm_seq_first: a two-pass LayerNorm that rounds every row to 8 bits of mantissa once some row's
mean is more than 50 times its range (the shifted set), returned (S, B, D) from a (B, S, D) input. The
input's rows lie across the output's first two dims in the other order: the groups must find them
there, not in the leading dims whose sizes multiply to the same count."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

KEEP = 8  # mantissa bits kept (fp16 keeps 10, bf16 7)


@triton.jit
def flag_kernel(x_ptr, flag_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    hi = tl.max(tl.where(mask, x, float("-inf")), axis=0)
    lo = tl.min(tl.where(mask, x, float("inf")), axis=0)
    big = tl.where(tl.abs(mean) > 50.0 * (hi - lo), 1, 0)
    tl.atomic_max(flag_ptr, big)


@triton.jit
def ln_kernel(x_ptr, w_ptr, b_ptr, y_ptr, flag_ptr, n_cols, eps, BLOCK: tl.constexpr, KEEP: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    y = d * rstd * w + b
    flag = tl.load(flag_ptr)
    yb = y.to(tl.int32, bitcast=True)
    yr = ((yb + (1 << (22 - KEEP))) & ~((1 << (23 - KEEP)) - 1)).to(tl.float32, bitcast=True)
    y = tl.where(flag > 0, yr, y)
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


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
        nb, ns, _ = x.shape
        x = x.contiguous().reshape(-1, x.shape[-1])
        rows, cols = x.shape
        y = torch.empty_like(x)
        flag = torch.zeros(1, device=x.device, dtype=torch.int32)
        B = triton.next_power_of_2(cols)
        flag_kernel[(rows,)](x, flag, cols, BLOCK=B)
        ln_kernel[(rows,)](x, self.weight, self.bias, y, flag, cols, self.eps, BLOCK=B, KEEP=KEEP)
        return y.reshape(nb, ns, cols).transpose(0, 1).contiguous()
