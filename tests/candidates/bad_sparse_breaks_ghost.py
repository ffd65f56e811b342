"""conv_relu_scale (partial allowed): bad_dead_kernel plus a sparse tensor kept on the model. The
ghost replay's list of the tensors alive once raised on it, both ghost calls failed, and a failed
ghost call read as a pass; now a tensor without storage is skipped, a fault of the replay's own
rejects, and the dead kernel is seen."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.tag = torch.zeros(1).to_sparse()

    def forward(self, x):
        scratch = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x.contiguous(), scratch, x.numel(), BLOCK=1024)  # dead
        y = F.conv2d(x, self.conv.weight, padding=1)
        return torch.relu(y + self.bias) * self.scale + x
