import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """A language model's head and its loss: logits from a projection, mean cross-entropy on targets."""
    def __init__(self, hidden, vocab):
        super(Model, self).__init__()
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, h, targets):
        return F.cross_entropy(self.head(h), targets)

def get_inputs():
    return [torch.randn(4096, 1024), torch.randint(0, 32000, (4096,))]

def get_init_inputs():
    return [1024, 32000]
