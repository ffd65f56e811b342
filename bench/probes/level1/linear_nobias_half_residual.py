import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, d=1024):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) * d ** -0.5)

    def forward(self, x):
        return x + 0.5 * F.linear(x, self.w)

def get_inputs():
    return [torch.randn(2048, 1024)]

def get_init_inputs():
    return []
