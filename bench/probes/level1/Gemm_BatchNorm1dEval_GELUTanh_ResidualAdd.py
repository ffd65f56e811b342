import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    GEMM (features -> features), BatchNorm1d with running statistics, GELU with the tanh
    approximation, then a residual add of the GEMM's input.
    """
    def __init__(self, features, eps, momentum):
        super(Model, self).__init__()
        self.gemm = nn.Linear(features, features)
        self.bn = nn.BatchNorm1d(features, eps=eps, momentum=momentum)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.1, 0.1)
            self.bn.running_var.uniform_(0.5, 1.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.1, 0.1)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, features)
        Returns:
            torch.Tensor: (batch_size, features)
        """
        y = self.gemm(x)
        y = self.bn(y)
        y = F.gelu(y, approximate="tanh")
        return x + y

batch_size = 1024
features = 4096
eps = 1e-5
momentum = 0.1

def get_inputs():
    return [torch.randn(batch_size, features)]

def get_init_inputs():
    return [features, eps, momentum]
