import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clamp(-1.0, 1.0).cumsum(dim=0)

def get_inputs():
    return [torch.randn(512, 4096)]

def get_init_inputs():
    return []
