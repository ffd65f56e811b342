import torch
import torch.nn as nn

class Model(nn.Module):
    """AlexNet's local response normalisation across 5 channels, after a ReLU."""
    def __init__(self):
        super(Model, self).__init__()
        self.lrn = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)

    def forward(self, x):
        return self.lrn(torch.relu(x))

def get_inputs():
    return [torch.randn(32, 96, 55, 55)]

def get_init_inputs():
    return []
