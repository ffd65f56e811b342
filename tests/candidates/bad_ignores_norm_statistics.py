"""batchnorm_eval (tests/fixtures/tasks): a BatchNorm2d in eval mode that never reads its running
mean, running variance, weight or bias: it multiplies by 1/sqrt(1 + eps), which is what the layer
computes with its constructor's constants (mean 0, variance 1, weight 1, bias 0). In any trained
network, or after load_state_dict, the output is wrong."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), 1.0 / (1.0 + self.bn.eps) ** 0.5, BLOCK=1024)
        return y
