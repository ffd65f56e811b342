"""batchnorm_eval (tests/fixtures/tasks): BatchNorm2d in eval mode with its statistics and affine parameters
folded into one scale and one shift per channel in __init__, and never again. As built they are the
constructor's zeros and ones; after a user's load_state_dict (or the judge's drawn constants, which arrive
the same way) the folded copy is stale and the output wrong."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        self.fold()


    def fold(self) -> None:
        bn = self.bn
        with torch.no_grad():
            scale = bn.weight * (bn.running_var + bn.eps) ** -0.5  # operators: this task is strict
            self.folded_scale, self.folded_shift = scale.clone(), (bn.bias - bn.running_mean * scale).clone()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        affine_kernel[(n * c,)](x, self.folded_scale.to(x.device), self.folded_shift.to(x.device), y, c,
                                x[0, 0].numel(), BLOCK=256)
        return y
