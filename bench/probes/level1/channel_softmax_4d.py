import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(x / self.temperature, dim=1)


def get_inputs():
    return [torch.randn(16, 21, 256, 256)]


def get_init_inputs():
    return [0.5]
