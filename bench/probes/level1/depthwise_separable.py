import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32); self.pw = nn.Conv2d(32, 64, 1)

    def forward(self, x):
        return F.relu(self.pw(self.dw(x)))

def get_inputs():
    return [torch.randn(8, 32, 56, 56)]

def get_init_inputs():
    return []
