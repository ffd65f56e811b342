import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    ConvTranspose2d with stride 2 and output_padding 1, Tanh, a global mean over H and W,
    subtraction of a learned per-channel bias, then Softplus.
    """
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.5)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_channels, height, width)
        Returns:
            torch.Tensor: (batch_size, out_channels, 1, 1)
        """
        x = self.conv_transpose(x)
        x = torch.tanh(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        x = x - self.bias
        x = F.softplus(x)
        return x

batch_size = 32
in_channels = 64
out_channels = 32
height = width = 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape]
