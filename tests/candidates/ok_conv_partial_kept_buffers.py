"""conv_relu_scale (partial allowed): torch's convolution and a Triton epilogue that writes into an
output buffer kept from call to call, reading its bias and scale from the parameters: state from
before the call is honest, and without the kernel the output is stale or zero, so wrong."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def epilogue_kernel(y_ptr, x_ptr, bias_ptr, scale_ptr, out_ptr, n, hw, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // hw) % channels
    y = tl.load(y_ptr + offs, mask=mask)
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + c, mask=mask)
    s = tl.load(scale_ptr + c, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(y + b, 0.0) * s + x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        y = F.conv2d(x, self.conv.weight, padding=1)
        if self.out is None or self.out.shape != y.shape:
            self.out = torch.empty_like(y)
        n = y.numel()
        hw = y.shape[2] * y.shape[3]
        epilogue_kernel[(triton.cdiv(n, 1024),)](y, x, self.bias, self.scale, self.out, n, hw, y.shape[1],
                                                 BLOCK=1024)
        return self.out
