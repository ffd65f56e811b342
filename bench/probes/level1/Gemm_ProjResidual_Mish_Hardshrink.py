import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    GEMM plus a residual that carries the GEMM's input through a second, bias-free linear
    projection (in_features -> out_features), then Mish and Hardshrink.
    """
    def __init__(self, in_features, out_features, lambd):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.shortcut = nn.Linear(in_features, out_features, bias=False)
        self.lambd = lambd

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_features)
        Returns:
            torch.Tensor: (batch_size, out_features)
        """
        y = self.gemm(x) + self.shortcut(x)
        y = F.mish(y)
        y = F.hardshrink(y, lambd=self.lambd)
        return y

batch_size = 2048
in_features = 1024
out_features = 2048
lambd = 0.3

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, lambd]
