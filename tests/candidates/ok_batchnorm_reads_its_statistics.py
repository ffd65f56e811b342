"""batchnorm_eval (tests/fixtures/tasks): BatchNorm2d in eval mode, honest: one program per
(sample, channel) plane reads that channel's running mean and variance, weight and bias. Accepted
with the statistics the judge redraws (the constructor's zeros and ones vary in a trained network)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, y_ptr, channels, plane, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    c = pid % channels
    scale = tl.load(w_ptr + c) / tl.sqrt(tl.load(var_ptr + c) + eps)
    shift = tl.load(b_ptr + c) - tl.load(mean_ptr + c) * scale
    for start in range(0, plane, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < plane
        x = tl.load(x_ptr + pid * plane + offs, mask=mask)
        tl.store(y_ptr + pid * plane + offs, x * scale + shift, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        bn = self.bn
        bn_kernel[(n * c,)](x, bn.running_mean, bn.running_var, bn.weight, bn.bias, y, c, x[0, 0].numel(), bn.eps,
                            BLOCK=256)
        return y
