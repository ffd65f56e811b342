import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, a, b):
        y = torch.addcmul(x, a, b, value=0.5)
        return torch.addcdiv(y, a, b.abs() + 1.0, value=-0.25)


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []
