import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Non-causal linear attention (Katharopoulos et al.): feature map elu(x) + 1 on queries and keys,
    the keys and values summarised per head as a D x E state with einsum, and a normaliser from the
    queries against the keys' sum over positions."""
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, q, k, v):
        q = F.elu(q) + 1.0
        k = F.elu(k) + 1.0
        kv = torch.einsum("bhnd,bhne->bhde", k, v)
        z = 1.0 / (torch.einsum("bhnd,bhd->bhn", q, k.sum(dim=2)) + self.eps)
        return torch.einsum("bhnd,bhde,bhn->bhne", q, kv, z)


def get_inputs():
    return [torch.randn(4, 8, 4096, 64), torch.randn(4, 8, 4096, 64), torch.randn(4, 8, 4096, 64)]


def get_init_inputs():
    return [1e-6]
