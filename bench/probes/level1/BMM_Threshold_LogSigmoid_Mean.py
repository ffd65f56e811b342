import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    Batched matmul of two inputs, nn.Threshold (values at or below the threshold replaced by a
    constant), LogSigmoid, then the mean over the last dimension.
    """
    def __init__(self, threshold, value):
        super().__init__()
        self.threshold = nn.Threshold(threshold, value)

    def forward(self, a, b):
        """
        Args:
            a (torch.Tensor): (batch_size, m, k)
            b (torch.Tensor): (batch_size, k, n)
        Returns:
            torch.Tensor: (batch_size, m)
        """
        x = torch.bmm(a, b)
        x = self.threshold(x)
        x = F.logsigmoid(x)
        x = x.mean(dim=-1)
        return x

batch_size = 64
m = 512
k = 256
n = 512
threshold = 0.5
value = -1.0

def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]

def get_init_inputs():
    return [threshold, value]
