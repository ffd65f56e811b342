import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, vocab=30522, dim=768, positions=512, types=2):
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(positions, dim)
        self.token_type = nn.Embedding(types, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))

    def forward(self, input_ids, token_type_ids):
        t = input_ids.size(1)
        pos = self.position_ids[:, :t]
        x = self.word(input_ids) + self.token_type(token_type_ids) + self.position(pos)
        return self.norm(x)

def get_inputs():
    return [torch.randint(0, 30522, (16, 128)), torch.randint(0, 2, (16, 128))]

def get_init_inputs():
    return []
