"""Image-restoration training loss (LapSRN / EDVR style): Charbonnier penalty against the target plus an anisotropic total-variation term on the prediction."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CharbonnierLoss(nn.Module):
    def __init__(self, eps=1e-3):
        super().__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        return torch.mean(torch.sqrt(diff * diff + self.eps * self.eps))


class TVLoss(nn.Module):
    def forward(self, x):
        batch_size = x.size()[0]
        h_x = x.size()[2]
        w_x = x.size()[3]
        count_h = x.size()[1] * (h_x - 1) * w_x
        count_w = x.size()[1] * h_x * (w_x - 1)
        h_tv = torch.pow((x[:, :, 1:, :] - x[:, :, :h_x - 1, :]), 2).sum()
        w_tv = torch.pow((x[:, :, :, 1:] - x[:, :, :, :w_x - 1]), 2).sum()
        return 2 * (h_tv / count_h + w_tv / count_w) / batch_size


class Model(nn.Module):
    def __init__(self, tv_weight=1e-4, eps=1e-3):
        super().__init__()
        self.pixel = CharbonnierLoss(eps)
        self.tv = TVLoss()
        self.tv_weight = tv_weight

    def forward(self, pred, target):
        return self.pixel(pred, target) + self.tv_weight * self.tv(pred)


def get_inputs():
    return [torch.rand(16, 3, 256, 256), torch.rand(16, 3, 256, 256)]


def get_init_inputs():
    return []
