"""RMSNorm as written in many LLM codebases, in bf16 with an fp32 reduction."""

import torch
import torch.nn as nn

DESCRIPTION = "RMSNorm(8192) in bf16, statistics in fp32 (LLaMA style)"
DTYPE = torch.bfloat16
rows, cols = 131072, 8192
SMALL = {"rows": 5, "cols": 1000}


class Model(nn.Module):
    def __init__(self, cols: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(cols))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
