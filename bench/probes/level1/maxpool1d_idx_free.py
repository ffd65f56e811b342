import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.p = nn.MaxPool1d(3, stride=2, dilation=2)

    def forward(self, x):
        return self.p(x).relu()

def get_inputs():
    return [torch.randn(16, 32, 1000)]

def get_init_inputs():
    return []
