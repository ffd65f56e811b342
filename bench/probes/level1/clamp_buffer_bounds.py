import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Per-channel activation clipping (as used for quantization-aware calibration):
    clamp each channel of an NCHW activation into [lo_c, hi_c], with the bounds
    stored as registered buffers of shape (1, C, 1, 1).
    """
    def __init__(self, channels, base_range):
        super().__init__()
        lo = -base_range * (1.0 + torch.linspace(0.0, 1.0, channels))
        hi = base_range * (0.5 + torch.linspace(1.0, 0.0, channels))
        self.register_buffer("lo", lo.view(1, channels, 1, 1))
        self.register_buffer("hi", hi.view(1, channels, 1, 1))

    def forward(self, x):
        return torch.clamp(x, min=self.lo, max=self.hi)


batch_size = 32
channels = 256
height = 64
width = 64
base_range = 1.0


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 2.0]


def get_init_inputs():
    return [channels, base_range]
