import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.w = nn.Parameter(torch.randn(64, 96))

    def forward(self, x):
        return torch.einsum('bij,jk->bik', x, self.w).relu()



def get_inputs():
    return [torch.randn(32, 50, 64)]

def get_init_inputs():
    return []
