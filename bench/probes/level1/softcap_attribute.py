import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cap=30.0):
        super().__init__()
        self.cap = cap

    def forward(self, logits):
        return self.cap * torch.tanh(logits / self.cap)


def get_inputs():
    return [torch.randn(8, 4096, 8192) * 50]


def get_init_inputs():
    return [30.0]
