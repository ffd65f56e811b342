"""GNN graph-level readout (GIN / PyG global_mean_pool + global_max_pool): per-graph segment mean and max via scatter_reduce over a batch vector, then an MLP classifier."""
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_GRAPHS = 512
NUM_NODES = 262144
HIDDEN = 128
NUM_CLASSES = 16


def segment_reduce(x, index, num_segments, reduce):
    idx = index.unsqueeze(-1).expand(-1, x.size(-1))
    out = torch.zeros(num_segments, x.size(-1), dtype=x.dtype, device=x.device)
    return out.scatter_reduce(0, idx, x, reduce=reduce, include_self=False)


class Model(nn.Module):
    def __init__(self, hidden, num_classes, num_graphs):
        super().__init__()
        self.num_graphs = num_graphs
        self.lin1 = nn.Linear(2 * hidden, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.lin2 = nn.Linear(hidden, num_classes)

    def forward(self, x, batch):
        mean_pool = segment_reduce(x, batch, self.num_graphs, "mean")
        max_pool = segment_reduce(x, batch, self.num_graphs, "amax")
        h = torch.cat([mean_pool, max_pool], dim=-1)
        h = F.relu(self.bn(self.lin1(h)))
        return F.log_softmax(self.lin2(h), dim=-1)


def get_inputs():
    x = torch.randn(NUM_NODES, HIDDEN)
    batch = torch.randint(0, NUM_GRAPHS, (NUM_NODES,)).sort().values
    return [x, batch]


def get_init_inputs():
    return [HIDDEN, NUM_CLASSES, NUM_GRAPHS]
