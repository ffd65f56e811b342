"""QAT for 4-bit weight-only LLM inference (GPTQ/AWQ-style layout): asymmetric per-group (128) int4 fake quantisation of a Linear weight with a straight-through estimator."""
import torch
import torch.nn as nn
import torch.nn.functional as F

GROUP_SIZE = 128
N_BITS = 4


def fake_quant_groupwise(w, group_size, n_bits):
    out_features, in_features = w.shape
    qmax = 2 ** n_bits - 1
    wg = w.reshape(out_features, in_features // group_size, group_size)
    w_min = wg.amin(dim=-1, keepdim=True)
    w_max = wg.amax(dim=-1, keepdim=True)
    scale = (w_max - w_min).clamp(min=1e-5) / qmax
    zero = torch.clamp(torch.round(-w_min / scale), 0, qmax)
    q = torch.clamp(torch.round(wg / scale) + zero, 0, qmax)
    dq = (q - zero) * scale
    dq = dq.reshape(out_features, in_features)
    return w + (dq - w).detach()


class Model(nn.Module):
    def __init__(self, in_features, out_features, group_size=GROUP_SIZE, n_bits=N_BITS):
        super().__init__()
        self.group_size = group_size
        self.n_bits = n_bits
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * in_features ** -0.5)

    def forward(self, x):
        w = fake_quant_groupwise(self.weight, self.group_size, self.n_bits)
        return F.linear(x, w)


batch_size = 4
seq_len = 512
in_features = 4096
out_features = 11008


def get_inputs():
    return [torch.randn(batch_size, seq_len, in_features)]


def get_init_inputs():
    return [in_features, out_features]
