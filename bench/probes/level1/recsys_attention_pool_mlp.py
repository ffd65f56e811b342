import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionPooling(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.proj = nn.Linear(dim, hidden)
        self.score = nn.Linear(hidden, 1, bias=False)

    def forward(self, x, mask):
        s = self.score(torch.tanh(self.proj(x))).squeeze(-1)
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
        w = F.softmax(s, dim=-1)
        return torch.bmm(w.unsqueeze(1), x).squeeze(1)


class Model(nn.Module):
    """
    Recommender user tower: item-history ids (0 = padding) -> nn.Embedding(padding_idx=0)
    -> additive attention pooling with a padding mask -> MLP tower with LayerNorm and ReLU
    -> click logit.
    """
    def __init__(self, num_items, embed_dim, attn_hidden, mlp_hidden):
        super().__init__()
        self.item_emb = nn.Embedding(num_items, embed_dim, padding_idx=0)
        self.pool = AttentionPooling(embed_dim, attn_hidden)
        self.mlp = nn.Sequential(
            nn.Linear(embed_dim, mlp_hidden),
            nn.LayerNorm(mlp_hidden),
            nn.ReLU(),
            nn.Dropout(0.0),
            nn.Linear(mlp_hidden, mlp_hidden // 2),
            nn.ReLU(),
            nn.Linear(mlp_hidden // 2, 1),
        )

    def forward(self, history_ids):
        mask = history_ids != 0
        emb = self.item_emb(history_ids)
        user = self.pool(emb, mask)
        return self.mlp(user).squeeze(-1)


batch_size = 8192
history_len = 100
num_items = 200000
embed_dim = 64
attn_hidden = 64
mlp_hidden = 256


def get_inputs():
    ids = torch.randint(1, num_items, (batch_size, history_len))
    lengths = torch.randint(1, history_len + 1, (batch_size, 1))
    pad = torch.arange(history_len).unsqueeze(0) >= lengths
    ids = ids.masked_fill(pad, 0)
    return [ids]


def get_init_inputs():
    return [num_items, embed_dim, attn_hidden, mlp_hidden]
