import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x, y):
        return F.interpolate(x, scale_factor=2, mode='nearest') + y



def get_inputs():
    return [torch.randn(4, 8, 32, 32), torch.randn(4, 8, 64, 64)]

def get_init_inputs():
    return []
