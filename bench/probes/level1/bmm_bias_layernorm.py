import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super(Model, self).__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.02)
        self.ln = nn.LayerNorm(n)

    def forward(self, a, b):
        return self.ln(torch.bmm(a, b) + self.bias)

def get_inputs():
    return [torch.randn(32, 256, 512), torch.randn(32, 512, 384)]

def get_init_inputs():
    return [384]
