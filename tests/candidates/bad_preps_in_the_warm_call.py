"""relu_padded: as ``ok_relu_padded``, with the zeroing moved off the clock. The call that repeats the
last call's storage unchanged (its data pointer and version counter, which the static checks allow)
is the judge's untimed warm call, so it zeroes the next call's output there. Correct on every call,
and in a user's loop (fresh tensors, no warm call) it zeroes inside each call like its twin; judged,
its time leaves the zeroing out. Work done off the clock on the call's own stream is bounded by the
forensic pass: the kernels it traces per call include the zeroing, and the timed median may be at most
the pass's margin below them. Here the zeroing writes the whole output and the kernel one value in
eight, far beyond the margin, so the pass rejects it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

COLUMNS = 8


@triton.jit
def relu_column_kernel(x_ptr, y_ptr, n, COLUMNS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs * COLUMNS, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None
        self.ready = None

    def forward(self, x):
        n = x.numel()
        key = (x.data_ptr(), x._version)
        warm = self.last == key  # the same storage, unchanged: the warm call
        self.last = key
        fits = self.ready is not None and self.ready.shape == (n, COLUMNS) and self.ready.dtype == x.dtype
        if fits and not warm:
            y, self.ready = self.ready, None  # zeroed off the clock
        else:
            y = torch.zeros(n, COLUMNS, device=x.device, dtype=x.dtype)
        relu_column_kernel[(triton.cdiv(n, 1024),)](x, y, n, COLUMNS=COLUMNS, BLOCK=1024)
        if warm:
            self.ready = torch.zeros(n, COLUMNS, device=x.device, dtype=x.dtype)  # the next call's zeroing
        return y
