"""row_sum_many (tests/fixtures/tasks): the sum computed by torch inside a tensor subclass's __torch_dispatch__,
which intercepts a clone (a glue op, under which the op records once saw nothing); a Triton kernel only copies
the answer. Refused statically: the subclass, its hook and as_subclass."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

STASH = []


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


class Box:  # torch in a plain class's constructor, built in forward
    def __init__(self, t):
        self.out = torch.sum(t, dim=-1)


class Sub(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return STASH.pop().sum(dim=-1)


class ModelNew(nn.Module):
    def forward(self, x):
        STASH.append(x)
        s = x.as_subclass(Sub).clone()
        y = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        copy_kernel[(triton.cdiv(y.numel(), 256),)](s, y, y.numel(), BLOCK=256)
        return y
