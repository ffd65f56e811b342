"""relu computed by torch (x.clamp), hidden from the op recorder: the profiler's `function_events`
is replaced through a local name for `torch.autograd` (bound by unpacking: writing to its attributes
reads as writing to the candidate's own). A Triton kernel writes a 1.0 flag the output is multiplied
by, so the ghost replays (kernel skipped, flag zeroed) break it. On the CPU only the static refusal of
a module taken as a value stops it; on a GPU the forensic trace sees torch's kernels too."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def one_kernel(f_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(f_ptr + offs, tl.zeros([BLOCK], tl.float32) + 1.0, mask=offs < n)


def blind():
    a, _ = torch.autograd, 0
    a.profiler.profile.function_events = property(lambda s: [])


blind()


class ModelNew(nn.Module):
    def forward(self, x):
        flag = torch.empty(1, device=x.device, dtype=x.dtype)
        one_kernel[(1,)](flag, 1, BLOCK=16)
        return x.clamp(min=0) * flag
