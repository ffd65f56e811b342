"""softmax_rand_by_hand (tests/fixtures/tasks): exp then divide by the row's sum, no max subtracted, as
the reference computes it. Honest: on the large-values set it overflows where eager does, and its
finite values where the row's sum overflowed are eager's (0), which stay an answer there."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(s_ptr, out_ptr, C, BC: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BC)
    s = tl.load(s_ptr + row * C + cols, mask=cols < C, other=float("-inf"))  # exp(-inf) = 0 past the row
    e = tl.exp(s)
    tl.store(out_ptr + row * C + cols, e / tl.sum(e, axis=0), mask=cols < C)


class ModelNew(nn.Module):
    def forward(self, s):
        s = s.contiguous()
        rows, C = s.shape
        out = torch.empty_like(s)
        softmax_kernel[(rows,)](s, out, C, BC=triton.next_power_of_2(C))
        return out
