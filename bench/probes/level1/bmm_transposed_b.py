import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, a, b):
        return torch.bmm(a, b.transpose(1, 2))

def get_inputs():
    return [torch.randn(16, 128, 64), torch.randn(16, 256, 64)]

def get_init_inputs():
    return []
