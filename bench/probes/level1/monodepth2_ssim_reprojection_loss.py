"""Monodepth2 (Godard et al. 2019) photometric loss: 3x3 avg-pool SSIM with reflection padding plus L1, per-pixel minimum over warped and identity sources (auto-masking)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SSIM(nn.Module):
    def __init__(self):
        super().__init__()
        self.mu_x_pool = nn.AvgPool2d(3, 1)
        self.mu_y_pool = nn.AvgPool2d(3, 1)
        self.sig_x_pool = nn.AvgPool2d(3, 1)
        self.sig_y_pool = nn.AvgPool2d(3, 1)
        self.sig_xy_pool = nn.AvgPool2d(3, 1)
        self.refl = nn.ReflectionPad2d(1)
        self.C1 = 0.01 ** 2
        self.C2 = 0.03 ** 2

    def forward(self, x, y):
        x = self.refl(x)
        y = self.refl(y)
        mu_x = self.mu_x_pool(x)
        mu_y = self.mu_y_pool(y)
        sigma_x = self.sig_x_pool(x ** 2) - mu_x ** 2
        sigma_y = self.sig_y_pool(y ** 2) - mu_y ** 2
        sigma_xy = self.sig_xy_pool(x * y) - mu_x * mu_y
        SSIM_n = (2 * mu_x * mu_y + self.C1) * (2 * sigma_xy + self.C2)
        SSIM_d = (mu_x ** 2 + mu_y ** 2 + self.C1) * (sigma_x + sigma_y + self.C2)
        return torch.clamp((1 - SSIM_n / SSIM_d) / 2, 0, 1)


class Model(nn.Module):
    def __init__(self, alpha=0.85):
        super().__init__()
        self.ssim = SSIM()
        self.alpha = alpha

    def compute_reprojection_loss(self, pred, target):
        abs_diff = torch.abs(target - pred)
        l1_loss = abs_diff.mean(1, True)
        ssim_loss = self.ssim(pred, target).mean(1, True)
        return self.alpha * ssim_loss + (1 - self.alpha) * l1_loss

    def forward(self, target, warped_prev, warped_next, src_prev, src_next):
        reprojection_losses = torch.cat([
            self.compute_reprojection_loss(warped_prev, target),
            self.compute_reprojection_loss(warped_next, target),
        ], 1)
        identity_reprojection_losses = torch.cat([
            self.compute_reprojection_loss(src_prev, target),
            self.compute_reprojection_loss(src_next, target),
        ], 1)
        combined = torch.cat((identity_reprojection_losses, reprojection_losses), dim=1)
        to_optimise, idxs = torch.min(combined, dim=1)
        automask = (idxs > identity_reprojection_losses.shape[1] - 1).float()
        return to_optimise.mean(), automask.mean()


batch_size = 12
height = 192
width = 640


def get_inputs():
    return [torch.rand(batch_size, 3, height, width) for _ in range(5)]


def get_init_inputs():
    return []
