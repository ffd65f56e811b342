import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, tokens, dim):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)

    def forward(self, x):
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1)
        return x + self.pos_embed


def get_inputs():
    return [torch.randn(64, 196, 768)]


def get_init_inputs():
    return [196, 768]
