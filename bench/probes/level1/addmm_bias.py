import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, bias, a, b):
        return torch.addmm(bias, a, b, beta=0.5, alpha=2.0)

def get_inputs():
    return [torch.randn(1024), torch.randn(2048, 512), torch.randn(512, 1024)]

def get_init_inputs():
    return []
