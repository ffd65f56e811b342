import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Mixture-of-experts layer with top-k routing, evaluated densely:
    router Linear -> softmax (float32) -> topk -> renormalize -> scatter into a dense
    (tokens, experts) gate matrix; every expert's GELU MLP is evaluated with einsum and the
    outputs are combined with the gates.
    """
    def __init__(self, d_model, d_expert, num_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(num_experts, d_model, d_expert) / d_model ** 0.5)
        self.w2 = nn.Parameter(torch.randn(num_experts, d_expert, d_model) / d_expert ** 0.5)

    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.router(tokens)
        probs = F.softmax(logits, dim=-1, dtype=torch.float32)
        top_vals, top_idx = torch.topk(probs, self.top_k, dim=-1)
        top_vals = top_vals / top_vals.sum(dim=-1, keepdim=True)
        gates = torch.zeros_like(probs).scatter(-1, top_idx, top_vals).to(tokens.dtype)
        h = F.gelu(torch.einsum("nd,edh->neh", tokens, self.w1))
        expert_out = torch.einsum("neh,ehd->ned", h, self.w2)
        out = torch.einsum("ne,ned->nd", gates, expert_out)
        return out.view(B, T, D)


batch_size = 8
seq_len = 1024
d_model = 512
d_expert = 256
num_experts = 8
top_k = 2


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_expert, num_experts, top_k]
