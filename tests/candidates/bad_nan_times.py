"""relu: an honest kernel whose calls take about 20 ms more than they report. The worker's `timed`
handler is wrapped (dict.update: a method call, no assignment for the static check to see) so a
block's calls report NaN, then a forged 0.000123 ms, then the honest time. NaN passes every
comparison with the judge's clock, and Python's sort does not order it, so the median of the reported
times and the median of the unexplained wall time land on different calls: the forged median would
stand. Reported times must be finite numbers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

_sys = torch.hub.sys
_main = _sys.modules["__main__"]
_sleep = _sys.modules["time"].sleep
_honest_timed = _main.HANDLERS["timed"]
_calls = []


def _timed(worker, msg):
    reply = _honest_timed(worker, msg)  # the real calls, their real outputs and digests
    for answer in reply["calls"]:
        k = len(_calls) % 3
        _calls.append(k)
        if k == 0:
            answer.update({"gpu_ms": float("nan"), "host_ms": float("nan")})
        elif k == 1:
            answer.update({"gpu_ms": 0.000123, "host_ms": 0.000123})
    return reply


_main.HANDLERS.update({"timed": _timed})


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        _sleep(0.02)  # stands for 20 ms of real kernel time the report leaves out
        return y
