import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Parameter-free instance normalization on a bfloat16 feature map:
    statistics are computed in float32 over the spatial dims (2, 3) with keepdim,
    and the result is cast back to bfloat16.
    """
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        var, mean = torch.var_mean(xf, dim=(2, 3), keepdim=True, unbiased=False)
        y = (xf - mean) * torch.rsqrt(var + self.eps)
        return y.to(x.dtype)


batch_size = 64
channels = 128
height = 56
width = 56
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs():
    return [eps]
