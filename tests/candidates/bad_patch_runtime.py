"""relu: the same patching, for the runtime defences alone (loophole 8, run without static checks)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def launch_copy(x, y):
    copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)


torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        launch_copy(x, y)
        return y
