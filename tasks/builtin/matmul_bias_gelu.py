"""A linear layer with its epilogue: (x @ W^T + b), GELU (tanh), times a scale, in bf16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

DESCRIPTION = "gelu(x @ W^T + b) * scale, bf16, M=N=K=8192: matmul with a fused epilogue"
DTYPE = torch.bfloat16
ATOL = 2e-2
RTOL = 2e-2
M, N, K = 8192, 8192, 8192
SMALL = {"M": 33, "N": 48, "K": 80}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x), approximate="tanh") * self.scale


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N, 0.5]


def flops():
    return 2 * M * N * K
