"""relu: an honest kernel that uses its compile cache as a build would, and leaves in it a chain of
folders deeper than Python's recursion limit. Judged twice on one evaluator, the second process must
find what the first left (the judge carries a source's cache from one process to the next) and still
be able to write there; the deep chain must not break the judge. Reports what it saw in its log."""

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

CACHE = os.environ.get("TORCH_EXTENSIONS_DIR", "")


def _use_the_cache():
    os.makedirs(CACHE, exist_ok=True)
    runs = os.path.join(CACHE, "runs")
    seen = open(runs).read().count("run") if os.path.exists(runs) else 0
    with open(runs, "a") as f:  # fails where the folder is not really this process's
        f.write("run\n")
    deep = os.path.join(CACHE, "deep")
    if not os.path.exists(deep):
        os.makedirs(deep)
        fd = os.open(deep, os.O_RDONLY)
        for _ in range(1200):  # one level at a time, relative to the last: no path grows too long
            os.mkdir("d", dir_fd=fd)
            fd = os.open("d", os.O_RDONLY, dir_fd=fd)
    print("CACHE-RUNS-SEEN", seen, flush=True)


_use_the_cache()


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
