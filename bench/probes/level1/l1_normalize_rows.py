import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / x.abs().sum(dim=1, keepdim=True).clamp_min(1e-6)

def get_inputs():
    return [torch.randn(4096, 2048)]

def get_init_inputs():
    return []
