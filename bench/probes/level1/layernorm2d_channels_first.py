import torch
import torch.nn as nn


class LayerNorm2d(nn.Module):
    """ConvNeXt-style LayerNorm over the channel dim of an NCHW tensor."""
    def __init__(self, num_channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        x = self.weight[:, None, None] * x + self.bias[:, None, None]
        return x


class Model(nn.Module):
    """Channels-first LayerNorm (normalize over C, affine of shape (C,) broadcast as (C,1,1))."""
    def __init__(self, num_channels, eps):
        super().__init__()
        self.norm = LayerNorm2d(num_channels, eps=eps)
        with torch.no_grad():
            self.norm.weight.copy_(torch.linspace(0.5, 1.5, num_channels))
            self.norm.bias.copy_(torch.linspace(-0.1, 0.1, num_channels))

    def forward(self, x):
        return self.norm(x)


batch_size = 32
num_channels = 96
height = 112
width = 112
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, num_channels, height, width)]


def get_init_inputs():
    return [num_channels, eps]
