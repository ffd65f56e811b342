import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, t=2.0):
        super().__init__()
        self.t = t

    def forward(self, student, teacher):
        s = F.log_softmax(student / self.t, dim=-1)
        p = F.softmax(teacher / self.t, dim=-1)
        return F.kl_div(s, p, reduction="batchmean") * self.t * self.t

def get_inputs():
    return [torch.randn(1024, 32000), torch.randn(1024, 32000)]

def get_init_inputs():
    return []
