import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.fc = nn.Linear(256, 512)
        self.gn = nn.GroupNorm(16, 512)

    def forward(self, x):
        x = self.fc(x)
        x = x * torch.sigmoid(x)
        return self.gn(x)

def get_inputs():
    return [torch.randn(64, 256)]

def get_init_inputs():
    return []
