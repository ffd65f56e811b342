import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, layers=3):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, a, b, c):
        weights = self.w.softmax(0)
        return self.gamma * (weights[0] * a + weights[1] * b + weights[2] * c)


def get_inputs():
    return [torch.randn(32, 512, 1024), torch.randn(32, 512, 1024), torch.randn(32, 512, 1024)]


def get_init_inputs():
    return [3]
