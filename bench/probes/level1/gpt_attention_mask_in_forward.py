import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, q, k, v):
        t = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(t, t, device=q.device))
        att = att.masked_fill(mask == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v

def get_inputs():
    return [torch.randn(4, 8, 256, 64), torch.randn(4, 8, 256, 64), torch.randn(4, 8, 256, 64)]

def get_init_inputs():
    return []
