import math
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, d, e):
        super(Model, self).__init__()
        self.gate = nn.Linear(d, e, bias=False)

    def forward(self, x):
        logits = self.gate(x)
        values, _ = torch.topk(logits, 2, dim=-1)
        return F.softmax(values, dim=-1)

def get_inputs():
    return [torch.randn(8192, 1024)]

def get_init_inputs():
    return [1024, 64]
