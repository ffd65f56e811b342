"""CapsNet (Sabour et al. 2017) digit-capsule layer: prediction vectors from primary capsules, 3 iterations of routing-by-agreement with squash."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def squash(s, dim=-1, eps=1e-8):
    sq_norm = (s ** 2).sum(dim=dim, keepdim=True)
    scale = sq_norm / (1 + sq_norm)
    return scale * s / torch.sqrt(sq_norm + eps)


class Model(nn.Module):
    def __init__(self, in_caps, in_dim, out_caps, out_dim, routing_iters=3):
        super().__init__()
        self.routing_iters = routing_iters
        self.W = nn.Parameter(0.01 * torch.randn(1, in_caps, out_caps, out_dim, in_dim))

    def forward(self, u):
        # u: (B, in_caps, in_dim)
        B = u.size(0)
        u = u[:, :, None, :, None]                      # (B, in_caps, 1, in_dim, 1)
        u_hat = torch.matmul(self.W, u).squeeze(-1)     # (B, in_caps, out_caps, out_dim)
        b = torch.zeros(B, u_hat.size(1), u_hat.size(2), device=u.device, dtype=u.dtype)
        u_hat_detached = u_hat.detach()
        for it in range(self.routing_iters):
            c = F.softmax(b, dim=2)
            if it == self.routing_iters - 1:
                s = (c.unsqueeze(-1) * u_hat).sum(dim=1)
                v = squash(s)
            else:
                s = (c.unsqueeze(-1) * u_hat_detached).sum(dim=1)
                v = squash(s)
                b = b + (u_hat_detached * v.unsqueeze(1)).sum(dim=-1)
        lengths = v.norm(dim=-1)
        return v, lengths


batch_size = 128
in_caps = 32 * 6 * 6
in_dim = 8
out_caps = 10
out_dim = 16


def get_inputs():
    return [squash(torch.randn(batch_size, in_caps, in_dim))]


def get_init_inputs():
    return [in_caps, in_dim, out_caps, out_dim]
