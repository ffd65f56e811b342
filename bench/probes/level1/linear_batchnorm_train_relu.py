import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, n):
        super(Model, self).__init__()
        self.fc = nn.Linear(n, 256)
        self.bn = nn.BatchNorm1d(256)

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x)))



def get_inputs():
    return [torch.randn(512, 128)]

def get_init_inputs():
    return [128]
