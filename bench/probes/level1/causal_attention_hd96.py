import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

def get_inputs():
    return [torch.randn(4, 12, 1024, 96, dtype=torch.float16) for _ in range(3)]

def get_init_inputs():
    return []
