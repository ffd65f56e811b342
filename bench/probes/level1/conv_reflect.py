import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1, padding_mode='reflect')

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.randn(4, 8, 64, 64)]

def get_init_inputs():
    return []
