import torch
import torch.nn as nn

class Model(nn.Module):
    """
    GEMM whose output is viewed as (batch, heads, head_dim), a logsumexp over each head,
    a learned per-head scale, then Tanh.
    """
    def __init__(self, in_features, num_heads, head_dim):
        super().__init__()
        self.gemm = nn.Linear(in_features, num_heads * head_dim)
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.head_scale = nn.Parameter(torch.rand(num_heads) * 0.2)

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_features)
        Returns:
            torch.Tensor: (batch_size, num_heads)
        """
        x = self.gemm(x)
        x = x.view(x.shape[0], self.num_heads, self.head_dim)
        x = torch.logsumexp(x, dim=-1)
        x = x * self.head_scale
        x = torch.tanh(x)
        return x

batch_size = 2048
in_features = 2048
num_heads = 16
head_dim = 128

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, num_heads, head_dim]
