import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    Matmul of an input of shape (B, 1, M, K) with a per-head weight of shape (H, K, N), broadcast
    over the batch to (B, H, M, N); a per-head bias, Softsign, then the max over heads.
    """
    def __init__(self, num_heads, in_features, out_features):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(num_heads, in_features, out_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.randn(num_heads, 1, out_features) * 0.1)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, 1, seq_len, in_features)
        Returns:
            torch.Tensor: (batch_size, seq_len, out_features)
        """
        x = torch.matmul(x, self.weight)
        x = x + self.bias
        x = F.softsign(x)
        x = torch.amax(x, dim=1)
        return x

batch_size = 16
num_heads = 8
seq_len = 256
in_features = 512
out_features = 256

def get_inputs():
    return [torch.randn(batch_size, 1, seq_len, in_features)]

def get_init_inputs():
    return [num_heads, in_features, out_features]
