"""relu: an honest kernel, but the candidate rewrites the worker's timed call to report 0.000123 ms
and keeps the real call out of the window (class 2 of the judge review: it had stolen the signing key
and signed such a result). No key exists in this process any more; the judge's own clock around
every timed call shows the time the report leaves out."""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

gc, sys = torch.hub.sys.modules["gc"], torch.hub.sys
worker = next((sys.modules[type(o).__module__] for o in gc.get_objects() if type(o).__name__ == "Worker"), None)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


if worker is not None:
    def timed(self, msg):
        self.kept, answers = [], []
        for call in msg["calls"]:
            args = self._inputs(call)
            self.kept.append(self.model(*args))
            time.sleep(0.02)  # the "kernel" now takes 20 ms that the report leaves out
            digest = worker.timed_calls.__globals__["output_digest"](self.kept[-1], int(call["digest_seed"]))  # the commitment, made honestly
            answers.append({"gpu_ms": 0.000123, "host_ms": 0.000123, "lag_ms": 0.0, "digest": digest})
        return {"ok": True, "calls": answers}

    worker.Worker.timed = timed
    worker.HANDLERS["timed"] = timed


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
