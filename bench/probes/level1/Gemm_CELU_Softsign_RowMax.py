import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    GEMM, CELU, Softsign; returns the activations and, as a second output, the max of each row.
    """
    def __init__(self, in_features, out_features, celu_alpha):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.celu_alpha = celu_alpha

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): (batch_size, in_features)
        Returns:
            tuple: activations (batch_size, out_features) and row maxima (batch_size, 1)
        """
        x = self.gemm(x)
        x = F.celu(x, alpha=self.celu_alpha)
        x = F.softsign(x)
        row_max = torch.amax(x, dim=1, keepdim=True)
        return x, row_max

batch_size = 1024
in_features = 4096
out_features = 3072
celu_alpha = 0.5

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, celu_alpha]
