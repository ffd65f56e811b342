import torch
import torch.nn as nn
from torch.nn.utils.parametrizations import weight_norm

class Model(nn.Module):
    """A linear layer under weight normalisation (the weight is g * v / ||v|| on every call), then GELU."""
    def __init__(self, d_in, d_out):
        super(Model, self).__init__()
        self.proj = weight_norm(nn.Linear(d_in, d_out))

    def forward(self, x):
        return torch.nn.functional.gelu(self.proj(x))

def get_inputs():
    return [torch.randn(4096, 1024)]

def get_init_inputs():
    return [1024, 2048]
