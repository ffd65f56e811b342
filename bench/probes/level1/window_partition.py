import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, window):
        super(Model, self).__init__()
        self.window = window

    def forward(self, x):
        b, h, w, c = x.shape
        s = self.window
        x = x.view(b, h // s, s, w // s, s, c)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, s, s, c)

def get_inputs():
    return [torch.randn(32, 56, 56, 96)]

def get_init_inputs():
    return [7]
