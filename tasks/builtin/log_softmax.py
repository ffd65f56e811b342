"""Log-softmax over the last dimension of an fp32 matrix."""

import torch
import torch.nn as nn

DESCRIPTION = "row-wise log-softmax of an fp32 matrix"
rows, cols = 32768, 16384
SMALL = {"rows": 7, "cols": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
