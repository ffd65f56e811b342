"""Sum over the last dimension of an fp32 matrix."""

import torch
import torch.nn as nn

DESCRIPTION = "row-wise sum of an fp32 matrix"
rows, cols = 65536, 16384
SMALL = {"rows": 6, "cols": 4097}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
