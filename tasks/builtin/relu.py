"""ReLU of a large fp32 tensor: the simplest memory-bound op, a floor for launch and copy costs."""

import torch
import torch.nn as nn

DESCRIPTION = "relu(x), fp32, 512M elements: one read and one write"
numel = 512 * 1024 * 1024
SMALL = {"numel": 3000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(numel)]


def get_init_inputs():
    return []
