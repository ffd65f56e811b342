import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Depthwise Conv2d (groups = channels), LayerNorm over the spatial dims (H, W) of each channel
    with learned affine parameters, Softsign, then a residual add of the input.
    """
    def __init__(self, channels, kernel_size, height, width):
        super(Model, self).__init__()
        self.dwconv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)
        self.norm = nn.LayerNorm([height, width])
        self.softsign = nn.Softsign()

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, channels, height, width)
        Returns:
            torch.Tensor: (batch_size, channels, height, width)
        """
        y = self.dwconv(x)
        y = self.norm(y)
        y = self.softsign(y)
        return x + y

batch_size = 32
channels = 128
height = width = 56
kernel_size = 7

def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]

def get_init_inputs():
    return [channels, kernel_size, height, width]
