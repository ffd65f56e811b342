import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x):
        return F.pad(x, (1, 2, 3, 4), value=0.5) * 2.0

def get_inputs():
    return [torch.randn(8, 16, 64, 64)]

def get_init_inputs():
    return []
