import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(768)
        self.fc = nn.Linear(768, 1000)

    def forward(self, x):
        return self.fc(self.norm(x.mean(dim=1)))

def get_inputs():
    return [torch.randn(64, 197, 768)]

def get_init_inputs():
    return []
