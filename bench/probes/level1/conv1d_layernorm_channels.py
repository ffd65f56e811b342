import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, c_in=64, c_out=128):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(c_out)

    def forward(self, x):
        y = self.conv(x)
        return self.norm(y.transpose(1, 2)).transpose(1, 2)

def get_inputs():
    return [torch.randn(16, 64, 1024)]

def get_init_inputs():
    return []
