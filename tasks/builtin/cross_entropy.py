"""Mean cross-entropy of fp32 logits against integer class targets (an LM head's loss)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

DESCRIPTION = "mean cross-entropy over a 32768-class vocabulary, fp32 logits"
batch, classes = 16384, 32768
SMALL = {"batch": 6, "classes": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(batch, classes), torch.randint(0, classes, (batch,))]


def get_init_inputs():
    return []
