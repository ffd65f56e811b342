"""relu: a small constant held as a tensor and read once per call as a kernel argument
(``torch.tensor([...])`` records ``aten.detach_``, ``.item()`` one host read). Honest: accepted."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_shift_kernel(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0) + shift, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        shift = torch.tensor([0.0])
        y = torch.empty_like(x)
        relu_shift_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), float(shift.item()), BLOCK=1024)
        return y
