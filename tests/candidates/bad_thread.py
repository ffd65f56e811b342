"""relu: correct kernel, but leaves a thread running after the call (loophole 7)."""

import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def spin(stop):
    while not stop.is_set():
        stop.wait(0.01)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stop = threading.Event()

    def forward(self, x):
        y = torch.empty_like(x)
        worker = threading.Thread(target=spin, args=(self.stop,), daemon=True)
        worker.start()
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
