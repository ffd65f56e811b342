import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.bag = nn.EmbeddingBag(10000, 256, mode='mean')

    def forward(self, idx):
        return self.bag(idx)

def get_inputs():
    return [torch.randint(0, 10000, (4096, 20))]

def get_init_inputs():
    return []
