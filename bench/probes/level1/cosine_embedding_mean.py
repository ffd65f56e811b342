import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """One minus the mean cosine similarity of paired rows."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a, b):
        return 1.0 - F.cosine_similarity(a, b, dim=1).mean()

def get_inputs():
    return [torch.randn(32768, 768), torch.randn(32768, 768)]

def get_init_inputs():
    return []
