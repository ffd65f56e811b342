import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, factor, out_channels):
        super().__init__()
        self.unshuffle = nn.PixelUnshuffle(factor)
        self.proj = nn.Conv2d(channels * factor * factor, out_channels, 1)

    def forward(self, x):
        return self.proj(self.unshuffle(x))


def get_inputs():
    return [torch.randn(16, 32, 128, 128)]


def get_init_inputs():
    return [32, 2, 128]
