import torch
import torch.nn as nn
import torch.nn.functional as F


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return alpha_t * loss


class Model(nn.Module):
    """
    RetinaNet-style dense detection loss: sigmoid focal loss on per-anchor class logits
    plus smooth-L1 box regression on foreground anchors only, both normalized by the
    number of foreground anchors.
    """
    def __init__(self, alpha, gamma, beta, box_weight):
        super().__init__()
        self.alpha = alpha
        self.gamma = gamma
        self.beta = beta
        self.box_weight = box_weight

    def forward(self, cls_logits, cls_targets, box_pred, box_targets):
        foreground = cls_targets.sum(dim=-1) > 0
        num_fg = foreground.sum().clamp(min=1).to(cls_logits.dtype)
        cls_loss = sigmoid_focal_loss(cls_logits, cls_targets, self.alpha, self.gamma).sum()
        box_loss = F.smooth_l1_loss(box_pred, box_targets, beta=self.beta, reduction="none").sum(dim=-1)
        box_loss = torch.where(foreground, box_loss, torch.zeros_like(box_loss)).sum()
        return (cls_loss + self.box_weight * box_loss) / num_fg


num_anchors = 327680
num_classes = 80
alpha = 0.25
gamma = 2.0
beta = 1.0 / 9.0
box_weight = 1.0


def get_inputs():
    cls_logits = torch.randn(num_anchors, num_classes)
    labels = torch.randint(0, num_classes, (num_anchors,))
    is_fg = torch.rand(num_anchors) < 0.05
    cls_targets = F.one_hot(labels, num_classes).float() * is_fg.unsqueeze(-1).float()
    box_pred = torch.randn(num_anchors, 4)
    box_targets = torch.randn(num_anchors, 4)
    return [cls_logits, cls_targets, box_pred, box_targets]


def get_init_inputs():
    return [alpha, gamma, beta, box_weight]
