import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Conv2d, multiplication by a learned per-channel scale of shape (C, 1, 1), a clamp whose bounds
    are learned tensors of shape (C, 1, 1), then SELU.
    """
    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(torch.rand(out_channels, 1, 1) + 0.5)
        self.low = nn.Parameter(-0.5 - torch.rand(out_channels, 1, 1))
        self.high = nn.Parameter(0.5 + torch.rand(out_channels, 1, 1))
        self.selu = nn.SELU()

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_channels, height, width)
        Returns:
            torch.Tensor: (batch_size, out_channels, height, width)
        """
        x = self.conv(x)
        x = x * self.scale
        x = torch.clamp(x, min=self.low, max=self.high)
        x = self.selu(x)
        return x

batch_size = 32
in_channels = 32
out_channels = 64
height = width = 64
kernel_size = 3

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
