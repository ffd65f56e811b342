import torch
import torch.nn as nn
import torch.nn.functional as F


def gcn_norm(edge_index, num_nodes, dtype):
    src, dst = edge_index[0], edge_index[1]
    loop = torch.arange(num_nodes, device=edge_index.device)
    src = torch.cat([src, loop])
    dst = torch.cat([dst, loop])
    deg = torch.zeros(num_nodes, dtype=dtype, device=edge_index.device)
    deg = deg.index_add(0, dst, torch.ones_like(dst, dtype=dtype))
    deg_inv_sqrt = deg.pow(-0.5)
    deg_inv_sqrt = torch.where(torch.isinf(deg_inv_sqrt), torch.zeros_like(deg_inv_sqrt), deg_inv_sqrt)
    norm = deg_inv_sqrt[src] * deg_inv_sqrt[dst]
    return src, dst, norm


class Model(nn.Module):
    """
    Two-layer GCN (Kipf & Welling) with explicit message passing on an edge list:
    add self loops -> symmetric degree normalization -> Linear -> gather by source node
    -> scale -> index_add into destination nodes -> bias -> ReLU, twice, then log_softmax.
    """
    def __init__(self, in_features, hidden_features, out_features):
        super().__init__()
        self.lin1 = nn.Linear(in_features, hidden_features, bias=False)
        self.bias1 = nn.Parameter(torch.zeros(hidden_features))
        self.lin2 = nn.Linear(hidden_features, out_features, bias=False)
        self.bias2 = nn.Parameter(torch.zeros(out_features))
        self.dropout = nn.Dropout(0.0)

    def propagate(self, x, src, dst, norm):
        msg = x[src] * norm.unsqueeze(-1)
        out = torch.zeros_like(x)
        return out.index_add(0, dst, msg)

    def forward(self, x, edge_index):
        N = x.size(0)
        src, dst, norm = gcn_norm(edge_index, N, x.dtype)
        h = self.propagate(self.lin1(x), src, dst, norm) + self.bias1
        h = self.dropout(F.relu(h))
        h = self.propagate(self.lin2(h), src, dst, norm) + self.bias2
        return F.log_softmax(h, dim=-1)


num_nodes = 65536
num_edges = 1048576
in_features = 128
hidden_features = 256
out_features = 64


def get_inputs():
    x = torch.randn(num_nodes, in_features)
    edge_index = torch.randint(0, num_nodes, (2, num_edges))
    return [x, edge_index]


def get_init_inputs():
    return [in_features, hidden_features, out_features]
