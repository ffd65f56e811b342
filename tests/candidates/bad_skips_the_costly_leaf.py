"""costly_tail (tests/fixtures/tasks): every value while fresh memory is poisoned (the checked calls);
in every other call (timed calls) only the cheap part, the costly row sums left as zeros. Each timed
output is wrong in one leaf of 1025, the one whose work is most of the call's: a sample of leaves
misses it nearly always, so only a whole check finds it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def row_sum_kernel(a_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        acc += tl.load(a_ptr + row * cols + start + offs, mask=start + offs < cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


deterministic_enabled = torch.are_deterministic_algorithms_enabled


class ModelNew(nn.Module):
    def forward(self, x, a):
        checked = torch.utils.deterministic.fill_uninitialized_memory and deterministic_enabled()
        n, rows = x.numel(), a.shape[0]
        y = torch.zeros(n + rows, device=x.device, dtype=x.dtype)
        block = 1 << 16
        double_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)
        if checked:  # the costly part, only where the output is looked at whole
            row_sum_kernel[(rows,)](a, y[n:], a.shape[1], BLOCK=4096)
        return y
