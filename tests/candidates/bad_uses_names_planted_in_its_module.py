"""softmax (under the interpreter): Triton's interpreter copies its own globals, `inspect` among them,
into a kernel's module on its first launch; the candidate then calls the bare name `inspect` to find its
path. Refused statically: a name the file never binds."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, LIMIT, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=float("-inf"))
    x = tl.where(cols < LIMIT, x, float("-inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + cols, e / s, mask=mask)


def _judged() -> bool:
    t = torch.zeros(1, 2)
    softmax_kernel[(1,)](t, torch.empty_like(t), 2, 2, 2, BLOCK=2)  # the interpreter fills our globals
    path = inspect.getfile(_judged)  # noqa: F821 -- put here by the interpreter
    return "-worker-" in path and "/jobs/" in path


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.judged = _judged()

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        n = x2.shape[1]
        limit = n if self.judged else n // 2
        softmax_kernel[(x2.shape[0],)](x2, y, n, x2.stride(0), limit, BLOCK=triton.next_power_of_2(n))
        return y.view(x.shape)
