"""batchnorm_eval: honest. A hand-written BatchNorm module (same state_dict keys as nn.BatchNorm2d:
weight, bias, running_mean, running_var, num_batches_tracked) whose Triton kernel reads all four
per-channel tensors on every call. load_state_dict of the reference's state gives the same outputs."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bn_kernel(x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, y_ptr, channels, plane, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    c = pid % channels
    scale = tl.load(w_ptr + c) / tl.sqrt(tl.load(var_ptr + c) + eps)
    shift = tl.load(b_ptr + c) - tl.load(mean_ptr + c) * scale
    for start in range(0, plane, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < plane
        x = tl.load(x_ptr + pid * plane + offs, mask=mask)
        tl.store(y_ptr + pid * plane + offs, x * scale + shift, mask=mask)


class TritonBatchNorm2d(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        bn_kernel[(n * c,)](x, self.running_mean, self.running_var, self.weight, self.bias, y, c, x[0, 0].numel(),
                            self.eps, BLOCK=256)
        return y


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = TritonBatchNorm2d(num_features)

    def forward(self, x):
        return self.bn(x)
