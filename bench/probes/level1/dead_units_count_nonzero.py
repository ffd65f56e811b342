import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A linear layer and ReLU that also reports its activation statistics: the fraction of
    non-zero outputs per sample (torch.count_nonzero) and which units are dead over the whole
    batch (.all over dim 0 of h == 0), both as floats."""
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = F.relu(self.fc(x))
        density = torch.count_nonzero(h, dim=1).to(h.dtype) / h.shape[1]
        dead = (h == 0).all(dim=0).to(h.dtype)
        return h, density, dead


batch_size = 4096
in_features = 1024
out_features = 2048


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
