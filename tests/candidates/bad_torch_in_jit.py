"""softmax: under the CPU interpreter a ``@triton.jit`` body is plain Python, so it calls torch from
inside the "kernel" (class 5 of the judge review); ops inside launches are recorded too."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BOX = {}


@triton.jit
def cheat_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    BOX["y"].copy_(torch.softmax(BOX["x"], -1))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        BOX["x"], BOX["y"] = x, y
        cheat_kernel[(1,)](x, y, x.numel(), BLOCK=16)
        return y
