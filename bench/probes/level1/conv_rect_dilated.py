import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(16, 48, kernel_size=(3, 5), stride=(1, 2), padding=(2, 1), dilation=(2, 1))

    def forward(self, x):
        return torch.sigmoid(self.conv(x)) * 2.0

def get_inputs():
    return [torch.randn(16, 16, 128, 200)]

def get_init_inputs():
    return []
