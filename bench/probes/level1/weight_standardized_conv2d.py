import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """A convolution whose weight is standardised per output channel on every call (BiT's WS conv)."""
    def __init__(self, cin, cout, k):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=1, bias=False)

    def forward(self, x):
        w = self.conv.weight
        mean = w.mean(dim=(1, 2, 3), keepdim=True)
        var = w.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
        w = (w - mean) / torch.sqrt(var + 1e-10)
        return F.conv2d(x, w, None, 1, 1)

def get_inputs():
    return [torch.randn(16, 64, 56, 56)]

def get_init_inputs():
    return [64, 128, 3]
