"""batchnorm_eval (tests/fixtures/tasks): BatchNorm2d in eval mode folded into one scale and one shift per
channel by a kernel at the first call, and kept: right until the parameters change (a user's new
checkpoint, fine-tuning, swapped weights), stale after. The judge calls one checked set with every
parameter changed since the calls before it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fold_kernel(mean_ptr, var_ptr, w_ptr, b_ptr, scale_ptr, shift_ptr, eps):
    c = tl.program_id(0)
    scale = tl.load(w_ptr + c) / tl.sqrt(tl.load(var_ptr + c) + eps)
    tl.store(scale_ptr + c, scale)
    tl.store(shift_ptr + c, tl.load(b_ptr + c) - tl.load(mean_ptr + c) * scale)


@triton.jit
def affine_kernel(x_ptr, scale_ptr, shift_ptr, y_ptr, channels, plane, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    c = pid % channels
    scale = tl.load(scale_ptr + c)
    shift = tl.load(shift_ptr + c)
    for start in range(0, plane, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < plane
        x = tl.load(x_ptr + pid * plane + offs, mask=mask)
        tl.store(y_ptr + pid * plane + offs, x * scale + shift, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)
        self.folded = None

    def forward(self, x):
        bn = self.bn
        if self.folded is None:  # once, at the first call
            scale, shift = torch.empty_like(bn.weight), torch.empty_like(bn.bias)
            fold_kernel[(bn.weight.numel(),)](bn.running_mean, bn.running_var, bn.weight, bn.bias, scale, shift,
                                              bn.eps)
            self.folded = (scale.detach(), shift.detach())
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        affine_kernel[(n * c,)](x, self.folded[0], self.folded[1], y, c, x[0, 0].numel(), BLOCK=256)
        return y
