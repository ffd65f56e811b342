import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.fc = nn.Linear(768, 4 * 256)

    def forward(self, x, y):
        i, f, g, o = self.fc(x).chunk(4, dim=1); c = torch.sigmoid(f) * y + torch.sigmoid(i) * torch.tanh(g); return torch.sigmoid(o) * torch.tanh(c)

def get_inputs():
    return [torch.randn(128, 768), torch.randn(128, 256)]

def get_init_inputs():
    return []
