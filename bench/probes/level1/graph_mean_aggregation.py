import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A GraphSAGE-style layer with mean aggregation: source features gathered per edge, summed
    into their destination nodes with index_add, divided by the in-degree from torch.bincount
    (at least 1), then a linear layer of [x, mean of neighbours] and ReLU."""
    def __init__(self, in_channels, out_channels):
        super(Model, self).__init__()
        self.lin = nn.Linear(2 * in_channels, out_channels)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.bincount(dst, minlength=x.size(0)).clamp(min=1).to(x.dtype).unsqueeze(1)
        return F.relu(self.lin(torch.cat([x, agg / deg], dim=1)))


num_nodes = 100000
num_edges = 800000
in_channels = 64
out_channels = 128


def get_inputs():
    return [torch.randn(num_nodes, in_channels), torch.randint(0, num_nodes, (2, num_edges))]


def get_init_inputs():
    return [in_channels, out_channels]
