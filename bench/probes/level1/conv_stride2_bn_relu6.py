import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, cin, cout):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu6(self.bn(self.conv(x)))

def get_inputs():
    return [torch.randn(32, 32, 112, 112)]

def get_init_inputs():
    return [32, 64]
