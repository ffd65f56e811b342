import torch
import torch.nn as nn


class Model(nn.Module):
    """WaveNet's gated activation: a dilated causal conv to twice the channels, tanh of one half times
    the sigmoid of the other, then a 1x1 conv back, plus the residual."""
    def __init__(self, channels, dilation):
        super().__init__()
        self.dilation = dilation
        self.conv = nn.Conv1d(channels, 2 * channels, 2, dilation=dilation)
        self.out = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        h = self.conv(nn.functional.pad(x, (self.dilation, 0)))
        a, b = h.chunk(2, dim=1)
        return x + self.out(torch.tanh(a) * torch.sigmoid(b))


def get_inputs():
    return [torch.randn(16, 128, 16000)]


def get_init_inputs():
    return [128, 8]
