"""relu: an honest kernel whose first round of timed calls is forged as ``bad_forged_times`` forges
them (the real call kept out of the window, 0.000123 ms reported), the rest honest. The judge's clock
doubts the first round and times a second, and only the second round's times are kept: the forgery
buys nothing and costs a round."""

import time

import torch
import torch.nn as nn
import triton
import triton.language as tl

gc, sys = torch.hub.sys.modules["gc"], torch.hub.sys
worker = next((sys.modules[type(o).__module__] for o in gc.get_objects() if type(o).__name__ == "Worker"), None)
ROUND_BLOCKS = 2 if torch.cuda.is_available() else 1  # a round of timed calls: its blocks


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
    honest, honest_warmup, blocks = worker.Worker.timed, worker.Worker.warmup, []

    def warmup(self, msg):  # each block of timed calls begins with one
        blocks.append(1)
        return honest_warmup(self, msg)

    def timed(self, msg):
        if len(blocks) > ROUND_BLOCKS:
            return honest(self, msg)
        self.kept, answers = [], []
        for call in msg["calls"]:
            self.kept.append(self.model(*self._inputs(call)))
            time.sleep(0.02)
            digest = worker.timed_calls.__globals__["output_digest"](self.kept[-1], int(call["digest_seed"]))
            answers.append({"gpu_ms": 0.000123, "host_ms": 0.000123, "lag_ms": 0.0, "digest": digest})
        return {"ok": True, "calls": answers}

    worker.Worker.timed, worker.Worker.warmup = timed, warmup
    worker.HANDLERS["timed"], worker.HANDLERS["warmup"] = timed, warmup


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
