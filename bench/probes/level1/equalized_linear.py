import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A StyleGAN mapping layer: equalised learning rate (weight scaled at run time), a bias with its own
    multiplier, then a leaky ReLU scaled by sqrt(2)."""
    def __init__(self, d_in, d_out, lr_mul=0.01):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in) / lr_mul)
        self.bias = nn.Parameter(torch.zeros(d_out))
        self.scale = (1 / math.sqrt(d_in)) * lr_mul
        self.lr_mul = lr_mul

    def forward(self, x):
        out = F.linear(x, self.weight * self.scale, bias=self.bias * self.lr_mul)
        return F.leaky_relu(out, 0.2) * math.sqrt(2)


def get_inputs():
    return [torch.randn(4096, 512)]


def get_init_inputs():
    return [512, 512]
