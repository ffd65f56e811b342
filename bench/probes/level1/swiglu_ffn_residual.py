import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    LLaMA-style pre-norm SwiGLU feed-forward block:
    LayerNorm -> fused gate/up Linear -> chunk -> silu(gate) * up -> down Linear -> dropout(p=0) -> residual.
    """
    def __init__(self, d_model, d_hidden, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.w_in = nn.Linear(d_model, 2 * d_hidden, bias=False)
        self.w_out = nn.Linear(d_hidden, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = self.norm(x)
        gate, up = self.w_in(h).chunk(2, dim=-1)
        h = F.silu(gate) * up
        h = self.dropout(self.w_out(h))
        return x + h


batch_size = 8
seq_len = 1024
d_model = 1024
d_hidden = 2816
dropout = 0.0


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_hidden, dropout]
