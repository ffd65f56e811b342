import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, c, k):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(c, c, kernel_size=k, padding=k // 2, groups=c)

    def forward(self, x):
        return F.gelu(self.conv(x))

def get_inputs():
    return [torch.randn(16, 256, 4096)]

def get_init_inputs():
    return [256, 7]
