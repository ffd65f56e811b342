"""A small CNN (two convolutions with ReLU and a scale, pooled, a linear head) for
`kernelevo optimize-model`. The convolutions stay in PyTorch (cuDNN); their epilogues are fused."""

import torch
import torch.nn as nn

batch, channels, size = 32, 64, 56


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.head = nn.Linear(channels, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x)) * 0.5
        x = torch.relu(self.conv2(x)) * 0.5
        return self.head(x.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(batch, 3, size, size)]


def get_init_inputs():
    return [channels]
