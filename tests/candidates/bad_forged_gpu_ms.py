"""relu: an honest kernel, but the worker's timed handler is replaced to report a tiny GPU time
beside the honest host time: the judge's clock must not take a reported host time as explaining the
wall time it measured."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

sys = torch.hub.sys
time = sys.modules["time"]
worker = sys.modules.get("__main__")
if not hasattr(worker, "HANDLERS"):
    worker = sys.modules.get("kernelevo.sandbox.child.worker")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


if worker is not None:
    def timed(self, msg):
        self.kept, answers = [], []
        for call in msg["calls"]:
            args = self._inputs(call)
            began = time.perf_counter()
            with torch.no_grad():
                self.kept.append(self.model(*args))
            time.sleep(0.02)  # 20 ms of work, reported as host time only
            honest = (time.perf_counter() - began) * 1e3
            digest = worker.timed_calls.__globals__["output_digest"](self.kept[-1], int(call["digest_seed"]))  # the commitment, made honestly
            answers.append({"gpu_ms": 0.0042, "host_ms": honest, "lag_ms": 0.0, "digest": digest})
        return {"ok": True, "calls": answers}
    worker.HANDLERS["timed"] = timed


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
