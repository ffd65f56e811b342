import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, t, c):
        super(Model, self).__init__()
        self.token_mix = nn.Linear(t, t)
        self.channel_mix = nn.Linear(c, c)

    def forward(self, x):
        y = self.token_mix(x.transpose(1, 2)).transpose(1, 2)
        return self.channel_mix(torch.relu(y + x))

def get_inputs():
    return [torch.randn(64, 196, 768)]

def get_init_inputs():
    return [196, 768]
