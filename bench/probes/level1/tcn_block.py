import torch
import torch.nn as nn
from torch.nn.utils import weight_norm


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class Model(nn.Module):
    """A temporal block of a TCN: a causal dilated convolution under weight norm, chomped, ReLU, plus a
    1x1 downsampled residual, ReLU."""
    def __init__(self, n_in, n_out, k, dilation):
        super(Model, self).__init__()
        pad = (k - 1) * dilation
        self.conv = weight_norm(nn.Conv1d(n_in, n_out, k, padding=pad, dilation=dilation))
        self.chomp = Chomp1d(pad)
        self.relu = nn.ReLU()
        self.down = nn.Conv1d(n_in, n_out, 1)

    def forward(self, x):
        out = self.relu(self.chomp(self.conv(x)))
        return self.relu(out + self.down(x))


def get_inputs():
    return [torch.randn(32, 64, 4096)]


def get_init_inputs():
    return [64, 128, 3, 4]
