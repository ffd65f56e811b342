import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, cin, cout, groups):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1, groups=groups)

    def forward(self, x):
        return torch.relu(self.conv(x))

def get_inputs():
    return [torch.randn(16, 64, 56, 56)]

def get_init_inputs():
    return [64, 128, 4]
