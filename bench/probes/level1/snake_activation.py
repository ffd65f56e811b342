import torch
import torch.nn as nn


class Model(nn.Module):
    """Snake activation with a learned frequency per channel (BigVGAN): x + sin(a x)^2 / a."""
    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.rand(channels) + 0.5)

    def forward(self, x):
        a = self.alpha.unsqueeze(0).unsqueeze(-1)
        return x + (1.0 / (a + 1e-9)) * torch.pow(torch.sin(x * a), 2)


def get_inputs():
    return [torch.randn(16, 512, 16384)]


def get_init_inputs():
    return [512]
