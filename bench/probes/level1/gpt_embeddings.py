import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, vocab=50257, dim=768, block=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        return self.wte(idx) + self.wpe(pos)

def get_inputs():
    return [torch.randint(0, 50257, (8, 1024))]

def get_init_inputs():
    return []
