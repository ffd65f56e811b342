"""conv_relu_scale (partial allowed): bad_stale_nan_link with its scratch kept as an UntypedStorage
(no tensor alive between calls for the replay to find), wrapped in a new tensor each call. The blank
ghost call zeroes the wrapper like any tensor a kernel was given: the NaN never reaches the output."""

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
        self.store = None

    def forward(self, x):
        if self.store is None:
            self.store = torch.zeros(16, device=x.device).untyped_storage()
        scratch = torch.empty(0, device=x.device).set_(self.store, 0, (16,))
        clear_kernel[(1,)](scratch, 16, BLOCK=16)
        y = F.conv2d(x, self.conv.weight, padding=1)
        out = torch.relu(y + self.bias) * self.scale + x + 0.0 * scratch.sum()
        scratch[0] = float("nan")
        return out
