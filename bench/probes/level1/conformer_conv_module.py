import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Conformer convolution module (speech): LayerNorm over features -> transpose to (B, C, T)
    -> pointwise Conv1d to 2C -> GLU over channels -> depthwise Conv1d (k=31) ->
    BatchNorm1d (eval) -> SiLU -> pointwise Conv1d -> transpose back -> residual add.
    """
    def __init__(self, channels, kernel_size):
        super().__init__()
        self.layer_norm = nn.LayerNorm(channels)
        self.pointwise_conv1 = nn.Conv1d(channels, 2 * channels, kernel_size=1)
        self.depthwise_conv = nn.Conv1d(
            channels, channels, kernel_size, padding=(kernel_size - 1) // 2, groups=channels
        )
        self.batch_norm = nn.BatchNorm1d(channels)
        self.pointwise_conv2 = nn.Conv1d(channels, channels, kernel_size=1)
        self.dropout = nn.Dropout(0.0)
        with torch.no_grad():
            self.batch_norm.running_mean.copy_(torch.linspace(-0.1, 0.1, channels))
            self.batch_norm.running_var.copy_(torch.linspace(0.5, 1.5, channels))

    def forward(self, x):
        residual = x
        x = self.layer_norm(x)
        x = x.transpose(1, 2)
        x = self.pointwise_conv1(x)
        x = F.glu(x, dim=1)
        x = self.depthwise_conv(x)
        x = self.batch_norm(x)
        x = F.silu(x)
        x = self.pointwise_conv2(x)
        x = self.dropout(x)
        return residual + x.transpose(1, 2)


batch_size = 16
seq_len = 2048
channels = 256
kernel_size = 31


def get_inputs():
    return [torch.randn(batch_size, seq_len, channels)]


def get_init_inputs():
    return [channels, kernel_size]
