"""DCN-V2 (Wang et al. 2021) CTR model: per-field embeddings, stacked cross layers in parallel with a deep MLP, logit head."""
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_DENSE = 13
NUM_SPARSE = 26
VOCAB = 10000
EMB_DIM = 16
NUM_CROSS = 3


class CrossLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x0, xl):
        return x0 * self.linear(xl) + xl


class Model(nn.Module):
    def __init__(self, num_dense, num_sparse, vocab, emb_dim, num_cross, hidden):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(vocab, emb_dim) for _ in range(num_sparse)])
        in_dim = num_dense + num_sparse * emb_dim
        self.cross = nn.ModuleList([CrossLayer(in_dim) for _ in range(num_cross)])
        self.deep = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
        )
        self.head = nn.Linear(in_dim + hidden, 1)

    def forward(self, dense, sparse):
        embs = [emb(sparse[:, i]) for i, emb in enumerate(self.embeddings)]
        x0 = torch.cat([torch.log1p(dense)] + embs, dim=1)
        xl = x0
        for layer in self.cross:
            xl = layer(x0, xl)
        deep_out = self.deep(x0)
        logit = self.head(torch.cat([xl, deep_out], dim=1))
        return torch.sigmoid(logit).squeeze(-1)


batch_size = 16384


def get_inputs():
    dense = torch.rand(batch_size, NUM_DENSE) * 100.0
    sparse = torch.randint(0, VOCAB, (batch_size, NUM_SPARSE))
    return [dense, sparse]


def get_init_inputs():
    return [NUM_DENSE, NUM_SPARSE, VOCAB, EMB_DIM, NUM_CROSS, 1024]
