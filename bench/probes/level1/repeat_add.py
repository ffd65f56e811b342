import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x, y):
        return x.repeat(1, 4) + y

def get_inputs():
    return [torch.randn(512, 256), torch.randn(512, 1024)]

def get_init_inputs():
    return []
