import math
import torch
import torch.nn as nn


class Model(nn.Module):
    """T5's relative position bias: relative positions key - query put into bidirectional buckets
    (exact below max_exact, logarithmic up to max_distance) with torch.where, an nn.Embedding of one
    bias per bucket and head, added to the attention scores before softmax."""
    def __init__(self, num_buckets, max_distance, n_heads):
        super().__init__()
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    def bucket(self, relative_position):
        nb = self.num_buckets // 2
        ret = (relative_position > 0).to(torch.long) * nb
        n = relative_position.abs()
        max_exact = nb // 2
        is_small = n < max_exact
        large = max_exact + (torch.log(n.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (nb - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        return ret + torch.where(is_small, n, large)

    def forward(self, scores):
        q_len, k_len = scores.shape[-2], scores.shape[-1]
        context = torch.arange(q_len, device=scores.device)[:, None]
        memory = torch.arange(k_len, device=scores.device)[None, :]
        buckets = self.bucket(memory - context)
        bias = self.relative_attention_bias(buckets).permute(2, 0, 1).unsqueeze(0)
        return torch.softmax(scores + bias, dim=-1)

def get_inputs():
    return [torch.randn(4, 12, 512, 512)]


def get_init_inputs():
    return [32, 128, 12]
