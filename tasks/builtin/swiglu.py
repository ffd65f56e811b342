"""SwiGLU activation of a transformer MLP in bf16: silu(gate) * up."""

import torch
import torch.nn as nn
import torch.nn.functional as F

DESCRIPTION = "silu(gate) * up on the two halves of a bf16 projection"
DTYPE = torch.bfloat16
tokens, hidden = 32768, 16384
SMALL = {"tokens": 3, "hidden": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(tokens, 2 * hidden)]


def get_init_inputs():
    return []
