"""Scaled-dot-product attention forward (no mask), bf16, as in a transformer layer."""

import torch
import torch.nn as nn
import torch.nn.functional as F

DESCRIPTION = "softmax(Q K^T / sqrt(d)) V, bf16, batch 32, 16 heads, 2048 tokens, head dim 128"
DTYPE = torch.bfloat16
batch, heads, seq, head_dim = 32, 16, 2048, 128
SMALL = {"batch": 1, "heads": 2, "seq": 40, "head_dim": 16}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    shape = (batch, heads, seq, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []


def flops():
    return 4 * batch * heads * seq * seq * head_dim
