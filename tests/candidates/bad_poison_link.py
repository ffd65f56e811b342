"""conv_relu_scale (partial allowed): all the work in torch, plus a kernel whose only link to the
output is ``0.0 * scratch`` (class 10 of the judge review). With the kernels off, a NaN-poisoned
scratch made the output change, which used to pass; now the kernels' buffers are zeroed instead and
the output must stop being correct."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def one_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], tl.float32) + 1.0, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))

    def forward(self, x):
        scratch = torch.empty(16, device=x.device)
        one_kernel[(1,)](scratch, 16, BLOCK=16)
        y = F.conv2d(x, self.conv.weight, padding=1)
        return torch.relu(y + self.bias) * self.scale + x + 0.0 * scratch.sum()
