"""relu: forges the worker's answers on its channel (an accepted build, then outputs it never
computed) and exits (loophole 8/15): nothing the candidate's process says carries a verdict, and a
process that stops answering is rejected."""

import os

import torch
import torch.nn as nn
import triton

gc = torch.hub.sys.modules["gc"]
channel = next((o for o in gc.get_objects() if type(o).__name__ == "Channel"), None)
if channel is not None:
    channel.send({"ok": True, "seconds": 0.0})
    channel.send({"ok": True, "outputs": [], "launches": {"relu_kernel": 1}, "compute_ops": {}, "host_ms": 0.001})
os._exit(0)


@triton.jit
def noop(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        noop[(1,)](x)
        return x
