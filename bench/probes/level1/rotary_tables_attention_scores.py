import math
import torch
import torch.nn as nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None, :, :].to(x.dtype), emb.sin()[None, None, :, :].to(x.dtype)


class Model(nn.Module):
    """
    Rotary position embedding (cos/sin tables built in forward from arange) applied
    to q and k of shape (B, H, T, Dh), followed by scaled q @ k^T attention logits.
    """
    def __init__(self, head_dim, base):
        super().__init__()
        self.rotary = RotaryEmbedding(head_dim, base)
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k):
        seq_len = q.shape[-2]
        cos, sin = self.rotary(q, seq_len)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return torch.matmul(q, k.transpose(2, 3)) * self.scale


batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64
base = 10000.0


def get_inputs():
    return [
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
    ]


def get_init_inputs():
    return [head_dim, base]
