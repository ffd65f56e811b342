"""The built-in policy's generated kernels, judged by the harness (the CPU interpreter here).

References are written the way users write them, under names that say nothing: the templates are
chosen by structure. Each case renders every strategy the policy would seed, on odd sizes, in fp32,
bf16 and fp16, and the harness must accept each one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import ON_GPU
from kernelevo.agent.builtin import split_passes
from kernelevo.agent.builtin.policy import seeds
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.recognize import recognise
from kernelevo.agent.builtin.templates import render
from kernelevo.tasks import load_task

TASK = '''import torch
import torch.nn as nn
import torch.nn.functional as F
{header}

class Model(nn.Module):
    def __init__(self, n: int = {cols}):
        super().__init__()
{init}

    def forward(self, {args}):
{body}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return []
'''

# (id, init lines, forward body, input expression(s), header lines)
CASES = [
    ("chain-params", "        self.b = nn.Parameter(torch.randn(n) * 0.1)",
     "        return F.gelu(x * 1.702 + self.b) * torch.sigmoid(x) - 0.5 * x", "torch.randn(3, {cols})", ""),
    ("chain-methods-bf16", "        pass",
     "        y = x.float().clamp(-1.5, 2.0).pow(2)\n        return (F.leaky_relu(y - 1, 0.2) / 3.0).to(x.dtype)",
     "torch.randn(5, {cols})", "DTYPE = torch.bfloat16"),
    ("two-inputs-fp16", "        self.act = nn.Hardswish()",
     "        return self.act(x) * torch.tanh(y) + torch.maximum(x, y)", "torch.randn(2, 3, {cols}), "
     "torch.randn(2, 3, {cols})", "DTYPE = torch.float16"),
    ("flat-gelu-tanh", "        pass", "        return F.gelu(x, approximate='tanh') + F.silu(x)",
     "torch.randn({cols})", ""),
    ("selu-hardtanh", "        self.act = nn.Hardtanh(-0.5, 2.0)",
     "        return self.act(torch.selu(x * 2.0)) + F.hardtanh(x, min_val=-1.5, max_val=0.25)",
     "torch.randn(4, {cols})", ""),
    ("chunk-glu-bf16", "        pass", "        a, b = x.chunk(2, dim=-1)\n        return F.silu(a) * b",
     "torch.randn(4, 2 * {cols})", "DTYPE = torch.bfloat16"),
    ("softmax-module", "        self.f = nn.Softmax(dim=-1)", "        return self.f(x * 0.5)", "torch.randn(3, {cols})",
     ""),
    ("log-softmax-bf16", "        pass", "        return F.log_softmax(x, dim=1)", "torch.randn(4, {cols})",
     "DTYPE = torch.bfloat16"),
    ("layernorm-by-hand", "        self.g = nn.Parameter(torch.ones(n) + 0.1 * torch.randn(n))",
     "        mu = x.mean(-1, keepdim=True)\n        var = ((x - mu) ** 2).mean(-1, keepdim=True)\n"
     "        return (x - mu) / torch.sqrt(var + 1e-5) * self.g", "torch.randn(3, {cols})", ""),
    ("layernorm-module-bf16", "        self.norm = nn.LayerNorm(n)\n        with torch.no_grad():\n"
     "            self.norm.bias.add_(torch.randn(n))", "        return self.norm(x)", "torch.randn(2, 2, {cols})",
     "DTYPE = torch.bfloat16"),
    ("rmsnorm-llama-bf16", "        self.w = nn.Parameter(1.0 + 0.1 * torch.randn(n))",
     "        xf = x.float()\n        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
     "        return self.w * xf.to(x.dtype)", "torch.randn(5, {cols})", "DTYPE = torch.bfloat16"),
    ("var-unbiased", "        pass", "        return torch.var(x, dim=-1)", "torch.randn(6, {cols})", ""),
    ("mean-then-scale", "        pass", "        return x.mean(dim=-1) * 2.0 + 1.0", "torch.randn(6, {cols})", ""),
    ("max-values-and-argmin", "        pass",
     "        v = x.max(dim=-1).values\n        return v - x.amin(-1)", "torch.randn(6, {cols})", ""),
    ("argmin", "        pass", "        return torch.argmin(x, dim=-1)", "torch.randn(6, {cols})", ""),
    ("amax-of-squares-bf16", "        pass", "        return (x * x).amax(dim=-1, keepdim=True) * 0.5",
     "torch.randn(3, {cols})", "DTYPE = torch.bfloat16"),
    ("per-row-diagonal-times-matrix", "        pass", "        return x.unsqueeze(1) * y",
     "torch.randn(5), torch.randn(5, {cols})", ""),
    ("per-row-input-added", "        pass", "        return torch.relu(x) + y * 2",
     "torch.randn(3, 2, {cols}), torch.randn(3, 2, 1)", ""),
    ("per-row-scaled-row-sum", "        pass", "        return (x * y).sum(-1)",
     "torch.randn(3, {cols}), torch.randn(3, 1)", ""),
    ("per-row-scaled-softmax", "        pass", "        return torch.softmax(x * y, dim=-1) + y",
     "torch.randn(3, {cols}), torch.randn(3, 1)", ""),
    ("row-value-reduced-again-plus-copy", "        pass",
     "        kept = x.clone().detach()\n        m = x.mean(dim=-1, keepdim=True)\n"
     "        return F.gelu(torch.logsumexp(m, dim=1, keepdim=True)) + kept", "torch.randn(4, {cols})", ""),
    ("loss-smooth-l1-beta", "        pass", "        return F.smooth_l1_loss(x, y, beta=0.5)",
     "torch.randn(4, {cols}), torch.randn(4, {cols})", ""),
    ("loss-huber-delta-sum", "        pass", "        return F.huber_loss(x, y, reduction='sum', delta=2.0)",
     "torch.randn(4, {cols}) * 3, torch.randn(4, {cols})", ""),
    ("loss-kl-batchmean", "        pass", "        return F.kl_div(torch.log(x), y, reduction='batchmean')",
     "torch.randn(4, {cols}).softmax(-1), torch.randn(4, {cols}).softmax(-1)", ""),
    ("cross-entropy-label-smoothing", "        pass", "        return F.cross_entropy(x, t, label_smoothing=0.1)",
     "torch.randn(6, {cols}), torch.randint(0, {cols}, (6,))", ""),
    ("cross-entropy-module-smoothing-ignored-rows-bf16", "        self.loss = nn.CrossEntropyLoss(ignore_index=2, label_smoothing=0.25)",
     "        return self.loss(x, t)", "torch.randn(9, {cols}), torch.randint(0, 4, (9,))", "DTYPE = torch.bfloat16"),
    ("cross-entropy-sum", "        pass", "        return F.cross_entropy(x, t, reduction='sum')",
     "torch.randn(6, {cols}), torch.randint(0, {cols}, (6,))", ""),
    # a language model's loss: the logits of each position against the next token, both views copied first
    ("cross-entropy-next-token-shifted-views", "        pass",
     "        logits, labels = x[:, :-1, :].contiguous(), t[:, 1:].contiguous()\n"
     "        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=3)",
     "torch.randn(3, 17, {cols}), torch.randint(0, 9, (3, 17))", ""),
    ("cross-entropy-segmentation-weighted-nll-ignored-pixels", "        self.register_buffer('w', torch.rand(21) + 0.5)",
     "        return F.nll_loss(F.log_softmax(x, dim=1), t, weight=self.w, ignore_index=255)",
     "torch.randn(3, 21, 5, 7), torch.where(torch.rand(3, 5, 7) < 0.2, 255, torch.randint(0, 21, (3, 5, 7)))", ""),
    ("cross-entropy-module-weighted-per-pixel-bf16", "        self.loss = nn.CrossEntropyLoss(weight=torch.rand(5) + 0.5, "
     "reduction='none')", "        return self.loss(x, t)", "torch.randn(2, 5, 33), torch.randint(0, 5, (2, 33))",
     "DTYPE = torch.bfloat16"),
    ("cross-entropy-weighted-sum-2d", "        self.register_buffer('w', torch.rand(n))",
     "        return F.cross_entropy(x, t, weight=self.w, reduction='sum')",
     "torch.randn(6, {cols}), torch.randint(0, {cols}, (6,))", ""),
    ("linear-relu-fp32", "        self.fc = nn.Linear(n, 40)", "        return torch.relu(self.fc(x)) * 2.0",
     "torch.randn(2, 3, {cols})", ""),
    ("linear-keywords-bias-passed-fp32", "        self.w = nn.Parameter(torch.randn(40, n) * 0.1)",
     "        return torch.relu(F.linear(input=x, weight=self.w, bias=y)) * 2.0",
     "torch.randn(2, 3, {cols}), torch.randn(40)", ""),
    ("mlp-two-stages-bf16", "        self.up = nn.Linear(n, 64)\n        self.down = nn.Linear(64, 24, bias=False)",
     "        return self.down(F.gelu(self.up(x), approximate='tanh'))", "torch.randn(7, {cols})",
     "DTYPE = torch.bfloat16"),
    ("attention-causal-bf16", "        pass", "        return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
     "torch.randn(1, 2, 50, 32), torch.randn(1, 2, 50, 32), torch.randn(1, 2, 50, 32)", "DTYPE = torch.bfloat16"),
    ("attention-scaled-fp32", "        pass", "        return F.scaled_dot_product_attention(q, k, v, scale=0.3)",
     "torch.randn(2, 1, 37, 16), torch.randn(2, 1, 37, 16), torch.randn(2, 1, 37, 16)", ""),
    ("attention-head-of-40-fp32", "        pass", "        return F.scaled_dot_product_attention(q, k, v)",
     "torch.randn(2, 2, 33, 40), torch.randn(2, 2, 33, 40), torch.randn(2, 2, 33, 40)", ""),
    ("attention-fewer-keys-causal-bf16", "        pass",
     "        return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
     "torch.randn(1, 2, 45, 24), torch.randn(1, 2, 30, 24), torch.randn(1, 2, 30, 24)", "DTYPE = torch.bfloat16"),
    ("attention-more-keys-head-of-8", "        pass", "        return F.scaled_dot_product_attention(q, k, v)",
     "torch.randn(2, 1, 20, 8), torch.randn(2, 1, 52, 8), torch.randn(2, 1, 52, 8)", ""),
    ("attention-head-wider-than-a-kernel", "        pass",
     "        return F.scaled_dot_product_attention(q, k, v, scale=0.05)",
     "torch.randn(1, 2, 24, 300), torch.randn(1, 2, 40, 300), torch.randn(1, 2, 40, 300)", ""),
    ("attention-bool-mask-passed-fp16", "        pass",
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)",
     "torch.randn(2, 2, 40, 32), torch.randn(2, 2, 70, 32), torch.randn(2, 2, 70, 32), "
     "((torch.arange(40)[:, None] % 7 != 3) & (torch.arange(70) % 5 != 0)).expand(2, 1, 40, 70)",
     "DTYPE = torch.float16"),
    ("attention-additive-mask-buffer-head-of-24", "        self.register_buffer('bias', torch.randn(33, 33))",
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, scale=0.2)",
     "torch.randn(2, 3, 33, 24), torch.randn(2, 3, 33, 24), torch.randn(2, 3, 33, 24)", ""),
    ("attention-grouped-query-heads-bf16", "        pass",
     "        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)",
     "torch.randn(2, 6, 40, 32), torch.randn(2, 2, 40, 32), torch.randn(2, 2, 40, 32)", "DTYPE = torch.bfloat16"),
    ("attention-heads-repeated-for-query-groups", "        pass",
     "        return F.scaled_dot_product_attention(q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1))",
     "torch.randn(1, 6, 33, 24), torch.randn(1, 2, 50, 24), torch.randn(1, 2, 50, 24)", ""),
    ("attention-by-hand-multi-query-causal", "        pass",
     "        s = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5\n"
     "        t = q.size(-2)\n"
     "        s = s.masked_fill(torch.tril(torch.ones(t, t)) == 0, float('-inf'))\n"
     "        return torch.softmax(s, dim=-1) @ v",
     "torch.randn(2, 4, 30, 16), torch.randn(2, 1, 30, 16), torch.randn(2, 1, 30, 16)", ""),
    ("attention-sliding-window-from-positions", "        self.window = 12",
     "        t = q.shape[2]\n        i = torch.arange(t, device=q.device).unsqueeze(1)\n"
     "        j = torch.arange(t, device=q.device).unsqueeze(0)\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (i - j < self.window))",
     "torch.randn(2, 2, 70, 16), torch.randn(2, 2, 70, 16), torch.randn(2, 2, 70, 16)", ""),
    ("attention-causal-ones-tril-mask-bf16", "        pass",
     "        m = torch.ones(q.size(2), k.size(2), dtype=torch.bool, device=q.device).tril(diagonal=2)\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)",
     "torch.randn(1, 3, 40, 32), torch.randn(1, 3, 40, 32), torch.randn(1, 3, 40, 32)", "DTYPE = torch.bfloat16"),
    ("attention-additive-minus-inf-triu-fp16", "        pass",
     "        t = q.size(-2)\n        m = torch.full((t, t), float('-inf'), device=q.device).triu(1).half()\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=m[None, None], scale=0.25)",
     "torch.randn(2, 2, 33, 16), torch.randn(2, 2, 33, 16), torch.randn(2, 2, 33, 16)", "DTYPE = torch.float16"),
    ("attention-distance-penalty-and-prefix-keys", "        pass",
     "        i = torch.arange(q.size(2), device=q.device)[:, None]\n"
     "        j = torch.arange(k.size(2), device=q.device)[None, :]\n"
     "        bias = -0.25 * (i - j).abs().float()\n"
     "        seen = (j < 4) | (j <= i + 8)\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~seen, float('-inf')))",
     "torch.randn(2, 1, 30, 24), torch.randn(2, 1, 45, 24), torch.randn(2, 1, 45, 24)", ""),
    ("one-hot-scattered-in-place-margin", "        pass",
     "        one_hot = torch.zeros(x.size(), device=x.device)\n        one_hot.scatter_(1, y.view(-1, 1).long(), 1)\n"
     "        return (one_hot * (x - 0.5)) + ((1.0 - one_hot) * x) * 3.0",
     "torch.randn(6, {cols}), torch.randint(0, {cols}, (6,))", ""),
    ("zeros-like-written-in-place-then-read", "        pass",
     "        z = torch.zeros_like(x)\n        z += x * 2\n        return torch.where(x > 0, z, torch.zeros_like(x)) + x",
     "torch.randn(4, {cols})", ""),
    ("views-of-an-input-flattened-then-shaped-as-it", "        pass",
     "        flat = x.flatten(1)\n        lo, hi = torch.aminmax(flat, dim=1, keepdim=True)\n"
     "        return ((flat - lo) / (hi - lo + 1e-6)).view_as(x)", "torch.randn(3, 4, 5, 60)", ""),
    ("attention-rows-of-finfo-min-from-positions", "        pass",
     "        t = q.size(2)\n        m = torch.full((t, t), torch.finfo(q.dtype).min, device=q.device).triu(0)\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)",
     "torch.randn(1, 2, 20, 16), torch.randn(1, 2, 20, 16), torch.randn(1, 2, 20, 16)", ""),
    ("attention-chunked-causal-through-an-integer-cast", "        pass",
     "        i = torch.arange(q.size(2), device=q.device)[:, None]\n"
     "        j = torch.arange(k.size(2), device=q.device)[None, :]\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=(j * 0.2).int() <= (i * 0.2).int())",
     "torch.randn(1, 2, 150, 16), torch.randn(1, 2, 150, 16), torch.randn(1, 2, 150, 16)", ""),
    ("mha-viewed-with-a-sliding-window-from-positions", "        self.window = 9",
     "        b, n, c = x.shape\n        q, k, v = x.reshape(b, n, 3, 4, c // 12).permute(2, 0, 3, 1, 4).unbind(0)\n"
     "        i = torch.arange(n, device=x.device)\n"
     "        m = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < self.window)\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)", "torch.randn(2, 70, 96)", ""),
    ("attention-negative-scale-fp32", "        pass",
     "        return F.scaled_dot_product_attention(q, k, v, scale=-0.5)",
     "torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 16)", ""),
    # tensors made in forward: fx keeps them on the traced module, so a candidate reads them as numbers
    ("conv-min-made-tensor", "        self.conv = nn.Conv2d(3, 6, 3)\n        self.b = nn.Parameter(torch.randn(6, 1, 1))",
     "        return (torch.min(self.conv(x), torch.tensor(0.5)) + self.b) * 2.0", "torch.randn(2, 3, 6, 7)", ""),
    ("conv-then-dropout-of-nothing-partial", "        self.conv = nn.Conv2d(3, 6, 3, bias=False)\n        self.drop = nn.Dropout(0.0)",
     "        return self.drop(self.conv(x))", "torch.randn(2, 3, 6, 7)", "ALLOW_PARTIAL = True"),
    ("masked-mean-pool-integer-mask", "        pass",
     "        m = y.unsqueeze(-1).to(x.dtype)\n        return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)",
     "torch.randn(3, 5, {cols}), torch.randint(0, 2, (3, 5))", ""),
    ("pointwise-one-value-parameter-exp", "        self.s = nn.Parameter(torch.tensor(2.6592))",
     "        return self.s.exp() * torch.tanh(x) + self.s.sigmoid()", "torch.randn(3, {cols})", ""),
    ("integer-input-size-read", "        pass", "        return x * y.float() / y.size(-1)",
     "torch.randn(3, {cols}), torch.randint(0, 5, (3, {cols}))", ""),
    ("alibi-positions-softmax", "        self.register_buffer('slopes', 2.0 ** -torch.arange(1.0, 4.0))",
     "        t = x.size(-1)\n        pos = torch.arange(t, device=x.device)\n"
     "        bias = (pos[None, :] - pos[:, None]).float()\n"
     "        return torch.softmax(x + self.slopes[:, None, None] * bias, dim=-1)", "torch.randn(2, 3, 37, 37)", ""),
    ("causal-mask-from-positions-bf16", "        pass",
     "        i = torch.arange(x.shape[-1], device=x.device)\n"
     "        return torch.softmax(x.masked_fill(i[None, :] > i[:, None], float('-inf')), -1)",
     "torch.randn(2, 33, 33)", "DTYPE = torch.bfloat16"),
    ("positions-along-rows-start-step", "        pass",
     "        p = torch.arange(1, 2 * x.size(1) + 1, 2, device=x.device).to(x.dtype)\n"
     "        return x * p.unsqueeze(-1) - torch.arange(x.size(-1), device=x.device)",
     "torch.randn(3, 50, {cols})", ""),
    ("mean-then-scalar-tail", "        pass", "        return torch.sqrt(x.mean() * 3.0 + y.sum())",
     "torch.randn(3, {cols}).abs(), torch.randn(5, 7).abs()", ""),
    ("glu-over-channels", "        pass", "        return F.glu(x, dim=1)", "torch.randn(3, 8, {cols})", ""),
    ("chunk-three-along-dim0-softmax-bf16", "        pass",
     "        a, b, c = x.chunk(3, dim=0)\n        return torch.softmax(a * b + c, dim=-1)",
     "torch.randn(6, 5, {cols})", "DTYPE = torch.bfloat16"),
    ("chunk-before-rows-norm", "        pass",
     "        a, b = torch.chunk(x, 2, -3)\n        return b * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6)",
     "torch.randn(2, 4, 3, {cols})", ""),
    ("learned-positions-added", "        self.wpe = nn.Embedding(64, n)",
     "        return x + self.wpe(torch.arange(x.size(1), device=x.device))", "torch.randn(2, 37, {cols})", ""),
    ("token-and-position-embeddings", "        self.wte = nn.Embedding(50, n)\n        self.wpe = nn.Embedding(40, n)",
     "        b, t = x.size()\n        pos = torch.arange(0, t, dtype=torch.long, device=x.device)\n"
     "        return self.wte(x) + self.wpe(pos)", "torch.randint(0, 50, (3, 29))", ""),
    ("mean-then-parameter-tail", "        self.w = nn.Parameter(torch.tensor(2.0))",
     "        return x.mean() * self.w + 1.0", "torch.randn(3, {cols})", ""),
    ("chunk-then-channel-parameter", "        self.bias = nn.Parameter(torch.randn(4))",
     "        a, b = x.chunk(2, dim=1)\n        return a * torch.sigmoid(b) + self.bias[:, None]",
     "torch.randn(3, 8, {cols})", ""),
    ("positions-per-row-before-softmax", "        pass",
     "        p = torch.arange(x.size(1), device=x.device)[:, None]\n"
     "        return torch.softmax(x * (p + 1) * 0.01, -1)", "torch.randn(2, 6, {cols})", ""),
    ("cosine-classifier-normalised-weight", "        self.weight = nn.Parameter(torch.randn(24, n))\n        self.s = 30.0",
     "        return F.linear(F.normalize(x, dim=-1), F.normalize(self.weight, dim=-1)) * self.s",
     "torch.randn(5, {cols})", ""),
    ("linear-of-a-scaled-weight-plus-bias", "        self.proj = nn.Linear(n, 16)",
     "        return F.linear(x, self.proj.weight * 0.5, self.proj.bias)", "torch.randn(7, {cols})", ""),
    ("helper-module-forward-left-out", "        self.s = Scale(n)", "        return torch.tanh(self.s(x))",
     "torch.randn(3, {cols})",
     "class Scale(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
     "        self.w = nn.Parameter(torch.rand(n) + 0.5)\n\n    def forward(self, x):\n"
     "        return torch.mul(x, torch.rsqrt(self.w))\n"),
    ("contrastive-loss-diagonal-labels", "        pass",
     "        logits = x @ y.t() / 0.07\n"
     "        return F.cross_entropy(logits, torch.arange(x.size(0), device=x.device), reduction='sum')",
     "torch.randn(6, {cols}), torch.randn(6, {cols})", ""),
    ("tanh-of-small-values", "        pass", "        return torch.tanh(x * 0.0625) + F.mish(x * 0.01)",
     "torch.randn(3, {cols})", ""),
    ("per-row-input-indexed-with-none", "        pass", "        return x * y[:, None] + torch.exp(y[..., None])",
     "torch.randn(3, {cols}), torch.randn(3)", ""),
    ("grouped-mean-through-a-view", "        self.heads = 4",
     "        b, t, c = x.shape\n        return x.view(b, t, self.heads, c // self.heads).mean(2)",
     "torch.randn(2, 6, {cols})", ""),
    ("grouped-sum-through-a-reshape-bf16", "        pass", "        return x.reshape(x.shape[0], 8, -1).sum(-1) * 0.5",
     "torch.randn(3, {cols}).bfloat16()", ""),
    ("max-pool-module-indices-dropped", "        self.pool = nn.MaxPool2d(2, return_indices=True)",
     "        y, _ = self.pool(x)\n        return torch.relu(y)", "torch.randn(2, 3, 8, {cols} // 100)", ""),
    ("pointwise-made-tensors", "        pass", "        return torch.maximum(x, torch.tensor(-0.25)) * torch.tensor(3)",
     "torch.randn(3, {cols})", ""),
    ("pointwise-made-tensors-cast", "        pass",
     "        return x * torch.tensor(0.5).to(x.dtype) + torch.tensor(3).to(x.device).to(torch.float16)",
     "torch.randn(3, {cols})", "DTYPE = torch.bfloat16"),
    ("conv-partial", "        self.conv = nn.Conv2d(3, 3, 3, padding=1)\n"
     "        self.g = nn.Parameter(torch.randn(3, 1, 1))",
     "        return torch.sigmoid(self.conv(x)) * self.g + x", "torch.randn(2, 3, 5, {cols} // 100)",
     "ALLOW_PARTIAL = True"),
    ("linear-plus-residual-input-bf16", "        self.fc = nn.Linear(n, 40)",
     "        return x + self.fc(y) * 0.5", "torch.randn(3, 2, 40), torch.randn(3, 2, {cols})",
     "DTYPE = torch.bfloat16"),
    ("linear-residual-bf16", "        self.fc = nn.Linear(n, n)", "        return x + 0.5 * F.silu(self.fc(x))",
     "torch.randn(3, 4, {cols})", "DTYPE = torch.bfloat16"),
    ("matmul-param-fp16", "        self.w = nn.Parameter(torch.randn(n, 48) * 0.05)\n"
     "        self.b = nn.Parameter(torch.randn(48))", "        return F.silu(x @ self.w + self.b)",
     "torch.randn(9, {cols})", "DTYPE = torch.float16"),
    ("linear-sigmoid-sum-tail", "        self.fc = nn.Linear(n, 40)",
     "        return torch.sum(torch.sigmoid(self.fc(x)), dim=1, keepdim=True) * 1.5", "torch.randn(7, {cols})", ""),
    ("linear-softmax-tail-bf16", "        self.fc = nn.Linear(n, 72)",
     "        return torch.softmax(self.fc(x) / 2.0, dim=-1)", "torch.randn(2, 5, {cols})", "DTYPE = torch.bfloat16"),
    ("linear-logsumexp-tail", "        self.fc = nn.Linear(n, 56)",
     "        y = torch.logsumexp(self.fc(x).detach() * 3.0, dim=1, keepdim=True)\n"
     "        return F.leaky_relu(y, 0.1)", "torch.randn(9, {cols})", ""),
    ("dim-max-values", "        pass", "        return torch.max(x, dim=1)[0]", "torch.randn(3, 70, 45)", ""),
    ("dim-argmin-bf16", "        pass", "        return torch.argmin(x, dim=0)", "torch.randn(70, 3, 45)",
     "DTYPE = torch.bfloat16"),
    ("dim-mean-keepdim-fp16", "        pass", "        return x.mean(dim=(1, 2), keepdim=True)",
     "torch.randn(2, 9, 11, 37)", "DTYPE = torch.float16"),
    ("dim-global-mean-and-all", "        pass", "        return torch.amax(x.mean(dim=(2, 3)) * 2.0)",
     "torch.randn(2, 3, 7, 9)", ""),
    ("resample-bilinear-plus-input", "        pass",
     "        return F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False) + y",
     "torch.randn(2, 3, 5, 7), torch.randn(2, 3, 10, 14)", ""),
    ("resample-nearest-exact-to-size-bf16", "        pass", "        return F.interpolate(x, size=(7, 13), mode='nearest-exact')",
     "torch.randn(2, 3, 5, 19)", "DTYPE = torch.bfloat16"),
    ("resample-upsample-module-trilinear-aligned",
     "        self.up = nn.Upsample(scale_factor=(1.5, 2, 0.5), mode='trilinear', align_corners=True)",
     "        return torch.relu(self.up(x))", "torch.randn(1, 2, 4, 5, 8)", ""),
    ("resample-linear-1d-recomputed", "        pass",
     "        return F.interpolate(x, scale_factor=1.7, mode='linear', recompute_scale_factor=True) * 2.0",
     "torch.randn(2, 3, 11)", ""),
    ("resample-nearest-fractional-fp16", "        pass", "        return F.interpolate(x, scale_factor=1.3)",
     "torch.randn(2, 3, 7, 10)", "DTYPE = torch.float16"),
    ("resample-pixel-unshuffle-module", "        self.ps = nn.PixelUnshuffle(2)", "        return self.ps(x) - 0.5",
     "torch.randn(2, 3, 6, 8)", ""),
    ("resample-pixel-shuffle-function", "        pass", "        return F.pixel_shuffle(x, 3)",
     "torch.randn(2, 18, 4, 5)", ""),
    ("embedding-lookup-then-scale", "        self.emb = nn.Embedding(50, n)", "        return self.emb(x) * 2.0",
     "torch.randint(0, 50, (3, 7))", ""),
    ("embedding-function-bf16", "        self.table = nn.Parameter(torch.randn(40, n))",
     "        return F.embedding(x, self.table)", "torch.randint(0, 40, (5, 3))", "DTYPE = torch.bfloat16"),
    ("mask-input-bool-fill", "        pass", "        return x.masked_fill(y, -1.0) * 2.0",
     "torch.randn(4, {cols}), torch.randn(4, {cols}) > 0.5", ""),
    ("int-input-as-numbers", "        pass",
     "        return (x.float() * 0.5 + 1.0).sqrt() + torch.where(x > 50, 1.0, 0.0)", "torch.randint(0, 100, (6, {cols}))",
     ""),
    ("rearrange-cat-three-dim0-sigmoid", "        pass", "        return torch.sigmoid(torch.cat([x, y, x], dim=0))",
     "torch.randn(3, {cols}), torch.randn(2, {cols})", ""),
    # a ViT's class token: a parameter expanded to the batch, read broadcast (no copy), then a position table
    ("rearrange-cat-class-token-then-positions",
     "        self.cls = nn.Parameter(torch.randn(1, 1, n))\n        self.pos = nn.Parameter(torch.randn(1, 5, n))",
     "        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos", "torch.randn(3, 4, {cols})",
     ""),
    # tensors built from sizes alone: a factory's output made once per size in forward, the rest in kernels
    ("made-tril-of-ones-as-right-operand", "        pass",
     "        m = torch.ones(x.size(1), x.size(1), device=x.device).tril()\n        return x @ m", "torch.randn(5, 37)", ""),
    ("made-eye-in-torch-where-torch-may-compute", "        pass",
     "        return x @ (torch.eye(x.shape[1], device=x.device) * 2.0 + 1.0)", "torch.randn(6, 29)", "ALLOW_PARTIAL = True"),
    ("made-frequencies-then-cos-and-sin", "        self.half = n // 40",
     "        f = torch.exp(torch.arange(self.half, dtype=torch.float32, device=x.device) * -0.05)\n"
     "        a = x[:, None] * f[None]\n        return torch.cat([a.cos(), a.sin()], dim=-1)", "torch.rand(37) * 10", ""),
    # every row of one input against every row of another, reduced over the last dim: the program runs
    # over the broadcast value, never stored
    ("distances-every-row-to-every-row", "        pass",
     "        return (x.unsqueeze(-2) - y.unsqueeze(-3)).pow(2).sum(-1).sqrt()", "torch.randn(2, 7, 33), torch.randn(2, 5, 33)",
     ""),
    ("kron-of-two-inputs", "        pass", "        return torch.kron(x, y) - 0.5", "torch.randn(5, 7), torch.randn(3, 4)", ""),
    ("cdist-l1-of-batched-rows", "        pass", "        return torch.cdist(x, y, p=1.0)",
     "torch.randn(2, 6, 19), torch.randn(2, 9, 19)", ""),
    ("bmm-batch-of-vectors-made-columns", "        pass", "        return torch.bmm(x, y.unsqueeze(-1)).squeeze(-1)",
     "torch.randn(3, 7, 33), torch.randn(3, 33)", ""),
    # a causal mask of ones made in forward: positions compared in the kernel, no mask in memory
    ("causal-mask-of-ones-made-in-forward", "        pass",
     "        t = x.size(-1)\n        m = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)\n"
     "        return x.masked_fill(m, float('-inf')).softmax(-1)", "torch.randn(2, 3, 37, 37)", ""),
    ("lower-triangle-mask-method-in-where", "        pass",
     "        t = x.shape[-1]\n        m = torch.ones(t, t, dtype=torch.bool, device=x.device).tril(-1)\n"
     "        return torch.where(m, x, 0.0) * 2.0", "torch.randn(29, 29)", ""),
    # BERT's positions: a buffer sliced by a size read in forward, taken as a view in forward, then looked up
    ("buffer-positions-sliced-by-size",
     "        self.pos = nn.Embedding(40, n)\n        self.register_buffer('position_ids', torch.arange(40).expand((1, -1)))",
     "        return x + self.pos(self.position_ids[:, :x.size(1)])", "torch.randn(2, 17, {cols})", ""),
    ("rearrange-pad-last-two-bf16", "        pass", "        return F.pad(x, (2, 1, 0, 3), value=-2.0) * 1.5",
     "torch.randn(2, 5, 37)", "DTYPE = torch.bfloat16"),
    # quotients that meet a rounding boundary must be eager's to the last place: a number over a tensor
    # is torch's reciprocal times the number, hardsigmoid is a clamp of x + 3 over 6
    ("quantiser-number-over-amax", "        pass",
     "        return torch.round(x * (127.0 / x.abs().amax(-1, keepdim=True)))",
     "torch.randn(32, {cols})", ""),
    ("floor-of-hardsigmoid-times-six", "        pass", "        return torch.floor(F.hardsigmoid(x) * 6.0)",
     "torch.randint(-4, 4, (64, {cols})).float()", ""),
    # losses: a whole tensor reduced to one value after pointwise work, in one kernel over all its values
    # (few rows, split across programs), or, where a tensor broadcasts against it, per row and then over rows
    ("loss-mean-of-squared-difference", "        pass", "        return ((x - y) ** 2).mean()",
     "torch.randn(96, {cols}), torch.randn(96, {cols})", ""),
    ("loss-huber-function-bf16", "        pass", "        return F.smooth_l1_loss(x, y, beta=0.5) * 2.0",
     "torch.randn(3, 32, {cols}), torch.randn(3, 32, {cols})", "DTYPE = torch.bfloat16"),
    ("loss-product-sum-all-dims-kept-then-scaled", "        pass",
     "        return (x * y).sum(dim=(0, 1, 2), keepdim=True) * 0.5 + 1.0",
     "torch.randn(2, 50, {cols}), torch.randn(2, 50, {cols})", ""),
    ("loss-largest-error-and-frobenius-norm", "        pass",
     "        return (x - y).abs().max() + 0.5 * torch.norm(x - y) + x.var()",
     "torch.randn(40, {cols}), torch.randn(40, {cols})", ""),
    ("loss-mean-square-plus-largest-magnitude", "        pass", "        return (x * x).mean() + 0.1 * x.abs().amax()",
     "torch.randn(30, {cols})", ""),
    ("loss-hinge-target-per-column", "        pass", "        return torch.clamp(1 - x * y, min=0).mean()",
     "torch.randn(48, {cols}), torch.randn({cols})", ""),
    ("loss-weighted-per-channel-sum-all-dims", "        self.w = nn.Parameter(torch.rand(6))",
     "        return (self.w.view(1, -1, 1) * (x - y).abs()).sum(dim=(0, 1, 2), keepdim=True)",
     "torch.randn(4, 6, {cols}), torch.randn(4, 6, {cols})", ""),
    # views of an input that start past its first element, read through strides where they lie: finite
    # differences (total variation), a shifted pair of sequences, a transpose reduced over its last dim
    ("views-total-variation-slices-from-sizes", "        pass",
     "        h, w = x.size(2), x.size(3)\n"
     "        dh = (x[:, :, 1:, :] - x[:, :, :h - 1, :]).pow(2).sum()\n"
     "        dw = (x[:, :, :, 1:] - x[:, :, :, :w - 1]).abs().mean()\n"
     "        return dh / (h - 1) + dw", "torch.randn(2, 3, 17, 45)", ""),
    ("views-shifted-pair-reduced-per-row-bf16", "        pass",
     "        return (x[:, :-1] * y[:, 1:]).sum(-1)", "torch.randn(6, {cols}), torch.randn(6, {cols})",
     "DTYPE = torch.bfloat16"),
    # rows of no values: a sum over them is 0 and a mean NaN, as torch gives them (and nothing is read)
    ("views-empty-rows-reduced", "        pass",
     "        return (x[:, 1:] - x[:, :-1]).sum(-1) + x.sum(dim=0)", "torch.randn(9, 1)", ""),
    ("views-transpose-softmax-rows", "        pass", "        return torch.softmax(x.transpose(1, 2) * 0.5, dim=-1)",
     "torch.randn(3, 40, 24)", ""),
    # the edge repeated, as image models pad before a convolution or a pooling (modules and F.pad modes)
    ("rearrange-reflection-pad-module", "        self.pad = nn.ReflectionPad2d((1, 2, 3, 1))",
     "        return torch.relu(self.pad(x)) * 2.0", "torch.randn(2, 3, 9, 11)", ""),
    ("rearrange-replicate-pad-function-bf16", "        pass", "        return F.pad(x, (3, 0), mode='replicate') - x.mean()",
     "torch.randn(4, 6, 21)", "DTYPE = torch.bfloat16"),
    ("rearrange-circular-pad-3d-module", "        self.pad = nn.CircularPad3d((0, 2, 1, 1, 2, 0))",
     "        return self.pad(x) + 1.0", "torch.randn(2, 2, 3, 4, 5)", ""),
    ("rearrange-constant-pad-module-value", "        self.pad = nn.ConstantPad1d((2, 5), -1.5)",
     "        return self.pad(x)", "torch.randn(3, 4, 19)", ""),
    ("rearrange-flip-two-dims-plus-input", "        pass", "        return x.flip(0, 2) + y",
     "torch.randn(3, 4, 50), torch.randn(3, 4, 50)", ""),
    ("rearrange-roll-negative-two-dims", "        pass",
     "        return torch.roll(x, shifts=(-2, 5), dims=(0, 1)) * 2.0", "torch.randn(5, 33)", ""),
    ("rearrange-repeat-3d", "        pass", "        return x.repeat(2, 1, 3) - 1.0", "torch.randn(2, 3, 17)", ""),
    ("rearrange-triangles-of-an-input", "        pass", "        return torch.tril(x, -1) + x.triu(2) * 0.5",
     "torch.randn(2, 9, 13)", ""),
    ("rearrange-diff-dim0-bf16", "        pass", "        return torch.diff(x, dim=0) * 3.0", "torch.randn(7, {cols})",
     "DTYPE = torch.bfloat16"),
    ("lookup-rows-of-an-input", "        pass", "        return torch.index_select(x, 0, y) * 2.0 + x[y]",
     "torch.randn(30, {cols}), torch.randint(0, 30, (11,))", ""),
    ("global-max-pool-module", "        self.pool = nn.AdaptiveMaxPool2d(1)", "        return self.pool(x).flatten(1) - 1.0",
     "torch.randn(2, 3, 7, 9)", ""),
    ("scan-logcumsumexp-dim0", "        pass", "        return torch.logcumsumexp(x * 3.0, dim=0) - 1.0",
     "torch.randn(37, 5, 9)", ""),
    ("lookup-negative-indices", "        pass", "        return x[y] * 1.5", "torch.randn(30, {cols}), torch.randint(-30, 30, (11,))",
     ""),
    ("gather-along-last-dim", "        pass", "        return torch.gather(x, 1, y)",
     "torch.randn(6, {cols}), torch.randint(0, {cols}, (6, 37))", ""),
    ("gather-method-dim0-smaller-index-bf16", "        pass", "        return x.gather(0, y)",
     "torch.randn(5, 4, 9), torch.randint(0, 5, (3, 4, 7))", "DTYPE = torch.bfloat16"),
    ("gather-take-along-buffer-then-scale", "        self.register_buffer('table', torch.randn(4, 30))",
     "        return torch.take_along_dim(self.table, x, dim=1) * 2.0", "torch.randint(0, 30, (4, 11))", ""),
    ("unfold-function-strided", "        pass", "        return F.unfold(x, kernel_size=2, stride=2)",
     "torch.randn(2, 3, 8, 10)", ""),
    ("unfold-module-padded-dilated-then-sum", "        self.u = nn.Unfold((3, 2), dilation=(2, 1), padding=1, stride=(1, 2))",
     "        return self.u(x).sum(dim=1)", "torch.randn(2, 3, 9, 7)", ""),
    ("linear-lstm-cell-chunks", "        self.fc = nn.Linear(n, 4 * 16)",
     "        i, f, g, o = self.fc(x).chunk(4, dim=1)\n        c = torch.sigmoid(f) * y + torch.sigmoid(i) * torch.tanh(g)\n"
     "        return torch.sigmoid(o) * torch.tanh(c)", "torch.randn(6, {cols}), torch.randn(6, 16)", ""),
    ("embedding-bag-sum-module", "        self.bag = nn.EmbeddingBag(40, n, mode='sum')", "        return self.bag(x)",
     "torch.randint(0, 40, (5, 3))", ""),
    ("embedding-bag-max-then-scale", "        self.bag = nn.EmbeddingBag(30, n, mode='max')", "        return self.bag(x) * 0.5",
     "torch.randint(0, 30, (4, 6))", ""),
    ("views-channel-shuffle", "        self.groups = 3",
     "        b, c, h, w = x.size()\n        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous()\n"
     "        return x.view(b, c, h, w)", "torch.randn(2, 12, 5, 7)", ""),
    ("views-permute-then-gelu-bf16", "        pass", "        return F.gelu(x.permute(2, 0, 1).contiguous()) * 2.0",
     "torch.randn(3, 6, 37)", "DTYPE = torch.bfloat16"),
    ("views-crop-times-input", "        pass", "        return x[:, :, 2:y.shape[-1] + 2] * y",
     "torch.randn(3, 5, 13), torch.randn(3, 5, 7)", ""),
    ("views-expand-then-reshape", "        pass",
     "        return torch.tanh(x.unsqueeze(1).expand(-1, 3, -1).reshape(x.size(0), -1))", "torch.randn(4, 9)", ""),
    ("views-reshape-copies-then-transposed-again", "        pass",
     "        return x.transpose(1, 2).reshape(x.shape[0], -1).t() * 3.0", "torch.randn(3, 4, 10)", ""),
    ("views-two-copies-and-flatten", "        pass",
     "        y = x.transpose(0, 1).contiguous().view(-1, 4).t().contiguous()\n        return torch.flatten(y.mT, 0) - 1.0",
     "torch.randn(6, 10)", ""),
    ("views-narrow-by-a-size-fp16", "        pass", "        return torch.relu(x.narrow(1, 2, x.size(1) - 4).swapaxes(0, 2))",
     "torch.randn(3, 11, 5)", "DTYPE = torch.float16"),
    ("views-causal-conv-cropped-sequence", "        self.conv = nn.Conv1d(4, 4, 3, groups=4, padding=2)",
     "        return F.silu(self.conv(x)[..., :x.shape[-1]])", "torch.randn(2, 4, 20)", ""),
    ("views-token-mixing-linear-sequence", "        self.fc = nn.Linear(7, 7)",
     "        return torch.relu(self.fc(x.transpose(1, 2)).transpose(1, 2) + x)", "torch.randn(2, 7, 16)", ""),
    ("mha-module-self-batch-first", "        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)",
     "        return self.mha(x, x, x, need_weights=False)[0]", "torch.randn(2, 9, 16)", ""),
    ("mha-module-sequence-first-weights-unused-bf16", "        self.mha = nn.MultiheadAttention(24, 3, bias=False)",
     "        out, _ = self.mha(x, x, x)\n        return out", "torch.randn(7, 2, 24)", "DTYPE = torch.bfloat16"),
    ("mha-by-hand-heads-viewed", "        self.qkv = nn.Linear(32, 96)\n        self.proj = nn.Linear(32, 32)",
     "        b, n, c = x.shape\n        q, k, v = self.qkv(x).reshape(b, n, 3, 4, c // 4).permute(2, 0, 3, 1, 4).unbind(0)\n"
     "        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
     "        return self.proj(y.transpose(1, 2).reshape(b, n, c))", "torch.randn(2, 11, 32)", ""),
    ("attention-by-hand-causal-mask-built-in-forward", "        pass",
     "        t = q.size(-2)\n        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
     "        s = s.masked_fill(torch.tril(torch.ones(t, t, device=q.device)) == 0, float('-inf'))\n"
     "        return torch.softmax(s, dim=-1) @ v", "torch.randn(2, 3, 17, 16), torch.randn(2, 3, 17, 16), "
     "torch.randn(2, 3, 17, 16)", "import math"),
    ("attention-by-hand-causal-positions-bf16", "        pass",
     "        i = torch.arange(q.shape[2], device=q.device)\n        s = q @ k.transpose(-2, -1) / 4.0\n"
     "        return torch.softmax(s.masked_fill(i[None, :] > i[:, None], float('-inf')), dim=-1) @ v",
     "torch.randn(2, 3, 19, 16), torch.randn(2, 3, 19, 16), torch.randn(2, 3, 19, 16)", "DTYPE = torch.bfloat16"),
    ("attention-by-hand-unscaled-bf16", "        pass", "        return torch.matmul(F.softmax(q @ k.mT, dim=3), v)",
     "torch.randn(2, 2, 9, 8), torch.randn(2, 2, 12, 8), torch.randn(2, 2, 12, 8)", "DTYPE = torch.bfloat16"),
    ("linear-sequential-layers-by-index", "        self.net = nn.Sequential(nn.Linear(n, 32), nn.ReLU(), nn.Linear(32, 16))",
     "        return self.net(x)", "torch.randn(5, {cols})", ""),
    ("views-scan-less-its-first-column", "        pass", "        return torch.cumsum(x, 1) - x[:, :1]",
     "torch.randn(3, 40)", ""),
    ("rotary-for-attention-chunked", "        pass",
     "        return q * k + torch.cat((-q.chunk(2, -1)[1], q.chunk(2, -1)[0]), dim=-1) * v",
     "torch.randn(2, 3, 5, 8), torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)", ""),
    ("rotary-for-attention-sliced-tables-bf16", "        pass",
     "        h = q.shape[-1] // 2\n        rot = torch.cat((-q[..., h:], q[..., :h]), dim=-1)\n        return rot * v + q * k",
     "torch.randn(2, 7, 3, 12), torch.randn(7, 1, 12), torch.randn(7, 1, 12)", "DTYPE = torch.bfloat16"),
    ("rearrange-cat-then-reciprocal", "        pass", "        return 1.0 / torch.cat([x, y], dim=1)",
     "torch.randn(3, {cols}), torch.randn(3, 7)", ""),
    ("dims-apart-amax", "        pass", "        return torch.amax(x, dim=(0, 2))", "torch.randn(6, 5, 37)", ""),
    ("dims-apart-norm-keepdim-bf16", "        pass",
     "        return torch.linalg.vector_norm(x, 2, dim=(1, 3), keepdim=True) * 0.5", "torch.randn(3, 4, 5, 33)",
     "DTYPE = torch.bfloat16"),
    ("dims-apart-logsumexp-plus-mean", "        pass",
     "        return torch.logsumexp(x, dim=(0, 2)) + x.mean((2, 0))", "torch.randn(5, 7, 41)", ""),
    ("pointwise-more-unary", "        self.shrink = nn.Tanhshrink()\n        self.logsig = nn.LogSigmoid()",
     "        y = torch.sin(x) + torch.cos(x) * F.logsigmoid(x) + F.softsign(x) - torch.floor(x) + x.ceil()\n"
     "        y = y + torch.sign(x) + torch.expm1(x * 0.1) + torch.log1p(x.abs()) + torch.log2(x.abs() + 1.0)\n"
     "        return self.shrink(y) + torch.exp2(x * 0.5) + self.logsig(-x) + F.softsign(-x)",
     "torch.randn(6, {cols}) * 3.0", ""),
    ("layernorm-shape-read-scaled", "        pass",
     "        return F.layer_norm(x, x.shape[1:]) * x.size(-1) ** -0.5 / (x.dim() - 1)",
     "torch.randn(3, 5, {cols})", ""),
    ("sequence-layernorms-over-read-shapes", "        pass",
     "        y = F.layer_norm(x, x.shape[1:]) * 2.0\n        return F.layer_norm(y, (y.size(-1),))",
     "torch.randn(3, 5, {cols})", ""),
    ("layernorm-size-tuple", "        pass", "        return F.layer_norm(x, (x.size(-1),), eps=1e-6)",
     "torch.randn(4, {cols})", ""),
    ("diag-matrix-times-matrix", "        pass", "        return torch.diag(x) @ y",
     "torch.randn(30), torch.randn(30, {cols})", ""),
    ("matrix-times-diag-matrix", "        pass", "        return torch.matmul(y, torch.diag(x)) * 2.0",
     "torch.randn({cols}), torch.randn(30, {cols})", ""),
    ("diag-embed-batch-times-matrices", "        pass", "        return torch.diag_embed(x) @ y",
     "torch.randn(4, 30), torch.randn(4, 30, {cols})", ""),
    ("matrices-times-diag-embed-batch-bf16", "        pass", "        return torch.matmul(y, torch.diag_embed(x))",
     "torch.randn(4, {cols}), torch.randn(4, 30, {cols})", "DTYPE = torch.bfloat16"),
    ("gru-cell-module", "        self.cell = nn.GRUCell(20, 24)", "        return self.cell(x, y)",
     "torch.randn(6, 20), torch.randn(6, 24)", ""),
    ("rnn-cell-relu-no-bias-bf16", "        self.cell = nn.RNNCell(20, 24, bias=False, nonlinearity='relu')",
     "        return self.cell(x, y) * 0.5", "torch.randn(6, 20), torch.randn(6, 24)", "DTYPE = torch.bfloat16"),
    ("addbmm-scaled-plus-parameter", "        self.c = nn.Parameter(torch.randn(24, 40))",
     "        return torch.addbmm(self.c, x, y, beta=0.5, alpha=2.0)",
     "torch.randn(3, 24, 16), torch.randn(3, 16, 40)", ""),
    ("pointwise-accurate-near-zero", "        pass",
     "        y = F.tanhshrink(x) + torch.expm1(x * 1e-3) * 1e3 + torch.log1p(x.abs() * 1e-3) * 1e3\n"
     "        return y + torch.sign(torch.log(x)) + F.logsigmoid(x * 30.0) + torch.exp2(x) + torch.log2(x.abs())",
     "torch.randn(6, {cols})", ""),
    ("tanhshrink-alone", "        pass", "        return F.tanhshrink(x)", "torch.randn(6, {cols})", ""),
    # sums of bools and integers: int64 counts, exact, split across programs where the outputs are few
    ("dim-count-of-a-mask-over-every-value", "        pass", "        return x.sum()",
     "torch.rand(37, {cols}) > 0.5", ""),
    ("dim-sum-of-int32-over-dim0", "        pass", "        return torch.sum(x, dim=0)",
     "torch.randint(-50, 50, (300, 7, 5), dtype=torch.int32)", ""),
    ("dim-prod-over-dim1", "        pass", "        return torch.prod(x, dim=1)", "torch.rand(3, 70, 45) + 0.5", ""),
    ("dim-prod-last-keepdim-bf16", "        pass", "        return x.prod(-1, keepdim=True)",
     "torch.rand(5, 7, {cols}) * 0.2 + 0.9", "DTYPE = torch.bfloat16"),
    ("dim-softmax-module-bf16", "        self.f = nn.Softmax(dim=1)", "        return self.f(x)",
     "torch.randn(2, 30, 17)", "DTYPE = torch.bfloat16"),
    ("dim-logsumexp-then-log-softmax", "        pass",
     "        return F.log_softmax(torch.logsumexp(x, dim=1), dim=0)", "torch.randn(3, 40, 9)", ""),
    ("pointwise-inverse-trig-and-hyperbolic", "        pass",
     "        return torch.atan2(x, y) + torch.asin(torch.tanh(x)) - torch.acosh(x.abs() + 1)"
     " + torch.atanh(torch.tanh(y) * 0.9) + torch.sinh(x * 0.5) - torch.arctan(y)",
     "torch.randn(3, {cols}), torch.randn(3, {cols})", ""),
    ("pointwise-remainders-and-rounding", "        pass",
     "        return torch.remainder(x, 0.7) + torch.fmod(y, x.abs() + 0.5) - torch.floor_divide(x, 0.3)"
     " + torch.round(x * 2) + torch.frac(y) + torch.div(x, 0.4, rounding_mode='trunc')",
     "torch.randn(3, {cols}), torch.randn(3, {cols})", ""),
    ("pointwise-powers-and-blends-bf16", "        pass",
     "        return torch.pow(x.abs() + 0.5, y.clamp(-2, 2)) + torch.where(x > 0, x.abs() ** 1.5, 0.0)"
     " + torch.lerp(x, y, torch.sigmoid(y)) + torch.hypot(x, y) - torch.logaddexp(x, y)"
     " + torch.nan_to_num(torch.log(x), neginf=-5.0)",
     "torch.randn(3, {cols}), torch.randn(3, {cols})", "DTYPE = torch.bfloat16"),
    ("inplace-arithmetic-on-temporaries", "        pass",
     "        z = x * 2\n        z += y\n        z.mul_(0.5)\n        return F.softshrink(z.clamp_(min=-1.0), 0.25)",
     "torch.randn(3, {cols}), torch.randn(3, {cols})", ""),
    ("instance-norm-function-then-losses", "        pass",
     "        z = F.relu(F.instance_norm(x, eps=1e-3))\n"
     "        return z + F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y), reduction='none')"
     " + torch.clamp(y, min=-z, max=z + 1.0)",
     "torch.randn(2, 3, 5, {cols}), torch.randn(2, 3, 5, {cols})", ""),
    ("global-average-module-then-flatten", "        self.pool = nn.AdaptiveAvgPool2d((1, 1))",
     "        return torch.flatten(self.pool(x), 1)", "torch.randn(3, 5, 7, 37)", ""),
    ("adaptive-avgpool-after-multiply", "        self.pool = nn.AdaptiveAvgPool2d(1)",
     "        return F.adaptive_avg_pool2d(self.pool(torch.multiply(x, 2.0)), (1, 1))",
     "torch.randn(2, 3, 7, 9)", ""),
    ("dim-sum-bf16", "        pass", "        return torch.sum(x, 1)", "torch.randn(4, 300, 33)",
     "DTYPE = torch.bfloat16"),
    ("l2-normalise", "        pass", "        return x / torch.norm(x, p=2, dim=1, keepdim=True)", "torch.randn(6, {cols})",
     ""),
    ("batchnorm-eval-bf16", "        self.bn = nn.BatchNorm2d(5)\n        with torch.no_grad():\n"
     "            self.bn.running_mean.uniform_(-1, 1)\n            self.bn.running_var.uniform_(0.5, 2)\n"
     "            self.bn.weight.uniform_(0.5, 1.5)\n            self.bn.bias.uniform_(-1, 1)",
     "        return torch.relu(self.bn(x))", "torch.randn(2, 5, 3, {cols})", "DTYPE = torch.bfloat16"),
    ("batchnorm1d-features", "        self.bn = nn.BatchNorm1d(n)\n        with torch.no_grad():\n"
     "            self.bn.running_var.uniform_(0.5, 2)", "        return self.bn(x) * 2.0", "torch.randn(7, {cols})",
     ""),
    ("linear-scalar-params-min", "        self.fc = nn.Linear(n, 24)\n"
     "        self.s = nn.Parameter(torch.tensor([1.5]))\n        self.c = nn.Parameter(torch.tensor(0.25))",
     "        return torch.min(self.fc(x) * self.s, self.c) - self.c", "torch.randn(5, {cols})", ""),
    ("conv2d-strided-bias-relu", "        self.conv = nn.Conv2d(3, 20, 3, stride=2, padding=1)\n"
     "        self.s = nn.Parameter(torch.rand(20, 1, 1) + 0.5)", "        return torch.relu(self.conv(x)) * self.s",
     "torch.randn(2, 3, 9, 11)", ""),
    ("conv2d-functional-weight-standardised", "        self.conv = nn.Conv2d(4, 6, 3, bias=False)",
     "        w = self.conv.weight\n        w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / torch.sqrt(\n"
     "            w.var(dim=(1, 2, 3), keepdim=True, unbiased=False) + 1e-5)\n        return F.conv2d(x, w, None, 1, 1)",
     "torch.randn(2, 4, 7, 9)", ""),
    ("conv1d-functional-weight-input-same-grouped", "", "        return F.relu(F.conv1d(x, y, padding='same', dilation=2, "
     "groups=2)) * 2.0", "torch.randn(2, 4, 30), torch.randn(6, 2, 3)", ""),
    ("convtranspose2d-functional-parameters", "        self.w = nn.Parameter(torch.randn(4, 3, 3, 3) * 0.2)\n"
     "        self.b = nn.Parameter(torch.randn(6))", "        return torch.tanh(F.conv_transpose2d(x, self.w, self.b, "
     "stride=2, padding=1, output_padding=1, groups=2))", "torch.randn(2, 4, 5, 6)", ""),
    ("rearrange-stack-last-dim-relu", "", "        return torch.relu(torch.stack((x, y), dim=-1)) * 2.0",
     "torch.randn(5, 33), torch.randn(5, 33)", ""),
    ("stack-mixed-by-softmaxed-parameter", "        self.w = nn.Parameter(torch.tensor([0.2, 0.8]))",
     "        weights = torch.softmax(self.w, dim=0)\n"
     "        return (weights.view(2, 1, 1) * torch.stack([x, y], dim=0)).sum(dim=0)",
     "torch.randn(5, 33), torch.randn(5, 33)", ""),
    ("loss-bce-logits-pos-weight-module", "        self.loss = nn.BCEWithLogitsLoss(pos_weight=torch.linspace(0.5, 2.0, 33))",
     "        return self.loss(x * 4.0, y)", "torch.randn(5, 33), torch.randn(5, 33).sigmoid()", ""),
    ("loss-bce-logits-weighted-sum", "        self.register_buffer('w', torch.rand(33) + 0.5)",
     "        return F.binary_cross_entropy_with_logits(x, y, weight=self.w, reduction='sum')",
     "torch.randn(5, 33), torch.randn(5, 33).sigmoid()", ""),
    ("linear-weight-norm-gelu", "        self.fc = weight_norm(nn.Linear(n, 24))",
     "        return F.gelu(self.fc(x))", "torch.randn(5, {cols})",
     "from torch.nn.utils.parametrizations import weight_norm"),
    ("conv1d-weight-norm-whole-dilated-leaky", "        self.conv = weight_norm(nn.Conv1d(6, 8, 3, padding=2, dilation=2), "
     "dim=None)", "        return F.leaky_relu(self.conv(x), 0.1)", "torch.randn(2, 6, {cols})",
     "from torch.nn.utils.parametrizations import weight_norm"),
    ("convtranspose1d-weight-norm-upsample", "        self.up = weight_norm(nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1))",
     "        return self.up(F.leaky_relu(x, 0.1))", "torch.randn(2, 8, {cols})",
     "from torch.nn.utils.parametrizations import weight_norm"),
    ("conv1d-old-weight-norm-hook-tanh", "        self.conv = weight_norm(nn.Conv1d(6, 8, 5, padding=2))",
     "        return torch.tanh(self.conv(x))", "torch.randn(2, 6, {cols})",
     "from torch.nn.utils import weight_norm"),
    ("one-hot-matmul-lookup", "        self.w = nn.Parameter(torch.randn(24, n))",
     "        return F.one_hot(x, 24).float() @ self.w", "torch.randint(0, 24, (7, 5))", ""),
    ("lrn-module-after-relu", "        self.lrn = nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0)",
     "        return self.lrn(torch.relu(x) * 3.0)", "torch.randn(2, 7, 5, 6)", ""),
    ("lrn-function-1d-even-size", "", "        return F.local_response_norm(x, 4, alpha=0.1)", "torch.randn(2, 6, 9)", ""),
    ("sinusoidal-table-built-in-init-added", "        pe = torch.zeros(32, 8)\n"
     "        position = torch.arange(0, 32).unsqueeze(1).float()\n"
     "        div_term = torch.exp(torch.arange(0, 8, 2).float() * -(math.log(10000.0) / 8))\n"
     "        pe[:, 0::2] = torch.sin(position * div_term)\n        pe[:, 1::2] = torch.cos(position * div_term)\n"
     "        self.register_buffer('pe', pe.unsqueeze(0))", "        return x + self.pe[:, :x.size(1)]",
     "torch.randn(3, 10, 8)", "import math"),
    ("softmax2d-module-over-channels", "        self.sm = nn.Softmax2d()", "        return self.sm(x) * 2.0",
     "torch.randn(2, 5, 6, 7)", ""),
    ("conv2d-reflect-padded-relu", "        self.conv = nn.Conv2d(3, 8, 3, padding=(2, 1), padding_mode='reflect')",
     "        return torch.relu(self.conv(x))", "torch.randn(2, 3, 9, 11)", ""),
    ("conv1d-circular-depthwise", "        self.conv = nn.Conv1d(6, 6, 5, padding=4, padding_mode='circular', groups=6)",
     "        return self.conv(x)", "torch.randn(2, 6, 7)", ""),
    ("conv3d-replicate-strided-bf16", "        self.conv = nn.Conv3d(3, 4, 3, stride=2, padding=1, padding_mode='replicate')",
     "        return self.conv(x) * 0.5", "torch.randn(1, 3, 5, 6, 7)", "DTYPE = torch.bfloat16"),
    ("conv2d-reflect-residual", "        self.conv = nn.Conv2d(4, 4, 3, padding=1, padding_mode='reflect')",
     "        return self.conv(x) + x", "torch.randn(2, 4, 6, 7)", ""),
    ("conv2d-depthwise-bf16", "        self.conv = nn.Conv2d(6, 6, (3, 5), padding=(1, 2), groups=6, bias=False)",
     "        return F.gelu(self.conv(x))", "torch.randn(2, 6, 7, 13)", "DTYPE = torch.bfloat16"),
    ("conv1d-dilated-grouped", "        self.conv = nn.Conv1d(8, 12, 3, dilation=2, groups=4)",
     "        return self.conv(x) - 0.5", "torch.randn(3, 8, 40)", ""),
    ("conv3d-residual-fp16", "        self.conv = nn.Conv3d(4, 4, 3, padding=1)", "        return self.conv(x) + x",
     "torch.randn(2, 4, 5, 6, 7)", "DTYPE = torch.float16"),
    ("convtranspose2d-strided-grouped", "        self.conv = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, "
     "output_padding=1, groups=2)", "        return torch.tanh(self.conv(x)) + 1.0", "torch.randn(2, 4, 5, 6)", ""),
    ("convtranspose1d-dilated-bf16", "        self.conv = nn.ConvTranspose1d(3, 5, 4, stride=3, padding=2, dilation=2, "
     "bias=False)", "        return self.conv(x) * 0.5", "torch.randn(2, 3, 9)", "DTYPE = torch.bfloat16"),
    ("convtranspose3d-phases-asymmetric", "        self.conv = nn.ConvTranspose3d(3, 4, (3, 4, 2), stride=(2, 3, 1), "
     "padding=(1, 0, 1), output_padding=(1, 2, 0))", "        return F.silu(self.conv(x))", "torch.randn(2, 3, 3, 4, 5)",
     ""),
    ("matrix-vector-mv-relu", "        pass", "        return torch.relu(torch.mv(x, y))",
     "torch.randn(7, {cols}), torch.randn({cols})", ""),
    ("matmul-batched-matrix-times-vector", "        pass", "        return torch.matmul(x, y) * 2.0",
     "torch.randn(3, 5, {cols}), torch.randn({cols})", ""),
    ("matmul-vector-times-matrix", "        pass", "        return y @ x + 1.0", "torch.randn(33, {cols}), torch.randn(33)",
     ""),
    ("convtranspose1d-phases-dilated-some-empty", "        self.conv = nn.ConvTranspose1d(32, 16, 3, stride=2, padding=1, "
     "dilation=2)", "        return self.conv(x) + 0.5", "torch.randn(2, 32, 9)", ""),
    ("convtranspose2d-phases-dilated-grouped", "        self.conv = nn.ConvTranspose2d(8, 12, (3, 5), stride=(2, 3), "
     "padding=(1, 2), dilation=(2, 1), groups=4)", "        return torch.relu(self.conv(x))", "torch.randn(2, 8, 5, 6)",
     ""),
    ("convtranspose1d-kernel-below-stride", "        self.conv = nn.ConvTranspose1d(4, 3, 2, stride=3, padding=1, "
     "output_padding=2)", "        return self.conv(x) + 0.25", "torch.randn(2, 4, 7)", ""),
    ("conv2d-tap-major-grouped-strided", "        self.conv = nn.Conv2d(40, 24, 3, stride=(2, 1), padding=1, groups=2)",
     "        return F.silu(self.conv(x)) * 2.0", "torch.randn(2, 40, 7, 9)", ""),
    ("convtranspose2d-stride1-dilated-bf16", "        self.conv = nn.ConvTranspose2d(32, 12, (3, 2), padding=(2, 1), "
     "dilation=(2, 1))", "        return self.conv(x) - 1.0", "torch.randn(2, 32, 5, 6)", "DTYPE = torch.bfloat16"),
    ("prelu-per-channel-4d", "        self.act = nn.PReLU(5)\n        with torch.no_grad():\n"
     "            self.act.weight.uniform_(-0.5, 0.5)", "        return self.act(x) + 1.0", "torch.randn(2, 5, 3, {cols})",
     ""),
    ("prelu-features-and-one-slope-bf16", "        self.act = nn.PReLU(n)\n        self.one = nn.PReLU()\n"
     "        with torch.no_grad():\n            self.act.weight.uniform_(-0.5, 0.5)",
     "        return self.one(self.act(x) * 3.0)", "torch.randn(7, {cols})", "DTYPE = torch.bfloat16"),
    ("conv1d-dilated-prelu", "        self.conv = nn.Conv1d(16, 24, 5, dilation=3, padding=6)\n        self.act = nn.PReLU(24)",
     "        return self.act(self.conv(x))", "torch.randn(2, 16, 37)", ""),
    ("avgpool2d-ceil-mode", "        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)",
     "        return self.pool(x) - 0.5", "torch.randn(2, 3, 10, 7)", ""),
    ("maxpool3d-ceil-mode-dilated-bf16", "        self.pool = nn.MaxPool3d((2, 3, 2), stride=(2, 2, 3), padding=(0, 1, 1), "
     "dilation=(1, 2, 1), ceil_mode=True)", "        return torch.relu(self.pool(x))", "torch.randn(2, 3, 5, 9, 8)",
     "DTYPE = torch.bfloat16"),
    ("sequence-conv-pool", "        self.conv = nn.Conv2d(3, 8, 3, padding=1)",
     "        return torch.relu(F.max_pool2d(self.conv(x) * 2.0, 2))", "torch.randn(2, 3, 8, 10)", ""),
    ("sequence-mean-softmax-bf16", "        pass", "        return torch.softmax(x.mean(dim=1), dim=-1)",
     "torch.randn(3, 20, 50)", "DTYPE = torch.bfloat16"),
    ("groupnorm-tanh-bf16", "        self.gn = nn.GroupNorm(4, 8)\n        with torch.no_grad():\n"
     "            self.gn.weight.uniform_(0.5, 1.5)\n            self.gn.bias.uniform_(-1, 1)",
     "        return torch.tanh(self.gn(x)) * 2.0", "torch.randn(3, 8, 5, 7) * 4.0",
     "DTYPE = torch.bfloat16"),
    ("conv3d-unpadded-strided-few-channels", "        self.conv = nn.Conv3d(3, 10, (2, 3, 3), stride=(1, 2, 1))",
     "        return torch.sigmoid(self.conv(x)) + 0.5", "torch.randn(2, 3, 4, 9, 7)", ""),
    ("instancenorm-conv-sequence", "        self.conv = nn.Conv2d(3, 6, 3)\n        self.norm = nn.InstanceNorm2d(6)",
     "        return self.norm(self.conv(x)) / 2.0", "torch.randn(2, 3, 9, 8)", ""),
    ("spatial-mean-of-a-computed-value-subtracted", "        pass",
     "        y = torch.relu(x) * 1.5\n        return y - y.mean(dim=(2, 3), keepdim=True)", "torch.randn(2, 3, 5, {cols})",
     ""),
    ("softmax-over-spatial-dims-flattened-by-its-own-sizes", "        pass",
     "        y = torch.relu(x)\n        b, c, h, w = y.shape\n        z = torch.softmax(y.view(b, c, -1), dim=2)\n"
     "        return z.view(b, c, h, w) * 2.0", "torch.randn(2, 3, 5, {cols})", ""),
    ("channel-parameter-viewed-to-broadcast", "        self.b = nn.Parameter(torch.randn(3))",
     "        return torch.sigmoid(x - self.b.view(1, -1, 1, 1)) * x", "torch.randn(2, 3, 5, {cols})", ""),
    ("per-sample-and-channel-input", "        pass", "        return (x - y) * 2.0",
     "torch.randn(2, 3, 5, {cols}), torch.randn(2, 3, 1, 1)", ""),
    ("linear-viewed-as-one-channel-pooled", "        self.fc = nn.Linear(n, 48)\n        self.pool = nn.MaxPool1d(2)",
     "        y = self.pool(self.fc(x).unsqueeze(1)).squeeze(1)\n        return torch.sum(y, dim=1) * 0.5",
     "torch.randn(9, {cols})", ""),
    # runs of 4 values share a program's vector (ragged: 112 runs in a vector of 128 x 16 lanes), and a
    # run of 4800 values is walked in several steps
    ("linear-groupnorm-short-runs", "        self.fc = nn.Linear(n, 64)\n        self.gn = nn.GroupNorm(16, 64)\n"
     "        self.s = nn.Parameter(torch.randn(64))", "        return torch.sigmoid(self.gn(self.fc(x))) * self.s",
     "torch.randn(7, {cols})", ""),
    ("groupnorm-long-runs", "        self.gn = nn.GroupNorm(2, 4)", "        return self.gn(x) + 1.0",
     "torch.randn(2, 4, 40, 60)", ""),
    ("linear-groupnorm-sequence", "        self.fc = nn.Linear(n, 48)\n        self.gn = nn.GroupNorm(6, 48)",
     "        return F.hardtanh(self.gn(self.fc(x)))", "torch.randn(9, {cols})", ""),
    ("maxpool2d-dilated-relu-bf16", "        self.pool = nn.MaxPool2d(3, stride=2, padding=1, dilation=2)",
     "        return torch.relu(self.pool(x)) * 2.0", "torch.randn(2, 3, 11, 12)", "DTYPE = torch.bfloat16"),
    ("avgpool3d", "        pass", "        return F.avg_pool3d(x, 2, stride=1, padding=1)",
     "torch.randn(2, 3, 5, 6, 7)", ""),
    ("avgpool1d-exclude-pad", "        self.pool = nn.AvgPool1d(4, stride=3, padding=2, count_include_pad=False)",
     "        return self.pool(x)", "torch.randn(3, 5, 31)", ""),
    ("lppool2d-module", "        self.pool = nn.LPPool2d(2, 3, stride=2)", "        return self.pool(x)",
     "torch.rand(2, 3, 10, 9)", ""),
    ("lppool1d-order-3-ceil-mode-and-infinite", "        pass",
     "        return F.lp_pool1d(x, 3.0, 4, stride=2, ceil_mode=True) + F.lp_pool1d(x - 0.5, float('inf'), 4, 2, True)",
     "torch.rand(3, 5, 31)", ""),
    ("matmul-inputs-transposed-a", "        pass", "        return torch.matmul(x.T, y)",
     "torch.randn({cols}, 33), torch.randn({cols}, 40)", ""),
    ("matmul-inputs-triu-bf16", "        pass", "        return torch.triu(x @ y.t(), diagonal=1)",
     "torch.randn(37, {cols}), torch.randn(45, {cols})", "DTYPE = torch.bfloat16"),
    ("matmul-inputs-matrix-vector", "        pass", "        return torch.matmul(x, y)",
     "torch.randn(2, 50, {cols}), torch.randn({cols}, 1)", ""),
    ("matmul-row-times-matrix", "        pass", "        return torch.relu(torch.matmul(x, y))",
     "torch.randn(1, {cols}), torch.randn({cols}, 24)", ""),
    ("matmul-parameter-column", "        self.w = nn.Parameter(torch.randn(n, 1))", "        return torch.relu(x @ self.w)",
     "torch.randn(33, {cols})", ""),
    ("matmul-by-transposed-row-input", "        pass", "        return torch.mm(x, y.t()) * 0.5",
     "torch.randn(33, {cols}), torch.randn(1, {cols})", ""),
    ("matmul-bmm-inputs", "        pass", "        return torch.bmm(x, y)",
     "torch.randn(3, 20, {cols}), torch.randn(3, {cols}, 24)", ""),
    # a dtype's limit read in forward; a dtype argument that casts first
    ("masked-fill-finfo-min-softmax-in-fp32-bf16", "        pass",
     "        s = x.masked_fill(y > 1.0, torch.finfo(x.dtype).min)\n"
     "        return torch.softmax(s, dim=-1, dtype=torch.float32).to(x.dtype)",
     "torch.randn(33, {cols}), torch.randn(33, {cols})", "DTYPE = torch.bfloat16"),
    ("sum-with-dtype-argument-fp16", "        pass", "        return x.sum(dim=-1, dtype=torch.float32) * 0.5",
     "torch.randn(33, {cols})", "DTYPE = torch.float16"),
    # item assignments of numbers to values made in forward (a mask's first column set, a tail zeroed)
    ("item-assignment-of-a-mask-and-a-product", "        pass",
     "        m = y > 0.5\n        m[:, 0] = True\n        z = x * 2.0\n        z[..., -3:] = 0.0\n"
     "        return torch.where(m, z, -1.0)",
     "torch.randn(33, {cols}), torch.randn(33, {cols})", ""),
    # einsums that are broadcast products, summed or not
    ("einsum-outer-products-then-sin", "        pass", '        return torch.sin(torch.einsum("bi,bj->bij", x, y))',
     "torch.randn(3, 40), torch.randn(3, {cols} // 8)", ""),
    ("einsum-gated-sum-of-expert-rows", "        pass",
     '        return torch.einsum("ne,ned->nd", torch.softmax(x, dim=-1), y)',
     "torch.randn(33, 4), torch.randn(33, 4, {cols})", ""),
    ("einsum-contraction-with-expert-weights", "        self.w = nn.Parameter(torch.randn(3, n, 8) * 0.05)",
     '        return torch.relu(torch.einsum("nd,edh->neh", x, self.w))', "torch.randn(33, {cols})", ""),
    # a GEMM's output chunked into gate and up: the pairs are a kernel of their own, not the GEMM's epilogue
    ("linear-swiglu-chunks-then-linear-residual",
     "        self.w_in = nn.Linear(n, 48, bias=False)\n        self.w_out = nn.Linear(24, n, bias=False)",
     "        g, u = self.w_in(x).chunk(2, dim=-1)\n        return x + self.w_out(F.silu(g) * u)",
     "torch.randn(33, {cols})", ""),
    # a linear's output split into parts that later kernels read as views
    ("linear-split-into-three-parts", "        self.qkv = nn.Linear(n, 72)",
     "        q, k, v = self.qkv(x).split(24, dim=-1)\n        return torch.softmax(q * k, dim=-1) + v",
     "torch.randn(33, {cols})", ""),
    # batches that broadcast: heads sharing one input, one key per group of heads, a matrix for every batch
    ("matmul-broadcast-batch-of-heads", "        pass", "        return torch.matmul(x, y) + 1.0",
     "torch.randn(2, 1, 20, {cols}), torch.randn(3, {cols}, 24)", ""),
    ("matmul-broadcast-shared-keys-softmax", "        pass",
     "        return torch.softmax(x @ y.transpose(-2, -1) * 0.125, dim=-1)",
     "torch.randn(2, 3, 16, {cols}), torch.randn(2, 1, 40, {cols})", ""),
    ("matmul-broadcast-matrix-times-batch-bf16", "        pass", "        return x @ y",
     "torch.randn(20, {cols}), torch.randn(2, 3, {cols}, 24)", "DTYPE = torch.bfloat16"),
    ("matmul-gram-of-two-equal-views", "        pass",
     "        return torch.bmm(x.reshape(3, 20, -1), x.reshape(3, 20, -1).transpose(1, 2)) / 50.0",
     "torch.randn(3, 20, 4, {cols} // 4)", ""),
    ("matmul-gram-of-a-view-its-sizes-read-then-normalised", "        pass",
     "        b, c, h, w = x.shape\n        f = x.reshape(b, c, h * w)\n"
     "        g = torch.bmm(f, f.transpose(1, 2)) / (h * w)\n"
     "        return torch.nn.functional.normalize(g.reshape(b, c * c), dim=1)",
     "torch.randn(3, 20, 4, {cols} // 4)", ""),
    ("matmul-gram-scaled-by-a-size", "        pass", "        return x @ x.transpose(-1, -2) / x.shape[-1]",
     "torch.randn(3, 20, {cols})", ""),
    ("matmul-attention-by-hand-scaled-by-a-size", "        pass",
     "        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))\n"
     "        return torch.matmul(torch.softmax(s, dim=-1), v)",
     "torch.randn(2, 2, 24, {cols}), torch.randn(2, 2, 24, {cols}), torch.randn(2, 2, 24, {cols})", "import math"),
    ("matmul-batched-scores-softmax", "        pass",
     "        return torch.softmax(x @ y.transpose(-2, -1) * 0.125, dim=-1)",
     "torch.randn(2, 3, 16, {cols}), torch.randn(2, 3, 40, {cols})", ""),
    ("matmul-einsum-4d-fp16", "        pass", '        return torch.einsum("bijl,lk->bijk", x, y) * 0.5',
     "torch.randn(2, 3, 7, {cols}), torch.randn({cols}, 40)", "DTYPE = torch.float16"),
    ("matmul-einsum-batched-scores-bf16", "        pass",
     '        return torch.einsum("bhqd,bhkd->bhqk", x, y) * 0.125',
     "torch.randn(2, 3, 20, {cols}), torch.randn(2, 3, 24, {cols})", "DTYPE = torch.bfloat16"),
    ("matmul-einsum-weight-nk", "        self.w = nn.Parameter(torch.randn(24, n) * 0.05)",
     '        return torch.einsum("bl,kl->bk", x, self.w)', "torch.randn(30, {cols})", ""),
    # short scans: the interpreter runs a max scan's combine in Python, about a millisecond a call
    ("scan-cummax-values-dim1", "        pass", "        return torch.cummax(x, dim=1)[0] * 2.0",
     "torch.randn(2, 40, 3)", ""),
    ("scan-cummin-reversed-bf16", "        pass", "        return x.flip(0).cummin(0).values.flip(0)",
     "torch.randn(40, 33)", "DTYPE = torch.bfloat16"),
    ("sort-values-descending", "        pass", "        return x.sort(dim=-1, descending=True).values * 2.0",
     "torch.randn(2, 3, 21)", ""),
    ("sort-along-dim0", "        pass", "        return torch.sort(x, dim=0).values", "torch.randn(37, 5, 9)", ""),
    ("topk-largest-middle-dim-fp16", "        pass", "        return torch.topk(x, 3, dim=1)[0]", "torch.randn(4, 20, 6)",
     "DTYPE = torch.float16"),
    ("topk-smallest-bf16", "        pass", "        return torch.topk(x, 4, dim=-1, largest=False)[0]",
     "torch.randn(9, 50)", "DTYPE = torch.bfloat16"),
    ("tally-count-nonzero-and-all-dim0", "        pass",
     "        return torch.count_nonzero(torch.relu(x), dim=0).to(x.dtype) + (x > -1.0).all(dim=0).to(x.dtype)",
     "torch.randn(40, {cols})", ""),
    ("tally-nanmean-of-masked-values", "        pass",
     "        return torch.nanmean(x.masked_fill(x > 1.0, float('nan')), dim=1, keepdim=True) * x",
     "torch.randn(9, {cols})", ""),
    ("tally-aminmax-scaling-bf16", "        pass",
     "        lo, hi = torch.aminmax(x, dim=-1, keepdim=True)\n        return (x - lo) / (hi - lo + 1e-3)",
     "torch.randn(9, {cols})", "DTYPE = torch.bfloat16"),
    ("tally-var-mean-any", "        pass",
     "        v, m = torch.var_mean(x, dim=-1, correction=0)\n"
     "        return v + m + torch.any(x > 2.5, dim=-1).to(x.dtype) + torch.nansum(x, -1)",
     "torch.randn(9, {cols})", ""),
    ("sequence-returns-earlier-kernels-outputs", "        pass",
     "        h = torch.relu(x) * 2.0\n        m = h.amax(dim=0)\n        return h, h.sum(dim=1), m, h - 1.0",
     "torch.randn(9, {cols})", ""),
    ("median-of-rows-with-nan", "        pass",
     "        return torch.nan_to_num(torch.median(x.masked_fill(x > 1.5, float('nan')), dim=-1).values, nan=-5.0)",
     "torch.randn(9, 50)", ""),
    ("sort-descending-with-nan-dim0", "        pass",
     "        return torch.nan_to_num(torch.sort(x.masked_fill(x > 1.0, float('nan')), dim=0, descending=True).values, "
     "nan=7.0)",
     "torch.randn(21, 4, 5)", ""),
    ("topk-smallest-and-kthvalue-with-nan", "        pass",
     "        y = x.masked_fill(x > 1.5, float('nan'))\n"
     "        return torch.topk(y, 30, dim=-1, largest=False)[0] + y.kthvalue(40, dim=-1, keepdim=True)[0]",
     "torch.randn(9, 50)", ""),
    ("softplus-far-below-zero-then-log", "        pass",
     "        y = torch.clamp(x, -3.0, 3.0)  # far below 0 yet above fp32's subnormals, at any input scale\n"
     "        return torch.log(F.softplus(y * 5.0 - 30.0)) + torch.log(F.softplus(y - 25.0, beta=2.0))",
     "torch.randn(9, {cols})", ""),
    ("activation-modules-with-options",
     "        self.acts = nn.Sequential(nn.Hardshrink(0.3), nn.CELU(0.5), nn.Threshold(0.1, -1.0), nn.RReLU(0.1, 0.3), "
     "nn.Softshrink(0.2))", "        return self.acts(x)", "torch.randn(9, {cols})", ""),
    ("median-middle-dim-keepdim", "        pass", "        return torch.median(x, 1, True).values - x",
     "torch.randn(4, 21, 6)", ""),
    ("kthvalue-last-dim-bf16", "        pass", "        return x.kthvalue(5, dim=-1)[0]",
     "torch.randn(9, 50)", "DTYPE = torch.bfloat16"),
    ("scan-masked-cumsum", "        pass", "        return torch.cumsum(x * y, dim=-1)",
     "torch.randn(4, {cols}), torch.randn(4, {cols}) > 0", ""),
    ("scan-reversed-cumsum-fp16", "        pass", "        return torch.cumsum(x.flip(1), dim=1).flip(1)",
     "torch.randn(3, {cols})", "DTYPE = torch.float16"),
    ("scan-exclusive-cumprod-dim0-bf16", "        pass",
     "        c = torch.cumprod(x.narrow(0, 0, x.size(0) - 1), dim=0)\n"
     "        return torch.cat((torch.ones_like(x.select(0, 0).unsqueeze(0)), c), dim=0)",
     "torch.rand(37, 5, 9) + 0.5", "DTYPE = torch.bfloat16"),
    ("norm-fro-then-divide", "        pass", "        return x / torch.norm(x, p='fro')", "torch.randn(3, 5, {cols})",
     ""),
    ("norm-inf-over-dim0", "        pass", "        return torch.linalg.vector_norm(x, ord=float('inf'), dim=0)",
     "torch.randn(7, 3, {cols})", ""),
    ("norm-orders-without-a-kernel", "        pass",
     "        return torch.linalg.vector_norm(x, 3, dim=1) + F.relu(x).norm(p=0, dim=1) * 0.01 "
     "+ torch.linalg.vector_norm(x, float('-inf'), dim=1)", "torch.randn(7, 40, {cols})", ""),
    # torch sums a half-precision norm's powers in float32: in fp16 these sums pass 65504
    ("norm-order-3-fp16-sums-past-its-range", "        pass", "        return torch.linalg.vector_norm(x, 3, dim=1)",
     "torch.randn(3, 4 * {cols}) * 4.0", "DTYPE = torch.float16"),
    ("norm-order-4-bf16-without-keepdim", "        pass",
     "        return torch.norm(x, p=4, dim=-1)",
     "torch.randn(5, {cols})", "DTYPE = torch.bfloat16"),
    ("norm-1-keepdim-bf16", "        pass", "        return x.norm(p=1, dim=(0, 1), keepdim=True)",
     "torch.randn(4, 6, {cols})", "DTYPE = torch.bfloat16"),
    ("split-global-norm-then-divide", "        pass", "        return x / torch.norm(x)", "torch.randn(5, 8000)", ""),
    ("split-mean-over-dim0-bf16", "        pass", "        return x.mean(dim=0)", "torch.rand(40000, 3) + 1.0",
     "DTYPE = torch.bfloat16"),
    ("split-global-max", "        pass", "        return torch.amax(x)", "torch.randn(40000)", ""),
    ("split-global-prod", "        pass", "        return x.prod()", "torch.rand(40000) * 0.001 + 0.9997", ""),
    ("matmul-param-transposed-tril", "        self.w = nn.Parameter(torch.randn(24, n) * 0.05)",
     "        return torch.tril(torch.matmul(x, self.w.T) / 2.0, -2)", "torch.randn(30, {cols})", ""),
    # Reductions over other dimensions than the last, fused with what follows them: rows across the
    # reduced dimensions (at a stride where dimensions follow them), parameters along them per column.
    ("span-rmsnorm-channels", "        pass",
     "        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)", "torch.randn(3, 7, 5, 9)", ""),
    ("span-layernorm-three-dims", "        self.ln = nn.LayerNorm((7, 5, 9))", "        return self.ln(x)",
     "torch.randn(3, 7, 5, 9)", ""),
    ("span-softmax-channels-then-sub-bf16", "        pass", "        return torch.softmax(x, dim=1) * 2.0 - x",
     "torch.randn(2, 13, 6, 5)", "DTYPE = torch.bfloat16"),
    ("span-standardised-over-two-dims", "        pass",
     "        m = x.mean(dim=(1, 2), keepdim=True)\n        return (x - m) / (x.std(dim=(1, 2), keepdim=True) + 1e-3)",
     "torch.randn(4, 6, 5, 3)", ""),
    ("span-log-softmax-dim0-plus-one", "        pass", "        return F.log_softmax(x, dim=0) + 1.0",
     "torch.randn(9, 300)", ""),
    ("span-masked-softmax-dim1", "        pass",
     "        return torch.softmax(x.masked_fill(x < -1.0, float('-inf')), dim=1)", "torch.randn(3, 70, 5)", ""),
    ("span-min-keep-plus-channel-bias", "        self.b = nn.Parameter(torch.randn(1, 6, 1, 1))",
     "        return torch.min(x, dim=1, keepdim=True)[0] + self.b", "torch.randn(3, 6, 5, 7)", ""),
    ("row-max-plus-column-parameter", "        self.b = nn.Parameter(torch.randn(n))",
     "        return x.amax(dim=-1, keepdim=True) * self.b", "torch.randn(5, {cols})", ""),
    ("span-linear-then-softmax-dim0", "        self.fc = nn.Linear(n, 24)",
     "        return torch.softmax(self.fc(x), dim=0) * 2.0", "torch.randn(7, {cols})", ""),
    ("span-square-softmax-dim0-plus-row-bias", "        self.b = nn.Parameter(torch.randn(12))",
     "        return torch.softmax(x, dim=0) + self.b", "torch.randn(12, 12)", ""),
    ("span-rmsnorm-channel-weight-fp16", "        self.w = nn.Parameter(1.0 + 0.1 * torch.randn(7, 1, 1))",
     "        return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6) * self.w", "torch.randn(2, 7, 6, 11)",
     "DTYPE = torch.float16"),
    # Tensors that broadcast along several dimensions, read through their strides (no copy).
    ("broadcast-input-and-parameter", "        self.p = nn.Parameter(torch.randn(1, 4, 1, 6))",
     "        return torch.sigmoid(x) * y + self.p", "torch.randn(2, 4, 3, 6), torch.randn(2, 1, 3, 1)", ""),
    ("broadcast-then-row-softmax-fp16", "        self.p = nn.Parameter(torch.randn(5, 1, 9))",
     "        return torch.softmax(x + self.p, dim=-1)", "torch.randn(5, 7, 9)", "DTYPE = torch.float16"),
    ("outer-sum-of-unsqueezed-inputs", "        pass", "        return torch.tanh(x[:, None] + y.unsqueeze(0))",
     "torch.randn({cols}), torch.randn(37)", ""),
    ("softmax-of-a-transposed-input-bf16", "        pass", "        return torch.softmax(x.transpose(1, 2), dim=-1) * 2",
     "torch.randn(3, 19, 7)", "DTYPE = torch.bfloat16"),
    ("kept-min-plus-channel-bias-grows", "        self.b = nn.Parameter(torch.randn(1, 6, 1, 1))",
     "        return x + self.b", "torch.randn(5, 1)", ""),
    ("permuted-input-times-column-parameter", "        self.w = nn.Parameter(torch.randn(5))",
     "        return x.permute(0, 2, 1) * self.w + y.T", "torch.randn(4, 5, 7), torch.randn(5, 7, 4)", ""),
    # Comparisons, logic and selections: truth values held as 1.0 or 0.0 inside the kernel.
    ("where-leaky-and-masked-fill", "        pass",
     "        y = torch.where(x > 0, x, 0.1 * x)\n        keep = (x < 1.5) & ~(x == 0.25)\n"
     "        return y.masked_fill(~keep, -1.0) + (x >= -0.5).float()", "torch.randn(4, {cols})", ""),
    ("softmax-masked-below-threshold-bf16", "        pass",
     "        return torch.softmax(x.masked_fill(x < -1.0, float('-inf')), dim=-1)", "torch.randn(6, {cols})",
     "DTYPE = torch.bfloat16"),
    ("casts-to-bool-and-integer", "        pass",
     "        return x.to(torch.bool).to(x.dtype) * 2.0 + (x * 3.0).long() + (x > 0.5).float()",
     "torch.randn(4, {cols})", ""),
    ("elu-alpha-softplus-beta", "        self.act = nn.ELU(alpha=0.5)",
     "        return self.act(x) + F.softplus(x, beta=2.0, threshold=5.0) + F.elu(x, 1.7)", "torch.randn(3, {cols})",
     ""),
    # Functions rewritten as what they are made of.
    ("normalize-channels-and-glu", "        self.glu = nn.GLU(dim=-1)",
     "        return self.glu(F.normalize(x, p=2.0, dim=1))", "torch.randn(2, 5, 3, 2 * 9)", ""),
    ("bce-with-logits-mean", "        pass",
     "        return F.binary_cross_entropy_with_logits(x * 4.0, torch.sigmoid(y))",
     "torch.randn(5, {cols}), torch.randn(5, {cols})", ""),
    ("cross-entropy-as-nll-of-log-softmax", "        self.nll = nn.NLLLoss()",
     "        return self.nll(F.log_softmax(x, dim=1), t)", "torch.randn(6, {cols}), torch.randint(0, {cols}, (6,))",
     ""),
    ("cosine-similarity-loss", "        pass", "        return torch.mean(1 - F.cosine_similarity(x, y, dim=1))",
     "torch.randn(5, {cols}), torch.randn(5, {cols})", ""),
    ("cosine-similarity-module-dim0", "        self.sim = nn.CosineSimilarity(dim=0, eps=1e-6)",
     "        return self.sim(x, y) * 3.0", "torch.randn(33, 17), torch.randn(33, 17)", ""),
]


SLOW_CASES = {"matmul-broadcast-matrix-times-batch-bf16", "einsum-gated-sum-of-expert-rows", "sum-with-dtype-argument-fp16",
              "dim-sum-of-int32-over-dim0", "conv1d-old-weight-norm-hook-tanh", "conv1d-weight-norm-whole-dilated-leaky", "convtranspose1d-weight-norm-upsample", "made-frequencies-then-cos-and-sin", "normalize-channels-and-glu", "span-rmsnorm-channels", "diag-matrix-times-matrix", "channel-parameter-viewed-to-broadcast",
              "conv-min-made-tensor", "made-tril-of-ones-as-right-operand", "pointwise-one-value-parameter-exp", "resample-pixel-shuffle-function",
              "where-leaky-and-masked-fill", "permuted-input-times-column-parameter", "rearrange-triangles-of-an-input",
              "attention-by-hand-multi-query-causal", "attention-grouped-query-heads-bf16", "attention-head-of-40-fp32", "mha-by-hand-heads-viewed",
              "matmul-attention-by-hand-scaled-by-a-size", "positions-along-rows-start-step", "distances-every-row-to-every-row", "spatial-mean-of-a-computed-value-subtracted",
              "linear-viewed-as-one-channel-pooled", "cross-entropy-label-smoothing", "avgpool2d-ceil-mode", "linear-of-a-scaled-weight-plus-bias",
              "bmm-batch-of-vectors-made-columns", "span-min-keep-plus-channel-bias", "lookup-rows-of-an-input", "rearrange-cat-three-dim0-sigmoid",
              "conv3d-unpadded-strided-few-channels", "gather-take-along-buffer-then-scale", "views-crop-times-input", "elu-alpha-softplus-beta",
              "attention-by-hand-causal-positions-bf16", "attention-fewer-keys-causal-bf16", "attention-heads-repeated-for-query-groups", "attention-more-keys-head-of-8", "cosine-classifier-normalised-weight",
              "conv2d-tap-major-grouped-strided", "embedding-bag-sum-module", "linear-lstm-cell-chunks", "matrix-vector-mv-relu", "matmul-batched-scores-softmax",
              "grouped-sum-through-a-reshape-bf16", "per-row-input-indexed-with-none", "tanh-of-small-values", "conv-then-dropout-of-nothing-partial", "conv2d-reflect-residual",
              "unfold-function-strided", "views-reshape-copies-then-transposed-again", "gather-method-dim0-smaller-index-bf16", "rotary-for-attention-chunked", "mean-then-scalar-tail",
              "positions-per-row-before-softmax", "conv1d-circular-depthwise", "learned-positions-added", "chunk-before-rows-norm", "views-causal-conv-cropped-sequence",
              "linear-keywords-bias-passed-fp32", "linear-sequential-layers-by-index", "matmul-parameter-column", "matmul-batched-matrix-times-vector", "matmul-gram-scaled-by-a-size",
              "span-layernorm-three-dims", "convtranspose3d-phases-asymmetric", "softmax2d-module-over-channels", "rearrange-stack-last-dim-relu",
              "loss-bce-logits-weighted-sum", "lrn-function-1d-even-size",
              "convtranspose2d-functional-parameters", "conv1d-functional-weight-input-same-grouped", "causal-mask-of-ones-made-in-forward",
              "causal-mask-from-positions-bf16", "cdist-l1-of-batched-rows", "lower-triangle-mask-method-in-where", "convtranspose2d-phases-dilated-grouped", "topk-largest-middle-dim-fp16", "sort-along-dim0", "alibi-positions-softmax", "scan-logcumsumexp-dim0", "token-and-position-embeddings",
              "chunk-three-along-dim0-softmax-bf16", "flat-gelu-tanh", "cross-entropy-sum", "cross-entropy-module-smoothing-ignored-rows-bf16", "per-sample-and-channel-input", "chunk-glu-bf16", "layernorm-module-bf16", "var-unbiased", "max-values-and-argmin",
              "amax-of-squares-bf16", "attention-negative-scale-fp32", "linear-plus-residual-input-bf16",
              "mlp-two-stages-bf16", "chain-methods-bf16", "two-inputs-fp16", "log-softmax-bf16",
              "attention-scaled-fp32", "linear-residual-bf16", "matmul-inputs-matrix-vector",
              "matmul-param-transposed-tril", "linear-softmax-tail-bf16", "linear-sigmoid-sum-tail",
              "dim-mean-keepdim-fp16", "dim-sum-bf16", "dim-prod-last-keepdim-bf16", "matrix-times-diag-matrix",
              "pointwise-more-unary", "layernorm-size-tuple", "sequence-layernorms-over-read-shapes",
              "batchnorm1d-features", "avgpool1d-exclude-pad",
              "conv1d-dilated-grouped", "l2-normalise", "matmul-inputs-transposed-a", "dim-max-values",
              "linear-scalar-params-min", "conv2d-strided-bias-relu", "conv3d-residual-fp16", "avgpool3d",
              "convtranspose1d-dilated-bf16", "instancenorm-conv-sequence", "dim-logsumexp-then-log-softmax",
              "dim-global-mean-and-all", "adaptive-avgpool-after-multiply", "sequence-conv-pool",
              "scan-reversed-cumsum-fp16", "scan-exclusive-cumprod-dim0-bf16", "norm-inf-over-dim0",
              "norm-1-keepdim-bf16", "split-mean-over-dim0-bf16", "split-global-max", "split-global-prod", "norm-fro-then-divide",
              "conv2d-depthwise-bf16", "linear-groupnorm-sequence", "matmul-einsum-4d-fp16",
              "matmul-bmm-inputs", "matmul-einsum-weight-nk", "dim-argmin-bf16", "selu-hardtanh",
              "loss-huber-delta-sum", "loss-kl-batchmean", "per-row-input-added",
              "per-row-scaled-softmax", "loss-smooth-l1-beta", "per-row-diagonal-times-matrix", "linear-relu-fp32",
              "dim-softmax-module-bf16", "mean-then-scale", "layernorm-by-hand", "row-value-reduced-again-plus-copy",
              "matmul-inputs-triu-bf16", "linear-logsumexp-tail", "split-global-norm-then-divide",
              "sequence-mean-softmax-bf16", "batchnorm-eval-bf16", "groupnorm-tanh-bf16", "maxpool2d-dilated-relu-bf16",
              "convtranspose2d-strided-grouped", "span-standardised-over-two-dims", "span-log-softmax-dim0-plus-one",
              "cosine-similarity-module-dim0", "span-linear-then-softmax-dim0", "convtranspose2d-stride1-dilated-bf16", "row-max-plus-column-parameter",
              "broadcast-then-row-softmax-fp16", "span-softmax-channels-then-sub-bf16", "prelu-features-and-one-slope-bf16",
              "maxpool3d-ceil-mode-dilated-bf16", "scan-cummin-reversed-bf16", "topk-smallest-bf16", "topk-smallest-and-kthvalue-with-nan", "tally-aminmax-scaling-bf16", "tally-var-mean-any", "kthvalue-last-dim-bf16",
              "pointwise-remainders-and-rounding", "pointwise-powers-and-blends-bf16",
              "inplace-arithmetic-on-temporaries", "instance-norm-function-then-losses",
              "scan-cummax-values-dim1", "softmax-of-a-transposed-input-bf16", "layernorm-shape-read-scaled",
              "softmax-masked-below-threshold-bf16", "outer-sum-of-unsqueezed-inputs", "tanhshrink-alone",
              "matmul-einsum-batched-scores-bf16", "span-rmsnorm-channel-weight-fp16", "span-square-softmax-dim0-plus-row-bias",
              "kept-min-plus-channel-bias-grows", "casts-to-bool-and-integer", "cosine-similarity-loss",
              "conv1d-dilated-prelu", "convtranspose1d-kernel-below-stride", "pointwise-made-tensors", "matmul-row-times-matrix", "pointwise-made-tensors-cast",
              "matmul-by-transposed-row-input",
              "rmsnorm-llama-bf16", "softmax-module", "dims-apart-norm-keepdim-bf16", "dims-apart-logsumexp-plus-mean",
              "resample-nearest-exact-to-size-bf16", "resample-upsample-module-trilinear-aligned",
              "resample-linear-1d-recomputed", "embedding-function-bf16", "int-input-as-numbers",
              "rearrange-pad-last-two-bf16", "rearrange-flip-two-dims-plus-input", "rearrange-roll-negative-two-dims",
              "rearrange-repeat-3d", "rearrange-diff-dim0-bf16", "global-max-pool-module", "lookup-negative-indices",
              "rearrange-cat-then-reciprocal", "views-permute-then-gelu-bf16", "views-expand-then-reshape",
              "views-two-copies-and-flatten", "views-narrow-by-a-size-fp16", "views-scan-less-its-first-column", "attention-by-hand-unscaled-bf16", "mha-module-sequence-first-weights-unused-bf16", "views-token-mixing-linear-sequence", "resample-nearest-fractional-fp16", "resample-pixel-unshuffle-module", "dim-prod-over-dim1", "cross-entropy-as-nll-of-log-softmax"}
"""Cases the default run leaves to ``make test-all``: each has a sibling of the same family that runs."""


def _cases() -> list:
    return [pytest.param(c, id=c[0], marks=pytest.mark.slow if c[0] in SLOW_CASES else ()) for c in CASES]


def _first_runs(values: list) -> list:
    """``values`` as parameters, all but the first marked slow (a strategy's check once by default)."""
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)), id="-".join(str(x) for x in
                         (v if isinstance(v, tuple) else (v,)) if x is not None),
                         marks=pytest.mark.slow if k else ()) for k, v in enumerate(values)]

def _write(tmp_path: Path, case: tuple[str, str, str, str, str], cols: int) -> Path:
    name, init, body, inputs, header = case
    args = "x, t" if "cross" in name else "q, k, v, m" if "mask-passed" in name else "q, k, v" if "attention" in name else (
        "x, y" if inputs.count("torch.randn") + ("torch.randint" in inputs and "torch.randn" in inputs) == 2 else "x")
    path = tmp_path / "mystery.py"
    path.write_text(TASK.format(header=header, cols=cols, init=init, args=args, body=body,
                                inputs=inputs.format(cols=cols)))
    return path


@pytest.mark.parametrize("case", _cases())
def test_every_seed_is_judged_correct(evaluator, tmp_path: Path, case: tuple[str, str, str, str, str]) -> None:
    cols = 200 if "linear" in case[0] or "mlp" in case[0] or "matmul" in case[0] else 1000
    cols = 64 if "residual" in case[0] else cols
    task = load_task(str(_write(tmp_path, case, cols)), "full")
    plan = recognise(task)
    tried = set()
    for strategy, params, why in seeds(plan):
        if strategy in tried and strategy != "looped":
            continue  # one seed per strategy keeps the interpreter's time down; the others differ in numbers
        tried.add(strategy)
        if strategy == "looped":
            params = dict(params, BLOCK_C=256)  # several column blocks per row, and a ragged last one
        candidate = tmp_path / f"candidate_{strategy}.py"
        candidate.write_text(render(plan, strategy, params, why))
        verdict, code = evaluator.evaluate(task, candidate)
        assert code == 0, f"{strategy} {params}: {verdict.reason}"
        if not ON_GPU:
            assert verdict.timing == "cpu-interpreter"


@pytest.mark.parametrize(("name", "block_c"), _first_runs([("span-layernorm-three-dims", 32),
                                                            ("span-rmsnorm-channels", 2), ("layernorm-by-hand", 128)]))
def test_few_long_rows_spread_every_pass_across_programs(evaluator, tmp_path: Path, name: str, block_c: int) -> None:
    """``split_passes``: each pass over a row (the mean, the variance around it, the output) is a kernel
    over (rows, SPLIT) chunks, the statistics combined from partial results: correct with chunks that
    end mid-block and a last chunk shorter than the others."""
    task, plan = _case(tmp_path, name, 1000)
    assert split_passes.batches(plan.program) is not None
    _accepted(evaluator, task, plan, tmp_path, "split_passes", {"BLOCK_C": block_c, "SPLIT": 4, "num_warps": 4},
              "test", "final_kernel[(n_rows, SPLIT)]")


EVEN_CASES = ["chain-params", "softmax-module", "rmsnorm-llama-bf16", "argmin", "layernorm-by-hand"]


def _case(tmp_path: Path, name: str, cols: int, inputs: str | None = None):  # noqa: ANN202
    """(task, plan) of CASES[name] at ``cols``, with other ``inputs`` if given."""
    case = next(c for c in CASES if c[0] == name)
    if inputs:
        case = (*case[:3], inputs, case[4])
    task = load_task(str(_write(tmp_path, case, cols)), "full")
    return task, recognise(task)


def _accepted(evaluator, task, plan, tmp_path: Path, strategy: str, params: dict, why: str, shows: str) -> None:  # noqa: ANN001
    """Render ``params``, check the source ``shows`` the feature, and have the harness accept it."""
    source = render(plan, strategy, params, why)
    assert shows in source
    candidate = tmp_path / f"candidate_{strategy}_{abs(hash(str(params)))}.py"
    candidate.write_text(source)
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, f"{strategy} {params}: {verdict.reason}"


@pytest.mark.parametrize("name", _first_runs(EVEN_CASES))
def test_shapes_that_divide_into_tiles_run_without_bounds_checks(evaluator, tmp_path: Path, name: str) -> None:
    """8 x 1024: every seed's tiles divide the shape, so the kernels run with EVEN_R and EVEN_C set
    (constant-true masks) and must still be judged correct, ragged loop blocks included."""
    task, plan = _case(tmp_path, name, 1024, "torch.randn(8, {cols})")
    for strategy, params, why in seeds(plan)[:2] + [s for s in seeds(plan) if s[0] == "looped"][:1]:
        _accepted(evaluator, task, plan, tmp_path, strategy, params, why,
                  "EVEN_R=n_rows % BLOCK_R == 0, EVEN_C=n_cols > 0 and n_cols % BLOCK_C == 0")


@pytest.mark.parametrize(("name", "inputs"), _first_runs([
    ("chain-params", "torch.randn(5, {cols})"),
    ("chunk-glu-bf16", None),
    ("rmsnorm-llama-bf16", None),
    ("mean-then-scale", "torch.randn(3, {cols})"),
]))
def test_static_sizes_are_correct_for_every_strategy(evaluator, tmp_path: Path, name: str, inputs: str | None) -> None:
    """STATIC: row length and strides as compile-time constants. Rows of 1000 (ragged blocks), the
    first seed, a looped one with several column blocks, and the split strategy where it applies."""
    task, plan = _case(tmp_path, name, 1000, inputs)
    variants = [seeds(plan)[0]] + [(s, dict(p, BLOCK_C=256), w) for s, p, w in seeds(plan) if s == "looped"][:1]
    if name == "mean-then-scale":
        variants.append(("split", {"BLOCK_C": 256, "SPLIT": 4, "num_warps": 4}, "test"))
    for strategy, params, why in variants:
        _accepted(evaluator, task, plan, tmp_path, strategy, dict(params, STATIC=True), why,
                  "n_cols: tl.constexpr")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["attention-causal-bf16", "attention-scaled-fp32"])
def test_attention_without_masks_and_through_tma_descriptors(evaluator, tmp_path: Path, name: str) -> None:
    """A sequence of 64 in blocks of 32 x 16: EVEN (no bounds masks) with pointer loads and with
    tensor descriptors over the [batch * heads * seq, head_dim] rows; several heads, so that a tile
    placed in the wrong head's rows would be caught. The seeds offer TMA only where the blocks divide."""
    d = 32 if "bf16" in name else 16
    task, plan = _case(tmp_path, name, 0, ", ".join([f"torch.randn(2, 3, 64, {d})"] * 3))
    base = {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2}
    for tma in (False, True):
        _accepted(evaluator, task, plan, tmp_path, "flash", dict(base, TMA=tma), "test",
                  "TMA=True and even" if tma else "TMA=False and even")
    assert any(p["TMA"] for _, p, _ in seeds(plan)) == plan_has_descriptors()
    # Fewer keys than queries: k and v's descriptors and rows are their own, not q's
    fewer, fewer_plan = _case(tmp_path, name, 0, f"torch.randn(2, 3, 64, {d}), torch.randn(2, 3, 32, {d}), "
                                                 f"torch.randn(2, 3, 32, {d})")
    _accepted(evaluator, fewer, fewer_plan, tmp_path, "flash", dict(base, TMA=True), "test", "seq_k = ")
    ragged, ragged_plan = _case(tmp_path, name, 0)  # 50 or 37 keys: no seed asks for TMA
    assert not any(p["TMA"] for _, p, _ in seeds(ragged_plan))
    # Ragged and in small blocks, so that causal programs have key blocks before their diagonal band
    # (no masks there), and query blocks both larger and smaller than key blocks.
    for bm, bn in ((32, 16), (16, 32)):
        _accepted(evaluator, ragged, ragged_plan, tmp_path, "flash", dict(base, BLOCK_M=bm, BLOCK_N=bn), "test",
                  "attention_keys(")


def plan_has_descriptors() -> bool:
    import triton.language as tl

    return hasattr(tl, "make_tensor_descriptor")


@pytest.mark.parametrize("name", _first_runs(["chain-params", "softmax-module", "flat-gelu-tanh", "layernorm-by-hand"]))
def test_a_persistent_grid_loops_over_every_tile(evaluator, tmp_path: Path, name: str) -> None:
    """PROGRAMS_PER_SM: 4 'SMs' under the interpreter, so each program takes several tiles (the
    looped strategy with ragged column blocks too); every output element must still be written."""
    # more tiles than the 4 programs: 11 rows (ragged for 2-row tiles), or 9 blocks of a flat tensor
    task, plan = _case(tmp_path, name, 1000,
                       "torch.randn(9 * {cols})" if name.startswith("flat") else "torch.randn(11, {cols})")
    persistent = [(s, dict(p, PROGRAMS_PER_SM=1), w) for s, p, w in seeds(plan) if s != "looped"][:1]
    persistent += [(s, dict(p, BLOCK_C=256, PROGRAMS_PER_SM=1), w) for s, p, w in seeds(plan) if s == "looped"][:1]
    for strategy, params, why in persistent:
        _accepted(evaluator, task, plan, tmp_path, strategy, params, why,
                  "for pid in range(tl.program_id(0), n_tiles, tl.num_programs(0)):")


@pytest.mark.parametrize("name", _first_runs(["linear-relu-fp32", "mlp-two-stages-bf16",
                                              "linear-plus-residual-input-bf16"]))
def test_split_k_sums_every_share_of_k_before_the_epilogue(evaluator, tmp_path: Path, name: str) -> None:
    """SPLIT_K=3 over 7 K tiles of 32 (the last one ragged): shares of 3, 3 and 1, each needed;
    the reduce kernel adds them and applies the bias, activation and residual."""
    task, plan = _case(tmp_path, name, 200)
    strategy, params, why = next(s for s in seeds(plan) if "SPLIT_K" not in s[1])
    _accepted(evaluator, task, plan, tmp_path, strategy, dict(params, BLOCK_K=32, SPLIT_K=3), why,
              "stage0_kernel_reduce[")


@pytest.mark.parametrize(("name", "cols", "split"), _first_runs([
    ("matmul-inputs-transposed-a", 203, 1), ("mlp-two-stages-bf16", 200, 1), ("linear-relu-fp32", 203, 1),
    ("matmul-inputs-triu-bf16", 203, 1), ("linear-relu-fp32", 203, 3), ("matmul-inputs-transposed-a", 208, 1)]))
def test_operands_copied_along_k_are_padded_with_zeros_that_add_nothing(evaluator, tmp_path: Path, name: str,
                                                                        cols: int, split: int) -> None:
    """K_MAJOR copies A (read transposed here) and W ([K, N] or [N, K]) into rows along K; a K that is
    not a multiple of 16 (203, 200) is padded to whole steps of 32 (224), whose zero columns must add
    nothing, in a triangle and split three ways too; a multiple of 16 (208) is not padded, and the
    ragged last step keeps its mask; the second stage of a chain copies its input (the first stage's
    output) too."""
    task, plan = _case(tmp_path, name, cols)
    strategy, params, why = next(s for s in seeds(plan) if s[0] == "gemm" and "SPLIT_K" not in s[1])
    extra = {"SPLIT_K": split} if split > 1 else {}
    _accepted(evaluator, task, plan, tmp_path, strategy, dict(params, BLOCK_K=32, K_MAJOR=True, **extra), why,
              "a_k = k_major(h, kp)")


def test_operands_are_copied_along_k_first_only_where_k_is_odd_and_offered_where_one_runs_across() -> None:
    from types import SimpleNamespace

    from kernelevo.agent.builtin import matmul, matmul_kernels, policy

    def plan(rows: int, n: int, k: int, transposed: bool, dtype: str = "float32", **kw: Any) -> Any:
        stage = matmul.Stage(weight="w", transposed=transposed, n=n, k=k, epilogue=None, out_dtype=dtype, **kw)
        return SimpleNamespace(extra={"stages": [stage]}, rows=rows, dtype=dtype)

    def where(p: Any) -> str | None:
        return matmul_kernels.k_major_seed(p.extra["stages"], p.rows, p.dtype)

    assert where(plan(8205, 5921, 2949, transposed=True)) == "first"     # K not a multiple of 16 values
    assert where(plan(8192, 4096, 4100, transposed=True)) == "first"     # 16-byte rows, yet 4100 % 16 != 0
    assert where(plan(2048, 4096, 8192, transposed=False)) == "later"    # [K, N] rows of N
    assert where(plan(4096, 4096, 4096, True, a_transposed=True)) == "later"
    assert where(plan(2048, 4096, 8192, transposed=True)) is None        # nn.Linear's [N, K]: nothing to do
    assert where(plan(256, 4096, 2949, transposed=True)) is None         # few rows: the copy would weigh
    assert where(plan(0, 4096, 2949, transposed=True)) is None
    assert where(plan(8205, 5921, 2949, True, batched=True)) is None
    assert where(plan(8205, 5921, 2949, True, dtype="bfloat16")) is None
    first = policy._matmul_seeds(plan(8205, 5921, 2949, transposed=True))
    assert [p.get("K_MAJOR") for _, p, _ in first[:3]] == [True, True, False]  # six, three bf16 products; plain
    assert "copied along K" in first[0][2] and "copied along K" not in first[2][2]
    later = policy._matmul_seeds(plan(2048, 4096, 8192, transposed=False))
    assert [p.get("K_MAJOR") for _, p, _ in later[:3]] == [False, False, True]
    assert later[2][1] == dict(later[0][1], K_MAJOR=True)
    assert not any("K_MAJOR" in p for _, p, _ in policy._matmul_seeds(plan(2048, 4096, 8192, transposed=True)))
    searcher = policy.BuiltinPolicy()
    searcher.plan = SimpleNamespace(kind="matmul", **vars(plan(2048, 4096, 8192, transposed=False)))
    strategy, params, _ = later[0]
    moves = [(p, why) for _, p, why in searcher._neighbours(strategy, params) if why.startswith("mutation: copy")]
    assert [p["K_MAJOR"] for p, _ in moves] == [True] and "wide tile loads" in moves[0][1]


@pytest.mark.parametrize("name", _first_runs(["mean-then-scale", "amax-of-squares-bf16",
                                              "loss-mean-square-plus-largest-magnitude"]))
def test_split_rows_combine_every_chunk(evaluator, tmp_path: Path, name: str) -> None:
    """3 rows of 5000 split 4 ways in blocks of 256: chunks of 1280 columns, the last one ragged;
    finish_kernel combines them and applies what follows the reduction (the mean's division, the
    scale, bf16 rounding); two reductions of a whole tensor (one row of 15000), each combined."""
    from kernelevo.agent.builtin.codegen import splittable

    task, plan = _case(tmp_path, name, 5000, "torch.randn(3, {cols})")
    assert splittable(plan.program) is not None
    _accepted(evaluator, task, plan, tmp_path, "split", {"BLOCK_C": 256, "SPLIT": 4, "num_warps": 4}, "test",
              "finish_kernel[(ceil_div(n_rows, 16),)]")


def test_only_reductions_of_per_element_values_split(tmp_path: Path) -> None:
    from kernelevo.agent.builtin.codegen import splittable

    for name in ("var-unbiased", "argmin", "softmax-module", "chain-params"):
        _, plan = _case(tmp_path, name, 1000)
        assert plan.program is None or splittable(plan.program) is None, name
    _, plan = _case(tmp_path, "max-values-and-argmin", 1000)  # a row's range: its maximum and minimum, apart
    assert [r.op for r in splittable(plan.program) or []] == ["max", "min"]


def test_bf16_rounding_is_the_hardware_conversion_except_under_the_interpreter(tmp_path: Path) -> None:
    """The generated kernels round to bf16 where eager does. Compiled for a GPU, one conversion
    instruction; under Triton's CPU interpreter, whose cast does not round to nearest (2,089 of
    4,096 random values differed from torch's in triton 3.9), integer arithmetic. The interpreted
    path's results are checked against eager by the correctness tests above."""
    import os
    import subprocess
    import sys

    plan = recognise(load_task("rmsnorm", "small"))
    assert plan.dtype == "bfloat16"
    path = tmp_path / "candidate.py"
    path.write_text(render(plan, *seeds(plan)[0]))
    probe = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('c', sys.argv[1]); "
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); print(bool(m.CAST_ROUNDS))")
    answers = {}
    for interpret in ("1", None):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        if interpret:
            env["TRITON_INTERPRET"] = interpret
        done = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        answers[interpret] = done.stdout.strip()
    assert answers == {"1": "False", None: "True"}
    assert "x.to(tl.bfloat16).to(tl.float32)" in path.read_text()


KERNELBENCH_STYLE = '''import math
import torch
import torch.nn as nn
from math import sqrt as root
from torch.nn import Parameter
from torch.nn.init import trunc_normal_ as init_truncated

batch_size = 6
features = 300
SCALE = 0.5


def init_gain(n):
    return 1.0 + 0.1 * torch.randn(n) * SCALE


class Gain(nn.Module):
    def __init__(self, n):
        super(Gain, self).__init__()
        self.g = Parameter(init_gain(n))


class Model(nn.Module):
    def __init__(self, features):
        super(Model, self).__init__()
        self.gain = Gain(features)
        init_truncated(self.gain.g, mean=1.0, std=0.05)
        self.eps = 1e-5 * math.sqrt(4.0) * root(1.0)

    def forward(self, x):
        x = x * self.gain.g
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
'''


def test_a_kernelbench_style_file_runs_unchanged(evaluator, tmp_path: Path) -> None:
    """``super(Model, self)``, a helper class and function, module constants, an import and a torch
    function imported by name (under another name) used by the constructor, and names imported from a
    module other than their own (``Parameter`` lives in ``torch.nn.parameter``): the candidate carries
    them, imported from where the judge allows, and builds the same parameters."""
    path = tmp_path / "kb_style.py"
    path.write_text(KERNELBENCH_STYLE)
    task = load_task(str(path), "full")
    plan = recognise(task)
    assert "super()" in plan.init and "Model," not in plan.init
    assert "from torch.nn.init import trunc_normal_ as init_truncated" in plan.imports
    assert "from torch.nn import Parameter" in plan.imports and "from math import sqrt as root" in plan.imports
    strategy, params, why = seeds(plan)[0]
    candidate = tmp_path / "candidate.py"
    candidate.write_text(render(plan, strategy, params, why))
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, verdict.reason


HELPER_WITH_COMPUTE = '''import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim))
        self.reset_parameters()

    def reset_parameters(self):
        self.fill_values(self.weight)

    @staticmethod
    def fill_values(w):
        with torch.no_grad():
            w.copy_(1.0 + 0.1 * torch.arange(w.numel()) / w.numel())

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x) * self.weight


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.norm = RMSNorm(dim)

    def forward(self, x, r):
        return self.norm(x + r)


def get_inputs():
    return [torch.randn(33, 200), torch.randn(33, 200)]


def get_init_inputs():
    return [200]
'''


def test_a_helper_module_keeps_only_what_builds_it(evaluator, tmp_path: Path) -> None:
    """A helper module's methods that compute (``_norm``, ``forward``) are left out of the candidate, so
    that the judge's static checks of a strict task see no torch compute; the ones its constructor
    reaches (``reset_parameters``, a static method it calls) stay, and build the same parameters."""
    path = tmp_path / "helper_compute.py"
    path.write_text(HELPER_WITH_COMPUTE)
    task = load_task(str(path), "full")
    plan = recognise(task)
    source = render(plan, *seeds(plan)[0])
    assert "def reset_parameters" in source and "def fill_values" in source
    assert "def _norm" not in source and "torch.rsqrt" not in source and "def forward(self, x):\n        return self._norm" not in source
    candidate = tmp_path / "candidate.py"
    candidate.write_text(source)
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, verdict.reason


HELPERS_REACHED_FROM_OUTSIDE = '''import torch
import torch.nn as nn


class Table(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def make(self):
        return torch.full((self.n,), 1.25)

    def forward(self, x):
        return x * self.make()


class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.t = Table(n)
        self.w = nn.Parameter(torch.empty(n))
        self.register_buffer("u", self.t.make(), persistent=False)

    def reset(self):
        nn.init.constant_(self.w, 0.75)

    def count(self):
        return self.w.numel()

    width = property(count)

    def forward(self, x):
        return x * self.w * self.u


class Model(nn.Module):
    def __init__(self, n):
        super(Model, self).__init__()
        self.s = Scale(n)
        self.s.reset()
        self.b = nn.Parameter(torch.linspace(-1, 1, self.s.width))

    def forward(self, x):
        return torch.relu(self.s(x) + self.b)


def get_inputs():
    return [torch.randn(33, 200)]


def get_init_inputs():
    return [200]
'''


def test_helper_methods_named_outside_forward_stay(evaluator, tmp_path: Path) -> None:
    """A method only a helper's ``forward`` calls goes, but one the parent's constructor calls
    (``self.s.reset()``), one another helper's constructor calls (``self.t.make()``) and one a class
    body names (``property(count)``) stay: the candidate's constructor runs them."""
    path = tmp_path / "helpers_outside.py"
    path.write_text(HELPERS_REACHED_FROM_OUTSIDE)
    task = load_task(str(path), "full")
    plan = recognise(task)
    source = render(plan, *seeds(plan)[0])
    assert all(f"def {name}(self)" in source for name in ("make", "reset", "count")), source
    assert "def forward(self, x):\n        return x * self" not in source
    candidate = tmp_path / "candidate.py"
    candidate.write_text(source)
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, verdict.reason


SHADOWED_CONSTANT = '''import torch
import torch.nn as nn

dim = torch.device("cpu")  # a module value no candidate can carry, named like the argument below
scale = 2.0


class Model(nn.Module):
    def __init__(self, dim=1):
        super(Model, self).__init__()
        self.dim = dim
        self.scale = scale

    def forward(self, x):
        return torch.softmax(x * self.scale, dim=self.dim)


def get_inputs():
    return [torch.randn(4, 64)]


def get_init_inputs():
    return []
'''


def test_only_the_globals_a_constructor_reads_are_carried(tmp_path: Path) -> None:
    """``self.dim = dim`` reads its argument: a module value named ``dim`` is neither carried nor a
    reason to refuse the task; the constant the constructor does read is carried."""
    path = tmp_path / "shadowed.py"
    path.write_text(SHADOWED_CONSTANT)
    plan = recognise(load_task(str(path), "full"))
    assert "scale = 2.0" in plan.imports
    assert not any(line.startswith("dim =") for line in plan.imports), plan.imports


CONSTANT_IN_CONSTRUCTOR = '''import torch
import torch.nn as nn

batch_size = 4
features = 300
SMALL = {"features": 8}


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.gain = nn.Parameter(torch.ones(features) + 0.01 * torch.randn(features))

    def forward(self, x):
        return torch.softmax(x * self.gain, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("size, value", [("full", 300), ("small", 8)])
def test_a_constructors_constants_are_carried_at_the_size_being_optimised(tmp_path: Path, size: str,
                                                                           value: int) -> None:
    """The plan is traced at the small size, but a candidate for the full size must build its
    parameters from the full size's constants (and one for the small size from the small ones)."""
    path = tmp_path / "constant.py"
    path.write_text(CONSTANT_IN_CONSTRUCTOR)
    plan = recognise(load_task(str(path), size))
    assert f"features = {value}" in plan.imports, plan.imports


@pytest.mark.parametrize("equation, right, left_shape, transposed", [
    ("bijl,lk->bijk", "b", (2, 3, 5, 40), False), ("bij l, kl -> bijk", "self.w", (2, 3, 5, 40), True),
    ("bl,lk->bk", "b", (6, 40), False)])
def test_an_einsum_that_is_a_matmul_is_planned_as_one(tmp_path: Path, equation: str, right: str,
                                                       left_shape: tuple[int, ...], transposed: bool) -> None:
    """An einsum contracting the left operand's last dimension with a 2-D right operand is a GEMM
    (``"bijl,lk->bijk"``, KernelBench's 4-D tensor-matrix product), the right operand read as [K, N]
    or, for ``"...l,kl->...k"``, as [N, K] through its strides."""
    from kernelevo.agent.builtin import matmul
    from kernelevo.tasks.loader import import_task_module

    path = tmp_path / "einsum.py"
    path.write_text(f'''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.w = nn.Parameter(torch.randn(24, 40) / 6)

    def forward(self, a, b):
        return torch.einsum("{equation}", a, {right})


def get_inputs():
    return [torch.randn(*{left_shape}), torch.randn(40, 24)]


def get_init_inputs():
    return []
''')
    module = import_task_module(path, "full")
    stages = matmul.lower_chain(module.Model(), module.get_inputs())
    assert len(stages) == 1 and stages[0].transposed is transposed and (stages[0].k, stages[0].n) == (40, 24)
    assert recognise(load_task(str(path), "full")).kind == "matmul"


def test_an_einsum_that_is_not_a_matmul_is_not_taken_for_one() -> None:
    import torch.fx

    from kernelevo.agent.builtin import matmul

    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    taken = {"ij,jk->ik": False, "bij,bjk->bik": False, "bhik,bhjk->bhij": True}
    for equation in (*taken, "ij,kj->ikj", "ii,ij->ij", "ij,jk->ki", "bij,cjk->bik", "bij,bjk->bki", "bij,bjj->bij"):
        node = graph.call_function(torch.einsum, (equation, a, b))
        found = matmul._einsum_as_matmul(node)
        assert (found is not None) == (equation in taken), equation
        assert found is None or found[2] is taken[equation], equation


@pytest.mark.parametrize("forward, inputs, why", [
    ("return x @ y.T", "torch.randn(4, 6, 40), torch.randn(24, 40, 4)", "last two dims swapped"),
    ("return (x @ y) @ y.transpose(1, 2)", "torch.randn(4, 6, 40), torch.randn(4, 40, 40)", "chain of batched"),
    ("return x @ y + z", "torch.randn(4, 6, 40), torch.randn(4, 40, 24), torch.randn(4, 6, 24)",
     "per-column values"),
    ("return x @ y.transpose(1, -1)", "torch.randn(6, 40), torch.randn(40, 24)", "swaps a dim with itself"),
])
def test_a_batched_matmul_the_kernel_cannot_take_is_refused_with_its_reason(tmp_path: Path, forward: str,
                                                                              inputs: str, why: str) -> None:
    """The batched GEMM takes batch dims that broadcast, operands as they are or with their last two dims swapped,
    one stage, and an epilogue of per-column values: anything else is refused, saying which."""
    from kernelevo.agent.builtin.program import CannotCover

    path = tmp_path / "batched.py"
    path.write_text(f"""import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, {"x, y, z" if inputs.count("randn") == 3 else "x, y"}):
        {forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
""")
    with pytest.raises(CannotCover, match=why):
        from kernelevo.agent.builtin import matmul
        from kernelevo.tasks.loader import import_task_module

        module = import_task_module(path, "full")
        matmul.lower_chain(module.Model(), module.get_inputs())


def test_every_plans_first_generation_is_proposed_with_a_cell_per_tile(tmp_path: Path) -> None:
    """The policy names each proposal's tile for the archive from whatever block sizes its template
    has: a direct convolution (one input channel per group) has a block along M and none along N."""
    from kernelevo.agent.builtin.gpu_target import HOPPER
    from kernelevo.agent.builtin.policy import BuiltinPolicy
    from kernelevo.agent.policy import SearchView

    for case in CASES:
        cols = 200 if "linear" in case[0] or "mlp" in case[0] or "matmul" in case[0] else 1000
        task = load_task(str(_write(tmp_path, case, 64 if "residual" in case[0] else cols)), "full")
        policy = BuiltinPolicy()
        policy.prepare(task)
        offered = seeds(policy.plan)
        proposals = policy.propose(SearchView(task=task, generation=0, archive={}, entries=[], tried=set()),
                                   len(offered))
        assert len(proposals) == len({policy_key(p) for p in proposals}) > 0, case[0]
        assert all(p["descriptor"] for p in proposals), case[0]
        # a GEMM seed's pipeline fits in a Hopper program's shared memory (fp32 tiles are twice bf16's)
        element = 4 if policy.plan.dtype == "float32" else 2
        for strategy, params, _ in offered:
            if strategy in ("gemm", "gemm_tma"):
                stage = (params["BLOCK_M"] + params["BLOCK_N"]) * params["BLOCK_K"] * element
                assert stage * params["num_stages"] <= HOPPER.shared_bytes, (case[0], strategy, params)


def policy_key(proposal) -> str:  # noqa: ANN001 - a Proposal
    return f"{proposal['strategy']}:{sorted(proposal['params'].items())}"


SIZE_AS_NUMBER = '''import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return {body}

batch_size = 4096
dim = 16384

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_a_size_in_forward_is_a_number_in_a_kernel_only_where_it_does_not_change(tmp_path: Path) -> None:
    """The reference is traced at a small size. A size read in forward serves as structure at any
    size (a normalized shape); as a number in a kernel, ``x.size(-1)`` traced as 1024 must not become
    the constant of a kernel run at 16384: it goes in as its value at 16384, and the code says it holds
    at that size alone. A module-level ``dim`` read in forward is the file's own constant: the kernel
    holds its value at the size being optimised, with no check (the file defines it)."""
    path = tmp_path / "sizes.py"
    path.write_text(SIZE_AS_NUMBER.format(body="torch.softmax(x * x.size(-1) ** -0.5, dim=-1)"))
    plan = recognise(load_task(str(path), "full"))
    assert plan.sized_for == [(4096, 16384)]
    source = render(plan, *seeds(plan)[0])
    assert "0.0078125" in source and "0.03125" not in source and "generated for inputs of shapes" in source
    path.write_text(SIZE_AS_NUMBER.format(body="torch.relu(x * dim ** -0.5)"))  # a module-level size
    plan = recognise(load_task(str(path), "full"))
    source = render(plan, *seeds(plan)[0])
    assert plan.sized_for is None and "0.0078125" in source and "0.03125" not in source
    assert "generated for a model built with" not in source
    path.write_text(SIZE_AS_NUMBER.format(body="F.layer_norm(x, x.shape[1:]) * (x.dim() - 1)"))
    plan = recognise(load_task(str(path), "full"))
    assert plan.cols == 16384 and "layer_norm" in plan.describe()


SCALE_ATTRIBUTE = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** -0.5

    def forward(self, x):
        return x * self.scale


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.inner = Block(dim)
        self.shift = dim // 8

    def forward(self, x):
        return torch.softmax(self.inner(x) - self.shift, dim=-1)


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return [1024]
'''


def test_numbers_the_constructor_makes_are_taken_at_the_size_being_optimised_and_checked(tmp_path: Path) -> None:
    """``self.scale = dim ** -0.5`` is a number in the traced graph, another at the small size: the kernel
    holds its value at the size being optimised, and ModelNew's constructor checks that it was built
    with it (one built with another ``dim`` raises instead of computing with a scale not its own)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "scale.py"
    path.write_text(SCALE_ATTRIBUTE)
    plan = recognise(load_task(str(path), "full"))
    source = render(plan, *seeds(plan)[0])
    assert "0.03125" in source and "if (self.shift, self.inner.scale,) != (128, 0.03125):" in source, source
    (tmp_path / "candidate.py").write_text(source)
    run = ("import importlib.util, sys, torch\n"
           "spec = importlib.util.spec_from_file_location('c', sys.argv[1]); c = importlib.util.module_from_spec(spec)\n"
           "spec.loader.exec_module(c)\n"
           "x = torch.randn(4, 1024)\n"
           "torch.testing.assert_close(c.ModelNew(1024)(x), torch.softmax(x * 1024 ** -0.5 - 128, dim=-1))\n"
           "try:\n    c.ModelNew(256)\nexcept ValueError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", run, str(tmp_path / "candidate.py")], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "built with self.shift == 128, self.inner.scale == 0.03125" in done.stdout, done.stdout


TAP_MAJOR_CONVS = {
    "convtranspose1d-grouped-dilated": ("nn.ConvTranspose1d(80, 16, 3, padding=2, dilation=2, groups=2)",
                                        "torch.randn(2, 80, 11)"),
    "conv3d": ("nn.Conv3d(40, 20, (2, 3, 3), stride=(1, 2, 1), padding=(1, 1, 0))", "torch.randn(2, 40, 3, 6, 5)"),
    "convtranspose2d-phases-grouped": ("nn.ConvTranspose2d(36, 10, (3, 4), stride=(2, 3), padding=(1, 2), "
                                       "output_padding=(1, 0), groups=2)", "torch.randn(2, 36, 4, 5)"),
}


@pytest.mark.parametrize("name", _first_runs(list(TAP_MAJOR_CONVS)))
def test_tap_major_reads_a_channels_last_copy_of_the_input(evaluator, tmp_path: Path, name: str) -> None:
    """``tap_major`` with CHANNELS_LAST: the input copied to [N, spatial, C] and read a pixel's
    channels at a time; the judge accepts it, and the K steps whose channels run past a group's end
    (40 or 18 channels, steps of 32 or 16) are masked, as are a late phase's taps past the kernel."""
    conv, inputs = TAP_MAJOR_CONVS[name]
    path = tmp_path / "mystery.py"
    path.write_text(TASK.format(header="", cols=0, init=f"        self.conv = {conv}", args="x",
                                body="        return torch.relu(self.conv(x))", inputs=inputs))
    task = load_task(str(path), "full")
    plan = recognise(task)
    strategy, params, why = next(seed for seed in seeds(plan) if seed[0] == "tap_major")
    _accepted(evaluator, task, plan, tmp_path, strategy, dict(params, CHANNELS_LAST=True, BLOCK_M=32), why,
              "_kernelevo_x_channels_last = x.permute(0, 2")


def test_a_sorts_indices_are_left_to_torch_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "mystery.py"
    path.write_text(TASK.format(header="", cols=0, init="        pass", args="x",
                                body="        return torch.sort(x, dim=-1)[1]", inputs="torch.randn(4, 9)"))
    with pytest.raises(CannotCover, match="indices"):
        recognise(load_task(str(path), "full"))


def test_integer_inputs_in_integer_arithmetic_are_refused_with_the_reason(tmp_path: Path) -> None:
    """An integer input that only becomes numbers, masks or comparisons is read as fp32; integer
    arithmetic on it (a floor division) would not compute what torch computes, and is refused."""
    path = _write(tmp_path, ("int-floor-division", "        pass", "        return (x // 3).float() * 0.5",
                             "torch.randint(0, 100, (6, {cols}))", ""), 64)
    with pytest.raises(CannotCover, match="integer arithmetic"):
        recognise(load_task(str(path), "full"))


SIZED_ROLL = """import torch
import torch.nn as nn

SEQ = 512
SMALL = {"SEQ": 64}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.roll(x, SEQ // 2, 1) * 2.0


def get_inputs():
    return [torch.randn(4, SEQ)]


def get_init_inputs():
    return []
"""


def test_a_rearrangement_whose_amounts_follow_the_size_is_refused(tmp_path: Path) -> None:
    """A roll by half the sequence: traced at the small size it would be a roll by 32 in a kernel meant for
    512. The arguments differ between the sizes, and the plan says so instead of rolling by the wrong
    amount."""
    path = tmp_path / "sized_roll.py"
    path.write_text(SIZED_ROLL)
    with pytest.raises(CannotCover, match="depend on the size"):
        recognise(load_task(str(path), "full"))



def test_a_padding_module_whose_amounts_follow_the_size_is_refused(tmp_path: Path) -> None:
    """A module built from the size (a pad of a quarter of the length) is the pad at the size it was made
    for: read from the small model it would pad the full input by the small amount."""
    path = tmp_path / "sized_pad.py"
    path.write_text(SIZED_ROLL.replace("super().__init__()", "super().__init__()\n        self.pad = nn.ReflectionPad1d(SEQ // 4)")
                    .replace("torch.roll(x, SEQ // 2, 1)", "self.pad(x)").replace("randn(4, SEQ)", "randn(2, 4, SEQ)"))
    with pytest.raises(CannotCover, match="depend on the size"):
        recognise(load_task(str(path), "full"))


def test_a_reflection_past_the_input_is_refused_as_torch_refuses_it(tmp_path: Path) -> None:
    """Reflect padding of 3 needs at least 4 values along the dim; the kernel would read outside the
    input, so the forward raises first, as torch does."""
    import importlib.util

    import torch

    task, plan = _case(tmp_path, "rearrange-reflection-pad-module", 64)
    strategy, params, why = seeds(plan)[0]
    path = tmp_path / "reflect_candidate.py"
    path.write_text(render(plan, strategy, params, why))
    spec = importlib.util.spec_from_file_location("reflect_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    small = torch.randn(2, 3, 3, 11)  # height 3: a reflection of 3 rows reaches past it
    with pytest.raises(RuntimeError):
        torch.nn.ReflectionPad2d((1, 2, 3, 1))(small)
    with pytest.raises(ValueError, match="reaches past the input"):
        module.ModelNew()(small)


NAMED_LIKE_A_HELPER = """import torch
import torch.nn as nn


def next_power_of_2(n):
    # the reference's own: the power of two strictly above n
    return 1 << n.bit_length()


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.g = nn.Parameter(torch.randn(next_power_of_2(n)))

    def forward(self, x):
        return torch.softmax(x * self.g, dim=-1)


def get_inputs():
    return [torch.randn(8, 2048)]


def get_init_inputs():
    return [1024]
"""


def test_a_reference_helper_named_like_a_generated_one_is_refused(tmp_path: Path) -> None:
    """Generated files define ``next_power_of_2`` for their launchers: a reference's own function of that
    name, carried along for ``__init__``, would be replaced by it and size the parameter otherwise."""
    path = tmp_path / "named_like_a_helper.py"
    path.write_text(NAMED_LIKE_A_HELPER)
    with pytest.raises(CannotCover, match="`next_power_of_2` has the name of a definition"):
        recognise(load_task(str(path), "full"))
