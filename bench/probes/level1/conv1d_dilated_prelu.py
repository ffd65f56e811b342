import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.conv = nn.Conv1d(32, 32, 5, dilation=3, padding=6)
        self.act = nn.PReLU(32)

    def forward(self, x):
        return self.act(self.conv(x))



def get_inputs():
    return [torch.randn(16, 32, 2048)]

def get_init_inputs():
    return []
