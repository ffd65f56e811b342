import torch
import torch.nn as nn

class Model(nn.Module):
    """Rows standardised with torch.std_mean (unbiased deviation), eps added to the deviation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        std, mean = torch.std_mean(x, dim=-1, keepdim=True)
        return (x - mean) / (std + 1e-6)

def get_inputs():
    return [torch.randn(16384, 2048)]

def get_init_inputs():
    return []
