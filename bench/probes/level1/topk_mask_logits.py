import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, k=50):
        super().__init__()
        self.k = k

    def forward(self, logits):
        kth = torch.topk(logits, self.k, dim=-1).values[..., -1, None]
        masked = logits.masked_fill(logits < kth, float("-inf"))
        return torch.softmax(masked / 0.8, dim=-1)

def get_inputs():
    return [torch.randn(64, 32000)]

def get_init_inputs():
    return []
