import torch
import torch.nn as nn

class Model(nn.Module):
    """Entropy of each row's softmax distribution."""
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        p = torch.softmax(logits, dim=-1)
        logp = torch.log_softmax(logits, dim=-1)
        return -(p * logp).sum(dim=-1)

def get_inputs():
    return [torch.randn(4096, 8192)]

def get_init_inputs():
    return []
