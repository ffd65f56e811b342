import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, groups):
        super(Model, self).__init__()
        self.groups = groups

    def forward(self, x):
        b, c, h, w = x.size()
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()
        return x.view(b, c, h, w)

def get_inputs():
    return [torch.randn(16, 96, 56, 56)]

def get_init_inputs():
    return [4]
