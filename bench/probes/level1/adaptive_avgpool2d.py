import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.p = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        return torch.flatten(self.p(x), 1)

def get_inputs():
    return [torch.randn(16, 256, 14, 14)]

def get_init_inputs():
    return []
