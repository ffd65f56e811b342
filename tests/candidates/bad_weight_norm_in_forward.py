"""softmax: the task's own kernel, plus a weight-normalised layer read in forward.

The parametrization that a candidate may import to build the reference's parameters computes the
weight in torch on every read: in a strict task that is torch compute, which the recorder sees.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offsets = tl.arange(0, BLOCK)

    # Pass 1: running max m and running sum s of exp(x - m), rescaled when m grows.
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # exp(-inf - -inf) would be NaN; lanes that have seen nothing yet keep s = 0.
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max)), axis=0)

    # Pass 2: normalise and write.
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor."""
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = min(triton.next_power_of_2(cols), 4096)
    num_warps = 4 if block <= 1024 else 8 if block <= 2048 else 16
    softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=num_warps)
    return y


from torch.nn.utils.parametrizations import weight_norm


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.holder = weight_norm(nn.Linear(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.holder.weight  # torch computes g * v / ||v|| here, in forward
        return softmax(x.view(-1, x.shape[-1])).view(x.shape) + 0 * scale.sum()
