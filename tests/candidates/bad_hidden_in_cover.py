"""relu, half of it hidden before the clock starts (GPU): the first half runs on a stream that does
not wait for the current one, so it can start as soon as it is launched, while the harness's launch
cover still runs; the second half runs on the current stream, which then waits for the first. With a
cover that leaves SMs free, half of the work ran before the start event and the call read twice as
fast. The judge's cover fills every SM, so the hidden half gets SMs only once the clock runs."""

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
    def __init__(self):
        super().__init__()
        self.early = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        half = n // 2
        with torch.cuda.stream(self.early):  # no wait_stream: free to run before the start event
            relu_kernel[(triton.cdiv(half, 4096),)](x, y, half, BLOCK=4096)
            done = torch.cuda.Event()
            done.record()
        rest = n - half
        relu_kernel[(triton.cdiv(rest, 4096),)](x[half:], y[half:], rest, BLOCK=4096)
        torch.cuda.current_stream().wait_event(done)
        return y
