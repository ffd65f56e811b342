import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, c=256):
        super().__init__()
        self.conv = nn.Conv1d(c, 2 * c, kernel_size=1)

    def forward(self, x):
        return F.glu(self.conv(x), dim=1)

def get_inputs():
    return [torch.randn(16, 256, 2048)]

def get_init_inputs():
    return []
