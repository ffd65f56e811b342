import torch
import torch.nn as nn

class Model(nn.Module):
    """LayerNorm with a weight and no bias (nn.LayerNorm(bias=False)), then a residual add."""
    def __init__(self, d):
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(d, bias=False)

    def forward(self, x, residual):
        return residual + self.norm(x)

def get_inputs():
    return [torch.randn(8, 2048, 1024), torch.randn(8, 2048, 1024)]

def get_init_inputs():
    return [1024]
