import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, heads, n):
        super(Model, self).__init__()
        self.bias = nn.Parameter(torch.randn(heads, n, n) * 0.02)

    def forward(self, scores):
        return torch.softmax(scores + self.bias.unsqueeze(0), dim=-1)

def get_inputs():
    return [torch.randn(64, 8, 196, 196)]

def get_init_inputs():
    return [8, 196]
