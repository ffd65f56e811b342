"""relu: correct, but floods its compile cache with empty files at import (millions of them would make
every later measure or removal of its folders wait out its limit, and exhaust the disk's inodes): killed
once it passes the judge's limit on files, and rejected. Run without static checks (which reject ``os``
and ``open``): the limit alone must stop it."""

import os

import torch.nn as nn
import triton
import triton.language as tl


def _flood(folder):
    try:
        os.makedirs(os.path.join(folder, "flood"), exist_ok=True)
        for i in range(2_000_000):
            open(os.path.join(folder, "flood", str(i)), "w").close()
    except OSError as exc:
        print("FLOOD", folder, exc, flush=True)
        return False
    return True


for place in (os.environ.get("TRITON_CACHE_DIR"), os.environ.get("TORCH_EXTENSIONS_DIR")):
    if place and _flood(place):
        break


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = x.new_empty(x.shape)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
