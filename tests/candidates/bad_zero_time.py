"""relu: a correct kernel whose process reports every timed call as taking 0 ms (finite and not
negative). On a GPU the verdict's speedup is eager's time over the median: a zero there must be the
candidate's failure, never a division the judge cannot make. Reached through
``torch.utils.cpp_extension.sys``, a module kept as an attribute."""

import torch
import torch.nn as nn
import torch.utils.cpp_extension as _ce
import triton
import triton.language as tl

_main = _ce.sys.modules["__main__"]
_honest_timed = _main.HANDLERS["timed"]


def _timed(worker, msg):
    reply = _honest_timed(worker, msg)  # the real calls, their real outputs and digests
    for answer in reply["calls"]:
        answer.update({"gpu_ms": 0.0, "lag_ms": 0.0, "host_ms": 0.0})
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
        return y
