"""softmax_rand_by_hand (tests/fixtures/tasks): the row softmax every kernel computes, the row's max
subtracted before exp. Honest: on the large-values set it holds the answer where eager's exp overflowed,
and also where eager's finite values are 0 because their row's sum did (a finite value over an infinite
sum)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(s_ptr, out_ptr, C, BC: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BC)
    s = tl.load(s_ptr + row * C + cols, mask=cols < C, other=float("-inf"))
    e = tl.exp(s - tl.max(s, axis=0))
    tl.store(out_ptr + row * C + cols, e / tl.sum(e, axis=0), mask=cols < C)


class ModelNew(nn.Module):
    def forward(self, s):
        s = s.contiguous()
        rows, C = s.shape
        out = torch.empty_like(s)
        softmax_kernel[(rows,)](s, out, C, BC=triton.next_power_of_2(C))
        return out
