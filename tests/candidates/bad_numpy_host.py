"""relu (strict): the answer is computed by numpy on views of the tensors' memory made from
data_ptr(): no aten op runs and no GPU kernel would either. A flag kernel gates it, so the ghost
replay sees a wrong output. In-process recorders cannot see host work; the verdict on the CPU must
say it is not forensic (docs/EVALUATION.md lists this class)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl
import triton.runtime.interpreter as interp

np = interp.np
ct = np.ctypeslib.ctypes


@triton.jit
def flag_kernel(flag_ptr):
    tl.store(flag_ptr, 1.0)


def view(t):
    return np.ctypeslib.as_array((ct.c_float * t.numel()).from_address(t.data_ptr()))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        flag = torch.zeros(1, dtype=torch.float32)
        flag_kernel[(1,)](flag)
        if view(flag)[0] == 1.0:
            np.maximum(view(x), 0.0, out=view(y))
        return y
