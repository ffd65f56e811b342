import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm


class Model(nn.Module):
    """One HiFi-GAN residual unit: leaky ReLU, dilated conv (same length), leaky ReLU, conv, residual."""
    def __init__(self, channels, k, dilation):
        super().__init__()
        self.c1 = weight_norm(nn.Conv1d(channels, channels, k, dilation=dilation, padding=dilation * (k - 1) // 2))
        self.c2 = weight_norm(nn.Conv1d(channels, channels, k, padding=(k - 1) // 2))

    def forward(self, x):
        y = self.c1(F.leaky_relu(x, 0.1))
        y = self.c2(F.leaky_relu(y, 0.1))
        return x + y


def get_inputs():
    return [torch.randn(16, 256, 8192)]


def get_init_inputs():
    return [256, 3, 3]
