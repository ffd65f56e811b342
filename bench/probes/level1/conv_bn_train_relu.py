import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(3, 32, 3)
        self.bn = nn.BatchNorm2d(32)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))

def get_inputs():
    return [torch.randn(16, 3, 64, 64)]

def get_init_inputs():
    return []
