import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class Model(nn.Module):
    """
    Decoder-layer glue in bfloat16: add the sublayer output to the residual stream,
    then apply a hand-written RMSNorm (float32 statistics, cast back, bf16 weight).
    """
    def __init__(self, dim, eps):
        super().__init__()
        self.norm = RMSNorm(dim, eps)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(dim))
        self.to(torch.bfloat16)

    def forward(self, hidden_states, residual):
        hidden_states = hidden_states + residual
        return self.norm(hidden_states)


batch_size = 16
seq_len = 2048
dim = 4096
eps = 1e-6


def get_inputs():
    return [
        torch.randn(batch_size, seq_len, dim, dtype=torch.bfloat16),
        torch.randn(batch_size, seq_len, dim, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [dim, eps]
