"""A minGPT transformer block as people write it, for `kernelevo optimize-model`.

What symbolic tracing cannot follow and the capture must: sizes read into Python
(``B, T, C = x.size()``, ``math.sqrt(k.size(-1))``), a causal mask buffer sliced by them and used
through ``masked_fill``, ``split``/``view``/``transpose``, and the tanh GELU written out with
``math`` and ``torch.pow``. KernelBench format: full size for a GPU (fp32, 8 x 512 tokens, width 768,
12 heads); ``--size small`` for the CPU interpreter.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch, seq, n_embd, n_head, max_seqlen = 8, 512, 768, 12, 1024
SMALL = {"batch": 2, "seq": 16, "n_embd": 64, "n_head": 4, "max_seqlen": 32}


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Model(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super(Model, self).__init__()  # noqa: UP008 - written as KernelBench files write it
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, max_seqlen)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.act = NewGELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.dropout(self.c_proj(self.act(self.c_fc(self.ln_2(x)))))


def get_inputs():
    return [torch.randn(batch, seq, n_embd)]


def get_init_inputs():
    return [n_embd, n_head, max_seqlen]
