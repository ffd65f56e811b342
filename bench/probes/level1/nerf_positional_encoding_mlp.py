"""NeRF (Mildenhall et al. 2020) coarse network: frequency positional encoding of points and view directions, density MLP with skip, view-dependent RGB head."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

MULTIRES = 10
MULTIRES_VIEWS = 4


class Embedder(nn.Module):
    def __init__(self, num_freqs, include_input=True):
        super().__init__()
        self.include_input = include_input
        self.register_buffer("freq_bands", 2.0 ** torch.linspace(0.0, num_freqs - 1, num_freqs))
        self.out_dim = 3 * (int(include_input) + 2 * num_freqs)

    def forward(self, x):
        xb = x.unsqueeze(-2) * self.freq_bands.unsqueeze(-1)  # (N, F, 3)
        enc = torch.stack([torch.sin(xb), torch.cos(xb)], dim=-2)  # (N, F, 2, 3)
        enc = enc.reshape(x.shape[0], -1)
        if self.include_input:
            enc = torch.cat([x, enc], dim=-1)
        return enc


class Model(nn.Module):
    def __init__(self, D=8, W=256, skips=(4,)):
        super().__init__()
        self.embed_pts = Embedder(MULTIRES)
        self.embed_views = Embedder(MULTIRES_VIEWS)
        in_ch = self.embed_pts.out_dim
        in_ch_views = self.embed_views.out_dim
        self.skips = list(skips)
        layers = [nn.Linear(in_ch, W)]
        for i in range(D - 1):
            layers.append(nn.Linear(W + in_ch, W) if i in self.skips else nn.Linear(W, W))
        self.pts_linears = nn.ModuleList(layers)
        self.views_linears = nn.ModuleList([nn.Linear(in_ch_views + W, W // 2)])
        self.feature_linear = nn.Linear(W, W)
        self.alpha_linear = nn.Linear(W, 1)
        self.rgb_linear = nn.Linear(W // 2, 3)

    def forward(self, pts, viewdirs):
        viewdirs = viewdirs / torch.norm(viewdirs, dim=-1, keepdim=True)
        input_pts = self.embed_pts(pts)
        input_views = self.embed_views(viewdirs)
        h = input_pts
        for i, l in enumerate(self.pts_linears):
            h = F.relu(l(h))
            if i in self.skips:
                h = torch.cat([input_pts, h], -1)
        alpha = self.alpha_linear(h)
        feature = self.feature_linear(h)
        h = torch.cat([feature, input_views], -1)
        for l in self.views_linears:
            h = F.relu(l(h))
        rgb = torch.sigmoid(self.rgb_linear(h))
        return torch.cat([rgb, F.relu(alpha)], -1)


N_RAYS = 4096
N_SAMPLES = 64


def get_inputs():
    n = N_RAYS * N_SAMPLES
    pts = torch.rand(n, 3) * 4.0 - 2.0
    viewdirs = torch.randn(n, 3)
    return [pts, viewdirs]


def get_init_inputs():
    return []
