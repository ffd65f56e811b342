import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, c):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(c, 64, 3, padding=1)
        self.gn = nn.GroupNorm(8, 64)

    def forward(self, x):
        y = self.gn(self.conv(x))
        return F.hardswish(torch.tanh(y)) + y



def get_inputs():
    return [torch.randn(8, 32, 64, 64)]

def get_init_inputs():
    return [32]
