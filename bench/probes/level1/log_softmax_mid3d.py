import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        return F.log_softmax(x, dim=self.dim)

batch, mid, last = 64, 512, 96

def get_inputs():
    return [torch.randn(batch, mid, last)]

def get_init_inputs():
    return [1]
