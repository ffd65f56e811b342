"""topk_router (tests/fixtures/tasks): honest top-k indices, accepted although eager orders tied
scores otherwise.

One program per row holds the row in registers and makes k rounds: the largest value not yet taken,
then the lowest index holding it, stored and marked taken. Among tied scores it names the lowest
indices first, a valid top-k on every input (torch leaves the order of ties unspecified)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def topk_rows_kernel(x_ptr, out_ptr, cols, K: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    values = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=float("-inf"))
    taken = offs >= cols
    for j in tl.static_range(K):
        live = tl.where(taken, float("-inf"), values)
        best = tl.max(live, 0)
        index = tl.min(tl.where((live == best) & (~taken), offs, BLOCK), 0)
        tl.store(out_ptr + row * K + j, index.to(tl.int64))
        taken = taken | (offs == index)


class ModelNew(nn.Module):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        scores = scores.contiguous()
        rows, cols = scores.shape
        out = torch.empty(rows, self.k, device=scores.device, dtype=torch.int64)
        topk_rows_kernel[(rows,)](scores, out, cols, K=self.k, BLOCK=triton.next_power_of_2(cols))
        return out
