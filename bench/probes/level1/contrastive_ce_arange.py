import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, temperature=0.07):
        super().__init__()
        self.temperature = temperature

    def forward(self, a, b):
        logits = a @ b.t() / self.temperature
        labels = torch.arange(a.size(0), device=a.device)
        return F.cross_entropy(logits, labels)

def get_inputs():
    return [F.normalize(torch.randn(4096, 256), dim=-1), F.normalize(torch.randn(4096, 256), dim=-1)]

def get_init_inputs():
    return []
