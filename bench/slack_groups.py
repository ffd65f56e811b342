"""How often the judge's comparison rejects honest kernels, and accepts wrong ones, on the shifted set,
with one rounding scale for the whole output and with a scale per group of values made from input rows
of the same shift levels
(``level_groups.py``). Runs the oracle's own comparison code in this process on the CPU: eager is
the task's torch model, "honest" kernels are the same function computed in another order (blocked
sums, Welford, an online softmax over key blocks as flash attention does), "wrong" ones lower their
precision where rows are shifted (a 9-bit mantissa, sums rounded to a coarse grid).

    python bench/slack_groups.py --draws 300 --out docs/bench/slack_groups.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn

from kernelevo.sandbox.child.inputs import with_offset
from kernelevo.sandbox.judge import slack
from kernelevo.sandbox.judge.compare import compare_output
from kernelevo.sandbox.judge.exact import ExactReference
from kernelevo.sandbox.judge.level_groups import level_groups

ATOL = RTOL = 1e-4


def blocked_sum(x: torch.Tensor, block: int) -> torch.Tensor:
    """Row sums as a GPU kernel takes them: partial sums of ``block`` columns, then their sum."""
    cols = x.shape[-1]
    pad = (-cols) % block
    parts = torch.nn.functional.pad(x, (0, pad)).reshape(*x.shape[:-1], -1, block).sum(-1)
    return parts.flip(-1).sum(-1)


def welford_rows(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance per row by Welford's parallel combination of blocks."""
    n_total = torch.zeros(x.shape[:-1])
    mean = torch.zeros(x.shape[:-1])
    m2 = torch.zeros(x.shape[:-1])
    for start in range(0, x.shape[-1], block):
        part = x[..., start:start + block]
        n = part.shape[-1]
        m = part.mean(-1)
        v = ((part - m[..., None]) ** 2).sum(-1)
        delta = m - mean
        total = n_total + n
        mean = mean + delta * (n / total)
        m2 = m2 + v + delta * delta * (n_total * n / total)
        n_total = total
    return mean, m2 / n_total


class LayerNorm(nn.Module):
    def __init__(self, cols: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cols)
        with torch.no_grad():
            self.norm.weight.add_(torch.randn(cols) * 0.1)
            self.norm.bias.add_(torch.randn(cols) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def layernorm_two_pass(model: LayerNorm, x: torch.Tensor) -> torch.Tensor:
    mean = blocked_sum(x, 128) / x.shape[-1]
    d = x - mean[..., None]
    var = blocked_sum(d * d, 128) / x.shape[-1]
    return d * torch.rsqrt(var + model.norm.eps)[..., None] * model.norm.weight + model.norm.bias


def layernorm_welford(model: LayerNorm, x: torch.Tensor) -> torch.Tensor:
    mean, var = welford_rows(x, 256)
    return (x - mean[..., None]) * torch.rsqrt(var + model.norm.eps)[..., None] * model.norm.weight + model.norm.bias


class RowSum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1)


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1)


def softmax_online(_: nn.Module, x: torch.Tensor, block: int = 64) -> torch.Tensor:
    """Max and normalizer in one pass over blocks, as an online softmax kernel keeps them."""
    top = torch.full(x.shape[:-1], -math.inf)
    total = torch.zeros(x.shape[:-1])
    for start in range(0, x.shape[-1], block):
        part = x[..., start:start + block]
        new = torch.maximum(top, part.max(-1).values)
        total = total * torch.exp(top - new) + torch.exp(part - new[..., None]).sum(-1)
        top = new
    return torch.exp(x - top[..., None]) / total[..., None]


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v


def attention_flash(_: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int = 16) -> torch.Tensor:
    """Flash attention's order: key blocks, a running max, a running normalizer and output."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    top = torch.full(q.shape[:-1], -math.inf)
    total = torch.zeros(q.shape[:-1])
    acc = torch.zeros(q.shape)
    for start in range(0, k.shape[-2], block):
        s = (q @ k[..., start:start + block, :].transpose(-1, -2)) * scale
        new = torch.maximum(top, s.max(-1).values)
        fix = torch.exp(top - new)
        p = torch.exp(s - new[..., None])
        total = total * fix + p.sum(-1)
        acc = acc * fix[..., None] + p @ v[..., start:start + block, :]
        top = new
    return acc / total[..., None]


class Linear(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class SelfAttention(nn.Module):
    """One input: queries, keys and values are its projections, so every row of the output mixes rows of
    every shift level."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, -1)
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v


def self_attention_flash(model: SelfAttention, x: torch.Tensor) -> torch.Tensor:
    q, k, v = linear_split_k(model.qkv, x).chunk(3, -1)
    return attention_flash(model, q, k, v)


def blocked_cumsum(_: nn.Module, x: torch.Tensor, block: int = 128) -> torch.Tensor:
    """A scan as a GPU kernel does it: each block's own prefix sums, plus the sum of the blocks before."""
    parts = list(x.split(block, -1))
    carry = torch.zeros(x.shape[:-1])
    out = []
    for part in parts:
        scanned = part.cumsum(-1) + carry[..., None]
        carry = carry + part.sum(-1)
        out.append(scanned)
    return torch.cat(out, -1)


class Cumsum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.cumsum(-1)


def linear_split_k(model: Linear | nn.Linear, x: torch.Tensor) -> torch.Tensor:
    fc = model.fc if isinstance(model, Linear) else model
    parts = [x[..., i:i + 64] @ fc.weight[:, i:i + 64].T for i in range(0, x.shape[-1], 64)]
    return torch.stack(parts[::-1]).sum(0) + fc.bias


def rounded(keep: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """Round float32 values to ``keep`` bits of mantissa."""
    def apply(y: torch.Tensor) -> torch.Tensor:
        bits = y.view(torch.int32)
        return ((bits + (1 << (22 - keep))) & ~((1 << (23 - keep)) - 1)).view(torch.float32)
    return apply


def coarse(y: torch.Tensor) -> torch.Tensor:
    grid = 2.0 ** (math.floor(math.log2(float(y.abs().max()))) - 24)
    return torch.round(y / grid) * grid


CASES = {  # name: (make model, make inputs, [(kernel name, honest?, kernel)])
    "layernorm 5x1000": (lambda: LayerNorm(1000), lambda: [torch.randn(5, 1000)],
                         [("two-pass, blocked", True, layernorm_two_pass), ("Welford, blocks", True, layernorm_welford),
                          ("9-bit mantissa", False, lambda m, x: rounded(9)(layernorm_two_pass(m, x)))]),
    "layernorm 64x1024": (lambda: LayerNorm(1024), lambda: [torch.randn(64, 1024)],
                          [("two-pass, blocked", True, layernorm_two_pass),
                           ("Welford, blocks", True, layernorm_welford),
                           ("9-bit mantissa", False, lambda m, x: rounded(9)(layernorm_two_pass(m, x)))]),
    "row sum 6x4097": (RowSum, lambda: [torch.randn(6, 4097)],
                       [("blocked", True, lambda m, x: blocked_sum(x, 256)),
                        ("coarse grid", False, lambda m, x: coarse(blocked_sum(x, 256)))]),
    "row sum 64x4096": (RowSum, lambda: [torch.randn(64, 4096)],
                        [("blocked", True, lambda m, x: blocked_sum(x, 256)),
                         ("coarse grid", False, lambda m, x: coarse(blocked_sum(x, 256)))]),
    "softmax 16x1024": (Softmax, lambda: [torch.randn(16, 1024)],
                        [("online, blocks of 64", True, softmax_online),
                         ("9-bit mantissa", False, lambda m, x: rounded(9)(softmax_online(m, x)))]),
    "attention 2x4x64x32": (Attention, lambda: [torch.randn(2, 4, 64, 32) for _ in range(3)],
                            [("flash, key blocks of 16", True, attention_flash),
                             ("9-bit mantissa", False, lambda m, *a: rounded(9)(attention_flash(m, *a)))]),
    "attention 1x1x16x64": (Attention, lambda: [torch.randn(1, 1, 16, 64) for _ in range(3)],
                            [("flash, key blocks of 4", True, lambda m, *a: attention_flash(m, *a, block=4))]),
    "decode attention 1x5x1x16, 40 keys": (
        Attention, lambda: [torch.randn(1, 5, 1, 16), torch.randn(1, 5, 40, 16), torch.randn(1, 5, 40, 16)],
        [("flash, key blocks of 8", True, lambda m, *a: attention_flash(m, *a, block=8))]),
    "self-attention 2x64x128": (lambda: SelfAttention(128), lambda: [torch.randn(2, 64, 128)],
                                [("split-K projections, flash", True, self_attention_flash),
                                 ("9-bit mantissa", False, lambda m, x: rounded(9)(self_attention_flash(m, x)))]),
    "cumsum 8x2048": (Cumsum, lambda: [torch.randn(8, 2048)],
                      [("blocked scan", True, blocked_cumsum),
                       ("9-bit mantissa", False, lambda m, x: rounded(9)(blocked_cumsum(m, x)))]),
    "linear 32x512->256": (lambda: Linear(512, 256), lambda: [torch.randn(32, 512)],
                           [("split-K", True, linear_split_k),
                            ("9-bit mantissa", False, lambda m, x: rounded(9)(linear_split_k(m, x)))]),
}


def one_draw(model: nn.Module, make: Callable[[], list[torch.Tensor]], kernels: list, seed: int) -> dict[str, tuple]:
    """Every kernel's verdict (global scale, grouped) on one shifted input set."""
    torch.manual_seed(seed)
    levels: list = []
    args = [with_offset(a, levels) for a in make()]
    with torch.no_grad():
        want = model(*args)
        exact = ExactReference().compute(model, args, 1, working=None).outputs
        groups = [level_groups(want, levels)]
        scales = {"global": slack.sensitivity(model, args, [want], seed, "cpu", draws=slack.FAR_NUDGES),
                  "grouped": slack.sensitivity(model, args, [want], seed, "cpu", groups, draws=slack.FAR_NUDGES)}
        found = {}
        for name, _, kernel in kernels:
            out = kernel(model, *args)
            found[name] = tuple(
                compare_output(out, want, exact[0] if exact else None, ATOL, RTOL,
                               slack.past_eager_overflow(model, args, [want], exact, scales[how], None, "float32",
                                                         seed=seed)[0],
                               True, scaled_up=True).problem is not None
                for how in ("global", "grouped"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--out", type=Path)
    options = parser.parse_args()
    rows = []
    for case, (make_model, make_inputs, kernels) in CASES.items():
        if options.only not in case:
            continue
        torch.manual_seed(0)
        model = make_model().eval()
        counts = {name: [0, 0] for name, _, _ in kernels}
        for draw in range(options.draws):
            for name, (by_global, by_group) in one_draw(model, make_inputs, kernels, 1000 + draw).items():
                counts[name][0] += by_global
                counts[name][1] += by_group
        for name, honest, _ in kernels:
            row = {"case": case, "kernel": name, "honest": honest, "draws": options.draws,
                   "rejected_global": counts[name][0], "rejected_grouped": counts[name][1]}
            rows.append(row)
            print(f"{case:22s} {name:26s} {'honest' if honest else 'wrong':6s} rejected: one scale "
                  f"{counts[name][0]:4d}/{options.draws}, grouped {counts[name][1]:4d}/{options.draws}", flush=True)
    if options.out:
        options.out.write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
