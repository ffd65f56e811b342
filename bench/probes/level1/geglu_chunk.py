import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.proj = nn.Linear(512, 2 * 1024)

    def forward(self, x):
        a, gate = self.proj(x).chunk(2, dim=-1)
        return a * F.gelu(gate)

def get_inputs():
    return [torch.randn(16, 256, 512)]

def get_init_inputs():
    return []
