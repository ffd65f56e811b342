import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Running log-mean-exp over the time axis of a (batch, time, features) tensor,
    as used for streaming log-domain pooling in sequence models.
    The scan runs over dim=1 (not the last dim).
    """
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        T = x.size(self.dim)
        lse = torch.logcumsumexp(x, dim=self.dim)
        counts = torch.arange(1, T + 1, device=x.device, dtype=x.dtype)
        return lse - torch.log(counts).view(1, T, 1)


batch_size = 32
seq_len = 2048
features = 256
dim = 1


def get_inputs():
    return [torch.randn(batch_size, seq_len, features)]


def get_init_inputs():
    return [dim]
