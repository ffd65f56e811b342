import torch
import torch.nn as nn


class Model(nn.Module):
    """Min-max scaling of each image to [0, 1]: torch.aminmax over the flattened C*H*W of every
    sample, then (x - min) / (max - min + eps)."""
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        flat = x.flatten(1)
        lo, hi = torch.aminmax(flat, dim=1, keepdim=True)
        return ((flat - lo) / (hi - lo + self.eps)).view_as(x)


def get_inputs():
    return [torch.randn(64, 3, 256, 256) * 3.0 + 1.0]


def get_init_inputs():
    return [1e-6]
