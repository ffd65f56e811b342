"""batchnorm_eval (tests/fixtures/tasks): honest. BatchNorm2d in eval mode folded into one scale and one shift
per channel in __init__, and folded again by a load_state_dict post-hook whenever a state is loaded (as
a checkpoint, or the judge's drawn constants, arrive): the kernel reads two values per channel."""

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
        self.register_load_state_dict_post_hook(lambda module, keys: module.fold())

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
