"""conv_relu_scale (partial allowed): all the work in torch, its bias and scale read from one packed
tensor; a kernel that writes nothing is handed two detached views of the pack (no ``_base``). The
blank ghost call once put back only the first view it zeroed, and the keep call then ran on a zero
scale; storages are now kept and put back whole, so the keep call's output is correct."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def touch_kernel(a_ptr, b_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(a_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < 0)  # never stores
    tl.store(b_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < 0)  # never stores


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.c = channels
        self.pack = None

    def forward(self, x):
        c = self.c
        if self.pack is None:
            self.pack = torch.cat([self.bias.reshape(-1), self.scale.reshape(-1)])
        touch_kernel[(1,)](self.pack[:1].detach(), self.pack[c:].detach(), BLOCK=16)
        y = F.conv2d(x, self.conv.weight, padding=1)
        bias = self.pack[:c].reshape(c, 1, 1)
        scale = self.pack[c:].reshape(c, 1, 1)
        return torch.relu(y + bias) * scale + x
