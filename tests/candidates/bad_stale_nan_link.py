"""conv_relu_scale (partial allowed): all the work in torch; a kernel zeroes a scratch kept from call
to call, and torch then puts a NaN in it for the next call. Its only link to the output is
``0.0 * scratch``: with the kernel a no-op the scratch would still hold the NaN of the last call and
the output would turn NaN, as if the kernel did the work. The ghost replay that zeroes tensors from
before the call must leave the output correct."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def clear_kernel(s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(s_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.scratch = None

    def forward(self, x):
        if self.scratch is None:
            self.scratch = torch.zeros(16, device=x.device)
        clear_kernel[(1,)](self.scratch, 16, BLOCK=16)
        y = F.conv2d(x, self.conv.weight, padding=1)
        out = torch.relu(y + self.bias) * self.scale + x + 0.0 * self.scratch.sum()
        self.scratch[0] = float("nan")
        return out
