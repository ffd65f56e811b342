"""relu: the worker's answer to a checked call describes its outputs with metadata that does not
validate: the candidate must be rejected for it, never the task's reference blamed (which would stop
a whole run)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

sys = torch.hub.sys
worker = sys.modules.get("__main__")
if not hasattr(worker, "HANDLERS"):
    worker = sys.modules.get("kernelevo.sandbox.child.worker")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


if worker is not None:
    original_call = worker.HANDLERS["call"]

    def call(self, msg):
        reply = original_call(self, msg)
        reply["outputs"] = [dict(reply["outputs"][0], shape="not a shape")]  # plain-tensor fields kept
        return reply

    worker.HANDLERS["call"] = call


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
