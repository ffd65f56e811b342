import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, v):
        return torch.bmm(a, v.unsqueeze(-1)).squeeze(-1)

def get_inputs():
    return [torch.randn(64, 512, 1024), torch.randn(64, 1024)]

def get_init_inputs():
    return []
