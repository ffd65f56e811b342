import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x):
        return F.unfold(x, kernel_size=2, stride=2)

def get_inputs():
    return [torch.randn(8, 16, 32, 32)]

def get_init_inputs():
    return []
