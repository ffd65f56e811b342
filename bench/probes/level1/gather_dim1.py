import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x, y):
        return torch.gather(x, 1, y)

def get_inputs():
    return [torch.randn(128, 1024), torch.randint(0, 1024, (128, 64))]

def get_init_inputs():
    return []
