"""LayerNorm over the last dimension with learned weight and bias, fp32."""

import torch
import torch.nn as nn

DESCRIPTION = "LayerNorm(8192) with affine parameters, fp32"
rows, cols = 65536, 8192
SMALL = {"rows": 5, "cols": 1000}


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.norm = nn.LayerNorm(cols, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.add_(torch.randn(cols) * 0.1)
            self.norm.bias.add_(torch.randn(cols) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
