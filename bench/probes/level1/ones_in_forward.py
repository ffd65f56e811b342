import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        pass

    def forward(self, x):
        m = torch.ones(x.size(1), x.size(1), device=x.device).tril()
        return x @ m



def get_inputs():
    return [torch.randn(64, 256)]

def get_init_inputs():
    return []
