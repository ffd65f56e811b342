"""Multi-query attention (PaLM / Falcon-7B style) single-token decode step: new K/V written into the cache at `pos`, attention masked to positions <= pos."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        # one shared K/V head
        self.wqkv = nn.Linear(d_model, d_model + 2 * self.head_dim, bias=False)
        self.wo = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, k_cache, v_cache, pos):
        # x: (B, 1, C); k_cache/v_cache: (B, max_len, head_dim); pos: (1,) int64
        B, T, C = x.size()
        max_len = k_cache.size(1)
        qkv = self.wqkv(x)
        q, k, v = torch.split(qkv, [C, self.head_dim, self.head_dim], dim=-1)
        k_cache.index_copy_(1, pos, k)
        v_cache.index_copy_(1, pos, v)

        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, 1, D)
        keys = k_cache.unsqueeze(1)  # (B, 1, L, D)
        values = v_cache.unsqueeze(1)
        scores = torch.matmul(q, keys.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, 1, L)
        valid = torch.arange(max_len, device=x.device) <= pos
        scores = scores.masked_fill(~valid.view(1, 1, 1, max_len), float("-inf"))
        probs = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(probs, values)  # (B, H, 1, D)
        out = out.transpose(1, 2).reshape(B, T, C)
        return self.wo(out)


batch_size = 32
max_len = 4096
d_model = 4096
n_heads = 32


def get_inputs():
    head_dim = d_model // n_heads
    x = torch.randn(batch_size, 1, d_model)
    k_cache = torch.randn(batch_size, max_len, head_dim)
    v_cache = torch.randn(batch_size, max_len, head_dim)
    pos = torch.tensor([2500], dtype=torch.long)
    return [x, k_cache, v_cache, pos]


def get_init_inputs():
    return [d_model, n_heads]
