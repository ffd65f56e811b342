import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, skip):
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        return torch.cat([x, skip], dim=1)

def get_inputs():
    return [torch.randn(16, 128, 32, 32), torch.randn(16, 64, 64, 64)]

def get_init_inputs():
    return []
