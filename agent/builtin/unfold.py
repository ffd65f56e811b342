"""Sliding blocks of an image as columns (``F.unfold``, ``nn.Unfold``, "im2col"): output
``[n, (c * KH + i) * KW + j, oh * OW + ow]`` is input ``[n, c, oh * SH - PH + i * DH, ow * SW - PW + j * DW]``,
zero where that falls in the padding.

One program writes BLOCK consecutive output values, so the output (KH * KW times the input, the whole
cost of this op) is written once in whole lines. Neighbouring outputs are neighbouring window
positions of one tap, which read input values SW apart in a row: each input value is read KH * KW /
(SH * SW) times, mostly from L1 and L2, and the padding is masked, never read. Ops after the unfold
run as kernels of their own (:mod:`sequence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import graph_calls, returns_only

NAMES = ("kernel_size", "dilation", "padding", "stride")
DEFAULTS = {"dilation": 1, "padding": 0, "stride": 1}


@dataclass
class Unfold:
    input: str
    inputs: list[str]
    kernel: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int]
    stride: tuple[int, int]
    out_dtype: str


def _pair(value: Any, name: str) -> tuple[int, int]:
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
        raise CannotCover(f"an unfold whose {name} is {value!r} (covered: an int or a pair of ints known when traced)")
    return pair  # type: ignore[return-value]


def _settings(gm: torch.fx.GraphModule, node: torch.fx.Node) -> dict[str, Any] | None:
    if node.op == "call_module" and isinstance(sub := gm.get_submodule(str(node.target)), nn.Unfold):
        return {name: getattr(sub, name) for name in NAMES}
    if node.op == "call_function" and node.target is F.unfold:
        found = dict(zip(NAMES, node.args[1:], strict=False))
        found.update({k: v for k, v in node.kwargs.items() if k in NAMES})
        return {**DEFAULTS, **found}
    return None


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> Unfold | None:
    """The plan if the graph is one unfold of a batched image passed to forward, else None."""
    calls, placeholders = graph_calls(gm)
    settings = _settings(gm, calls[0]) if calls else None
    if settings is None:
        return None
    source = calls[0].args[0] if calls[0].args else calls[0].kwargs.get("input")
    if source not in placeholders:
        raise CannotCover("an unfold of a computed tensor (covered: an input passed to forward)")
    x = inputs[placeholders.index(source)]
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise CannotCover("an unfold of an input that is not a batch of images (covered: 4 dims)")
    if len(calls) > 1:
        raise CannotCover("ops after an unfold (each runs as a kernel of its own)")
    if not returns_only(gm, calls[0]):
        return None  # the graph returns something else too (or instead): not this template's output
    pairs = {name: _pair(settings[name], name) for name in NAMES}
    return Unfold(input=source.name, inputs=[p.name for p in placeholders], kernel=pairs["kernel_size"],
                  dilation=pairs["dilation"], padding=pairs["padding"], stride=pairs["stride"],
                  out_dtype=str(x.dtype).removeprefix("torch."))


KERNEL = '''@triton.jit
def unfold_kernel(x_ptr, out_ptr, N, C, H, W, OW, L, SH, SW, PH, PW, DH, DW, KH: tl.constexpr, KW: tl.constexpr,
                  BLOCK: tl.constexpr):
    # Program p: output values [p * BLOCK, (p + 1) * BLOCK) in memory order, output [n, r, l] with
    # r = (c * KH + i) * KW + j the tap and l = oh * OW + ow the window; a tap outside the image reads
    # nothing and writes zero.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    window = offs % L
    rest = offs // L
    tap = rest % (C * KH * KW)
    image = rest // (C * KH * KW)
    j = tap % KW
    i = (tap // KW) % KH
    c = tap // (KH * KW)
    h = (window // OW) * SH - PH + i * DH
    w = (window % OW) * SW - PW + j * DW
    inside = ok & (h >= 0) & (h < H) & (w >= 0) & (w < W)
    value = tl.load(x_ptr + ((image * C + c) * H + h) * W + w, mask=inside, other=0)
    tl.store(out_ptr + offs, value, mask=ok)
'''


def forward(plan: Unfold, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the windows from the input's size, the output, one launch."""
    x = plan.input
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = plan.kernel, plan.dilation, plan.padding, plan.stride
    body = [f"{x} = {x}.contiguous()",
            f"n, c, h, w = {x}.shape",
            f"oh = (h + {2 * ph} - {dh * (kh - 1)} - 1) // {sh} + 1",
            f"ow = (w + {2 * pw} - {dw * (kw - 1)} - 1) // {sw} + 1",
            "if oh <= 0 or ow <= 0:",
            "    raise ValueError(f'an unfold of {h} x {w} images leaves no window')",
            f"out = torch.empty((n, c * {kh * kw}, oh * ow), dtype={x}.dtype, device={x}.device)",
            "if out.numel():",
            f"    unfold_kernel[(ceil_div(out.numel(), {params['BLOCK']}),)](",
            f"        {x}, out, out.numel(), c, h, w, ow, oh * ow, {sh}, {sw}, {ph}, {pw}, {dh}, {dw},",
            f"        KH={kh}, KW={kw}, BLOCK={params['BLOCK']}, num_warps={params['num_warps']})",
            "return out"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK": 1024, "num_warps": 4}, "seed: 1024 output values per program"),
            ({"BLOCK": 2048, "num_warps": 8}, "seed: 2048 output values per program, 8 warps"),
            ({"BLOCK": 512, "num_warps": 4}, "seed: 512 output values per program")]


def describe(plan: Unfold) -> str:
    kernel = "x".join(map(str, plan.kernel))
    return (f"unfold of {plan.input} into {kernel} blocks, stride {plan.stride}, padding {plan.padding}, "
            f"dilation {plan.dilation}")
