"""A chain of pointwise ops over a large fp32 matrix (eager runs one kernel per op)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

DESCRIPTION = "gelu(x * a + b) * sigmoid(x) - 0.5 * x, fp32: seven eager kernels, one pass fused"
rows, cols = 8192, 16384
SMALL = {"rows": 5, "cols": 1000}


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x * 1.702 + self.bias) * torch.sigmoid(x) - 0.5 * x


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]


def bytes_moved():
    return 2 * rows * cols * 4 + cols * 4
