import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, p=0.1):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(p)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x + self.drop(self.fc(x)))


def get_inputs():
    return [torch.randn(8, 1024, 1024)]


def get_init_inputs():
    return [1024]
