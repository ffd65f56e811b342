"""ChebyKAN: two Kolmogorov-Arnold layers with Chebyshev polynomial bases (cos(n * acos(tanh x))) and LayerNorm between them."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ChebyKANLayer(nn.Module):
    def __init__(self, input_dim, output_dim, degree):
        super().__init__()
        self.inputdim = input_dim
        self.outdim = output_dim
        self.degree = degree
        self.cheby_coeffs = nn.Parameter(torch.empty(input_dim, output_dim, degree + 1))
        nn.init.normal_(self.cheby_coeffs, mean=0.0, std=1 / (input_dim * (degree + 1)))
        self.register_buffer("arange", torch.arange(0, degree + 1, 1))

    def forward(self, x):
        x = torch.tanh(x)
        x = x.view((-1, self.inputdim, 1)).expand(-1, -1, self.degree + 1)
        x = x.acos()
        x *= self.arange
        x = x.cos()
        y = torch.einsum("bid,iod->bo", x, self.cheby_coeffs)
        y = y.view(-1, self.outdim)
        return y


class Model(nn.Module):
    def __init__(self, in_dim, hidden_dim, out_dim, degree):
        super().__init__()
        self.layer1 = ChebyKANLayer(in_dim, hidden_dim, degree)
        self.ln1 = nn.LayerNorm(hidden_dim)
        self.layer2 = ChebyKANLayer(hidden_dim, out_dim, degree)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        x = self.ln1(self.layer1(x))
        return self.layer2(x)


def get_inputs():
    return [torch.randn(4096, 1, 28, 28)]


def get_init_inputs():
    return [784, 512, 10, 4]
