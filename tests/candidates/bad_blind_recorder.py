"""softmax: finds the op recorder through ``gc`` and blinds it, then lets torch compute (class 3 of
the judge review). Inside its own process a candidate can always do this: on the CPU the verdict
says "interpreter: not forensic"; on a GPU the forensic kernel trace sees torch's softmax kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

gc = torch.hub.sys.modules["gc"]
for obj in gc.get_objects():
    if type(obj).__name__ == "OpRecorder":
        type(obj).compute_ops = lambda self: {}
        type(obj).host_reads = 0
        break


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        s = x.softmax(-1)
        y = torch.empty_like(s)
        copy_kernel[(triton.cdiv(s.numel(), 1024),)](s, y, s.numel(), BLOCK=1024)
        return y
