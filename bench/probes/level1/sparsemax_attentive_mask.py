"""Sparsemax over feature-selection logits, as in TabNet's attentive transformer (prior-scaled mask)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def sparsemax(x, dim=-1):
    # Martins & Astudillo (2016), sort-based threshold
    x = x - x.max(dim=dim, keepdim=True).values
    zs = torch.sort(x, dim=dim, descending=True).values
    d = x.size(dim)
    rng = torch.arange(1, d + 1, device=x.device, dtype=x.dtype)
    shape = [1] * x.dim()
    shape[dim] = -1
    rng = rng.view(shape)
    bound = 1 + rng * zs
    cumsum = zs.cumsum(dim)
    is_gt = (bound > cumsum).to(x.dtype)
    k = (is_gt * rng).max(dim=dim, keepdim=True).values
    tau = ((zs * is_gt).sum(dim=dim, keepdim=True) - 1) / k
    return torch.clamp(x - tau, min=0)


class Model(nn.Module):
    def __init__(self, n_a, input_dim, momentum=0.02):
        super().__init__()
        self.fc = nn.Linear(n_a, input_dim, bias=False)
        self.bn = nn.BatchNorm1d(input_dim, momentum=momentum)
        self.bn.eval()

    def forward(self, priors, processed_feat):
        x = self.fc(processed_feat)
        x = self.bn(x)
        x = torch.mul(x, priors)
        return sparsemax(x, dim=-1)


batch_size = 8192
n_a = 64
input_dim = 1024


def get_inputs():
    priors = torch.rand(batch_size, input_dim)
    processed_feat = torch.randn(batch_size, n_a)
    return [priors, processed_feat]


def get_init_inputs():
    return [n_a, input_dim]
