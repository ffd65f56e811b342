import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x):
        return torch.clamp(x, min=-0.5, max=0.5) / 0.5 - x.abs().amax(dim=-1, keepdim=True)



def get_inputs():
    return [torch.randn(512, 777)]

def get_init_inputs():
    return []
