import torch
import torch.nn as nn


class Model(nn.Module):
    """PPO's clipped surrogate loss over tokens: the ratio exp(logp - old_logp), clamped to
    [1 - eps, 1 + eps], the smaller of the two surrogates times an advantage given per sequence
    (a column broadcast over the tokens), negated and averaged."""
    def __init__(self, clip_eps=0.2):
        super().__init__()
        self.clip_eps = clip_eps

    def forward(self, logp, old_logp, advantages):
        ratio = torch.exp(logp - old_logp)
        unclipped = ratio * advantages
        clipped = torch.clamp(ratio, 1.0 - self.clip_eps, 1.0 + self.clip_eps) * advantages
        return -torch.min(unclipped, clipped).mean()


def get_inputs():
    logp = -torch.rand(4096, 2048) * 4.0
    old_logp = logp + torch.randn(4096, 2048) * 0.1
    return [logp, old_logp, torch.randn(4096, 1)]


def get_init_inputs():
    return [0.2]
