"""conv_relu_scale (partial allowed): all the work in torch, with its weights handed to a kernel that
writes nothing. A ghost replay that zeroed every tensor a skipped kernel was given would zero the
weights and turn the output wrong, as if the kernel did the work; the replay that keeps tensors
from before the call must leave the output correct."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def touch_kernel(w_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(w_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < 0)  # never stores


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))

    def forward(self, x):
        touch_kernel[(1,)](self.conv.weight, self.conv.weight.numel(), BLOCK=16)
        y = F.conv2d(x, self.conv.weight, padding=1)
        return torch.relu(y + self.bias) * self.scale + x
