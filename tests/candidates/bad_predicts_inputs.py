"""softmax: ``__init__`` (never recorded, never timed) computes the answers for the seeds the judge
used to draw its inputs from, and ``forward`` returns the one whose first value matches (class 8 of
the judge review). Seeds are drawn per evaluation and kept from the candidate's process until the
call that uses them, so no answer it prepared matches."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def guess_inputs(seed):
    torch.manual_seed(seed)
    rows, cols = 7, 1000
    return torch.randn(rows, cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.answers = {}
        for seed in list(range(0, 60)) + list(range(1000, 1060)):
            x = guess_inputs(seed)
            for scale in (1.0, 0.01, 100.0):
                y = x * scale
                self.answers[float(y[0, 0])] = torch.softmax(y, -1)

    def forward(self, x):
        answer = self.answers.get(float(x[0, 0]))
        if answer is None:
            answer = torch.zeros_like(x)
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](answer.contiguous(), y, x.numel(), BLOCK=1024)
        return y
