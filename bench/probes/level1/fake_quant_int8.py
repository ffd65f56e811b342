import torch
import torch.nn as nn


class Model(nn.Module):
    """Symmetric per-row fake quantization to int8, as quantization-aware training does."""

    def forward(self, x):
        scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
        q = torch.clamp(torch.round(x / scale), -128, 127)
        return q * scale


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
