"""relu: its kernel runs, then ``forward`` raises with a lone UTF-16 surrogate in the message. The
worker sends it escaped (``\\ud800``) and JSON reads it back as a string no UTF-8 encoder takes: a
verdict, a run's store or a console given it would fail, ending a search on the candidate's word.
The judge must read the message as text and reject the candidate like any other that raises."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        raise RuntimeError("unencodable " + chr(0xD800) + " message")
