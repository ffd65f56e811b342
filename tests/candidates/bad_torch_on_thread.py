"""softmax: torch does the work on a helper thread, joined inside forward (class 4 of the judge
review); the op recorder records every thread."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

threading = torch.hub.sys.modules["threading"]


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        box = []
        helper = threading.Thread(target=lambda: box.append(torch.softmax(x, -1)))
        helper.start()
        helper.join()
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](box[0], y, x.numel(), BLOCK=1024)
        return y
