import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, n):
        super(Model, self).__init__()
        self.fc = nn.Linear(n, 512)
        self.ln = nn.LayerNorm(512)

    def forward(self, x):
        return F.gelu(self.ln(self.fc(x)))



def get_inputs():
    return [torch.randn(256, 384)]

def get_init_inputs():
    return [384]
