import math
import torch
import torch.nn as nn


class Model(nn.Module):
    """The heading loss of a 3-D box detector: the difference between predicted and target yaw
    wrapped into [-pi, pi) with torch.remainder, then smooth L1 written with torch.where and a
    beta from the constructor, averaged."""
    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def forward(self, pred, target):
        diff = torch.remainder(pred - target + math.pi, 2 * math.pi) - math.pi
        ad = diff.abs()
        loss = torch.where(ad < self.beta, 0.5 * ad * ad / self.beta, ad - 0.5 * self.beta)
        return loss.mean()


def get_inputs():
    return [torch.randn(8388608) * 4.0, (torch.rand(8388608) * 2.0 - 1.0) * math.pi]


def get_init_inputs():
    return [1.0 / 9.0]
