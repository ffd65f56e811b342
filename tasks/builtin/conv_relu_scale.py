"""A 3x3 convolution followed by bias, ReLU, a per-channel scale and a residual add."""

import torch
import torch.nn as nn

DESCRIPTION = "conv3x3 then relu(. + b) * s + residual, fp32; the convolution may stay in cuDNN"
ALLOW_PARTIAL = True
batch, channels, height, width = 32, 128, 128, 128
SMALL = {"batch": 2, "channels": 4, "height": 9, "width": 7}


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1) * 0.1)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y + self.bias) * self.scale + x


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels]
