import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.attn = nn.MultiheadAttention(256, 8, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]

def get_inputs():
    return [torch.randn(4, 128, 256)]

def get_init_inputs():
    return []
