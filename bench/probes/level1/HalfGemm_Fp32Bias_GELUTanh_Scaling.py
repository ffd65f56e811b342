import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    A bias-free linear layer held in float16 applied to a float16 input, then a float32 bias-like
    parameter added (promoting the result to float32), GELU with the tanh approximation, and scaling.
    """
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False).half()
        self.shift = nn.Parameter(torch.randn(out_features, dtype=torch.float32) * 0.02)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_features), float16
        Returns:
            torch.Tensor: (batch_size, out_features), float32
        """
        x = self.gemm(x)
        x = x + self.shift
        x = F.gelu(x, approximate="tanh")
        x = x * self.scaling_factor
        return x

batch_size = 512
in_features = 2048
out_features = 4096
scaling_factor = 1.5

def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=torch.float16)]

def get_init_inputs():
    return [in_features, out_features, scaling_factor]
