import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, channels=96):
        super().__init__()
        self.dw = nn.Conv2d(channels, channels, 5, padding=2, groups=channels, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(self.bn(self.dw(x)))

def get_inputs():
    return [torch.randn(16, 96, 56, 56)]

def get_init_inputs():
    return []
