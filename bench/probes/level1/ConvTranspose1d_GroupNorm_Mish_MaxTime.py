import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    ConvTranspose1d (stride 2, output_padding 1), GroupNorm, Mish, then the max over the time axis.
    """
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_channels, length)
        Returns:
            torch.Tensor: (batch_size, out_channels)
        """
        x = self.conv_transpose(x)
        x = self.group_norm(x)
        x = F.mish(x)
        x = torch.max(x, dim=2)[0]
        return x

batch_size = 64
in_channels = 128
out_channels = 64
length = 1024
kernel_size = 5
stride = 2
padding = 2
output_padding = 1
num_groups = 8

def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, num_groups]
