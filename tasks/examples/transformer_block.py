"""A pre-norm transformer block (attention and MLP with residuals), for `kernelevo optimize-model`.

KernelBench format: Model is the whole network. Full size is where a GPU's timings mean something
(bf16, 8 x 1024 tokens, width 1024, 16 heads); `--size small` (the default without a GPU) is the
same block at a size the CPU interpreter can run (fp32, 2 x 16 tokens, width 64, 4 heads).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16
batch, seq, dim, heads = 8, 1024, 1024, 16
SMALL = {"batch": 2, "seq": 16, "dim": 64, "heads": 4, "DTYPE": torch.float32}


class Model(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(batch, seq, dim)]


def get_init_inputs():
    return [dim, heads]
