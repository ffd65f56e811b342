import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, m, q, k):
        return torch.baddbmm(m, q, k.transpose(1, 2), alpha=0.125)

def get_inputs():
    return [torch.randn(32, 128, 128), torch.randn(32, 128, 64), torch.randn(32, 128, 64)]

def get_init_inputs():
    return []
