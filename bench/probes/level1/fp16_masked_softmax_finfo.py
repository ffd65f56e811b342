import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Masked softmax over float16 attention scores with a temperature.
    Masked positions are filled with the dtype's most negative value, softmax is
    computed in float32 and cast back to float16. The mask broadcasts over heads.
    """
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, scores, mask):
        scores = scores / self.temperature
        scores = torch.where(mask, scores, torch.full_like(scores, torch.finfo(scores.dtype).min))
        return F.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)


batch_size = 8
num_heads = 16
seq_len = 1024
temperature = 0.7


def get_inputs():
    scores = torch.randn(batch_size, num_heads, seq_len, seq_len, dtype=torch.float16) * 4.0
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    keep = torch.rand(batch_size, 1, 1, seq_len) > 0.1
    mask = (causal.view(1, 1, seq_len, seq_len) & keep)
    mask[..., 0] = True
    return [scores, mask]


def get_init_inputs():
    return [temperature]
