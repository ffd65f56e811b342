import torch
import torch.nn as nn
import torch.nn.functional as F


class SqueezeExcite(nn.Module):
    def __init__(self, channels, rd_ratio=0.25):
        super().__init__()
        rd = max(1, int(channels * rd_ratio))
        self.conv_reduce = nn.Conv2d(channels, rd, 1, bias=True)
        self.conv_expand = nn.Conv2d(rd, channels, 1, bias=True)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        s = F.silu(self.conv_reduce(s))
        s = self.conv_expand(s)
        return x * torch.sigmoid(s)


class Model(nn.Module):
    """
    EfficientNet-style block: 3x3 Conv2d (stride 2) -> BatchNorm2d (eval stats) -> SiLU
    -> Squeeze-and-Excitation (global avg pool, 1x1 convs, sigmoid gate) -> 1x1 projection
    -> BatchNorm2d.
    """
    def __init__(self, in_channels, mid_channels, out_channels, stride):
        super().__init__()
        self.conv_stem = nn.Conv2d(in_channels, mid_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.se = SqueezeExcite(mid_channels, rd_ratio=0.25)
        self.conv_pw = nn.Conv2d(mid_channels, out_channels, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                c = bn.num_features
                bn.running_mean.copy_(torch.linspace(-0.2, 0.2, c))
                bn.running_var.copy_(torch.linspace(0.5, 2.0, c))
                bn.weight.copy_(torch.linspace(0.8, 1.2, c))
                bn.bias.copy_(torch.linspace(-0.1, 0.1, c))

    def forward(self, x):
        x = self.conv_stem(x)
        x = F.silu(self.bn1(x))
        x = self.se(x)
        x = self.bn2(self.conv_pw(x))
        return x


batch_size = 32
in_channels = 64
mid_channels = 128
out_channels = 96
height = 112
width = 112
stride = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, mid_channels, out_channels, stride]
