import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a, b):
        return torch.matmul(a, b).relu()

def get_inputs():
    return [torch.randn(4096, 2048, dtype=torch.bfloat16), torch.randn(2048, 3072, dtype=torch.bfloat16)]

def get_init_inputs():
    return []
