"""conv_relu_scale (partial allowed): every call a Triton kernel folds the per-channel scale into the
convolution's weights and bias, into buffers kept from call to call; torch runs the convolution. The
kernel's result is the same on every call, so the keep ghost call (tensors from before the call kept)
is correct: nothing tells its work from a kernel that does nothing and hands torch its weights
(bad_weights_through_a_noop). Rejected, with the advice that such work belongs in __init__."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def fold_kernel(w_ptr, b_ptr, s_ptr, wo_ptr, bo_ptr, per_channel, channels, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < per_channel
    s = tl.load(s_ptr + c)
    w = tl.load(w_ptr + c * per_channel + offs, mask=mask)
    tl.store(wo_ptr + c * per_channel + offs, w * s, mask=mask)
    tl.store(bo_ptr + c, tl.load(b_ptr + c) * s)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.w_folded = None
        self.b_folded = None

    def forward(self, x):
        w = self.conv.weight
        c = w.shape[0]
        per_channel = w[0].numel()
        if self.w_folded is None:
            self.w_folded = torch.empty_like(w)
            self.b_folded = torch.empty(c, device=w.device, dtype=w.dtype)
        fold_kernel[(c,)](w, self.bias, self.scale, self.w_folded, self.b_folded, per_channel, c,
                          BLOCK=triton.next_power_of_2(per_channel))
        y = F.conv2d(x, self.w_folded, self.b_folded, padding=1)
        return torch.relu(y) + x
