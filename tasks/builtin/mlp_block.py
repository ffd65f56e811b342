"""A transformer MLP block in bf16: Linear, GELU, Linear."""

import torch
import torch.nn as nn

DESCRIPTION = "Linear(4096->16384), GELU, Linear(16384->4096), bf16, 8192 tokens"
DTYPE = torch.bfloat16
ATOL = 2e-2
RTOL = 2e-2
tokens, dim, hidden = 8192, 4096, 16384
SMALL = {"tokens": 9, "dim": 32, "hidden": 64}


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


def get_inputs():
    return [torch.randn(tokens, dim)]


def get_init_inputs():
    return [dim, hidden]


def flops():
    return 4 * tokens * dim * hidden
