"""Mistral-style sliding-window causal self-attention: banded boolean mask built in forward and passed to SDPA."""
import torch
import torch.nn as nn
import torch.nn.functional as F

WINDOW = 512


class Model(nn.Module):
    def __init__(self, dim, n_heads, window):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.window = window
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        i = torch.arange(seqlen, device=x.device).unsqueeze(1)
        j = torch.arange(seqlen, device=x.device).unsqueeze(0)
        mask = (j <= i) & (i - j < self.window)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        out = out.transpose(1, 2).reshape(bsz, seqlen, -1)
        return self.wo(out)


def get_inputs():
    return [torch.randn(2, 4096, 1024)]


def get_init_inputs():
    return [1024, 16, WINDOW]
