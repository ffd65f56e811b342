import torch
import torch.nn as nn

class Model(nn.Module):
    """MobileNetV2's depthwise step: a 3x3 depthwise convolution, batch norm, ReLU6."""
    def __init__(self, channels):
        super(Model, self).__init__()
        self.dw = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.ReLU6(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.dw(x)))

def get_inputs():
    return [torch.randn(32, 144, 56, 56)]

def get_init_inputs():
    return [144]
