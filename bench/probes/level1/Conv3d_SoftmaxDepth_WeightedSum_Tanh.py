import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Conv3d, softmax over the depth axis, the conv output pooled over depth with those weights
    (attention pooling), then Tanh.
    """
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_channels, D, H, W)
        Returns:
            torch.Tensor: (batch_size, out_channels, H', W')
        """
        x = self.conv(x)
        w = torch.softmax(x, dim=2)
        x = (w * x).sum(dim=2)
        x = torch.tanh(x)
        return x

batch_size = 16
in_channels = 8
out_channels = 32
D, H, W = 16, 48, 48
kernel_size = 3

def get_inputs():
    return [torch.rand(batch_size, in_channels, D, H, W)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
