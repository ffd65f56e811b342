import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, temperature=0.07):
        super().__init__()
        self.temperature = temperature

    def forward(self, logits):
        return F.log_softmax(logits / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return [0.07]
