"""softmax_rand_by_hand: a row softmax (max subtracted), right, except on an input set where some row's
scores straddle exp's float32 range (its max past 88.72, its min not): there every row eager computes
right is written as the uniform 1/C, wrong by up to 0.9 where eager and float64 agree. Eager's finite
values in the straddling rows are 0 where the answer is not (finite / inf), so eager's own error, read
as the rounding scale, is about 0.9, and one slack for the whole output passes anything."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def flag_kernel(s_ptr, flag_ptr, C, BC: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BC)
    s = tl.load(s_ptr + row * C + cols, mask=cols < C, other=0.0)
    hi = tl.max(tl.where(cols < C, s, float("-inf")), axis=0)
    lo = tl.min(tl.where(cols < C, s, float("inf")), axis=0)
    tl.atomic_max(flag_ptr, tl.where((hi > 88.72) & (lo <= 88.72), 1, 0))


@triton.jit
def softmax_kernel(s_ptr, out_ptr, flag_ptr, C, BC: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BC)
    s = tl.load(s_ptr + row * C + cols, mask=cols < C, other=float("-inf"))
    e = tl.exp(s - tl.max(s, axis=0))
    p = e / tl.sum(e, axis=0)
    flag = tl.load(flag_ptr)
    # wrong only in the rows eager gets right: every exp finite (the row's max below 88.72)
    p = tl.where((flag > 0) & (tl.max(s, axis=0) <= 88.72), 1.0 / C, p)
    tl.store(out_ptr + row * C + cols, p, mask=cols < C)


class ModelNew(nn.Module):
    def forward(self, s):
        s = s.contiguous()
        rows, C = s.shape
        out = torch.empty_like(s)
        flag = torch.zeros(1, device=s.device, dtype=torch.int32)
        BC = triton.next_power_of_2(C)
        flag_kernel[(rows,)](s, flag, C, BC=BC)
        softmax_kernel[(rows,)](s, out, flag, C, BC=BC)
        return out
