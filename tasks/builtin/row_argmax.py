"""Index of the maximum over the last dimension (the first one on ties)."""

import torch
import torch.nn as nn

DESCRIPTION = "row-wise argmax of an fp32 matrix (first index on ties)"
rows, cols = 65536, 16384
SMALL = {"rows": 6, "cols": 4097}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
