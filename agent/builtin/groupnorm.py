"""GroupNorm and InstanceNorm (``nn.GroupNorm``, ``nn.InstanceNorm1d/2d/3d``), with the pointwise ops
after them fused into the write.

Both normalise each (image, group) over the group's channels and every position: in NC(DHW) memory
that is one contiguous run of ``channels per group x positions`` values (InstanceNorm: one channel
per group). One program owns one such run: a pass for the mean, a pass for the variance of the
centred values (two passes, not E[x^2] - E[x]^2, so that inputs far from zero keep their
precision), and a pass that normalises, applies the per-channel affine parameters and the epilogue,
and writes. Runs up to a few MB are re-read from L2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn

from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.tile_epilogue import chain_after, epilogue_arguments, epilogue_lines, epilogue_program
from kernelevo.agent.builtin.vocabulary import graph_calls

INSTANCE_NORMS = (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)


@dataclass
class GroupNorm:
    module: str
    groups: int | None
    """None for InstanceNorm (a group per channel)."""
    eps: float
    affine: bool
    epilogue: Program | None
    out_dtype: str
    input: str
    inputs: list[str]


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> GroupNorm | None:
    """The plan if the graph starts with a GroupNorm or InstanceNorm of an input, else None."""
    calls, placeholders = graph_calls(gm)
    if not calls or calls[0].op != "call_module":
        return None
    sub = gm.get_submodule(str(calls[0].target))
    if not isinstance(sub, (nn.GroupNorm, *INSTANCE_NORMS)):
        return None
    node = calls[0]
    if node.args[0] not in placeholders:
        raise CannotCover("a normalisation whose input is computed (covered: of an input)")
    x = inputs[placeholders.index(node.args[0])]
    if isinstance(sub, INSTANCE_NORMS) and sub.track_running_stats:
        raise CannotCover("InstanceNorm with running statistics is not covered")
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.dtype not in (torch.float32, torch.bfloat16,
                                                                         torch.float16):
        raise CannotCover("GroupNorm/InstanceNorm of a [batch, channels, ...] fp32, bf16 or fp16 tensor only")
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    chain = chain_after(gm, node, output)
    epilogue = epilogue_program(gm, node, chain, inputs, placeholders, "normalisation")
    last = chain[-1] if chain else node
    if tuple(last.meta["tensor_meta"].shape) != tuple(x.shape):
        raise CannotCover("the ops after the normalisation change its shape (covered: pointwise ops)")
    return GroupNorm(module=str(node.target), groups=sub.num_groups if isinstance(sub, nn.GroupNorm) else None,
                     eps=float(sub.eps), affine=bool(sub.affine), epilogue=epilogue,
                     out_dtype=str(last.meta["tensor_meta"].dtype).removeprefix("torch."), input=node.args[0].name,
                     inputs=[p.name for p in placeholders])


KERNEL = '''@triton.jit
def group_norm_kernel(x_ptr, w_ptr, b_ptr, {params}out_ptr, RUNS, G, CG, S, eps,
                      AFFINE: tl.constexpr, RUNS_PER: tl.constexpr, BLOCK: tl.constexpr):
    # Program p: RUNS_PER runs r = (image, group), each of L = CG x S contiguous values, as one vector
    # of RUNS_PER x BLOCK lanes (BLOCK lanes a run). Three passes over the runs: the mean, the variance
    # of the centred values, then normalise, scale, shift, epilogue, write. A long run takes the whole
    # vector (RUNS_PER = 1) and is walked BLOCK values a step; short runs (a linear's 32 features a
    # group) share it, so a program is not a lane's worth of work in a block of thousands.
    L = CG * S
    lane = tl.arange(0, RUNS_PER * BLOCK) % BLOCK
    run = tl.program_id(0) * RUNS_PER + tl.arange(0, RUNS_PER * BLOCK) // BLOCK
    run_ok = run < RUNS
    base = run.to(tl.int64) * L
    g = run % G
    total = tl.zeros((RUNS_PER * BLOCK,), dtype=tl.float32)
    for j0 in range(0, L, BLOCK):
        j = j0 + lane
        total += tl.load(x_ptr + base + j, mask=run_ok & (j < L), other=0.0).to(tl.float32)
    mean = _per_run(tl.sum(tl.reshape(total, (RUNS_PER, BLOCK)), axis=1) / L, RUNS_PER, BLOCK)
    squares = tl.zeros((RUNS_PER * BLOCK,), dtype=tl.float32)
    for j0 in range(0, L, BLOCK):
        j = j0 + lane
        ok = run_ok & (j < L)
        centred = tl.load(x_ptr + base + j, mask=ok, other=0.0).to(tl.float32) - mean
        squares += tl.where(ok, centred * centred, 0.0)
    rstd = _per_run(1.0 / tl.sqrt(tl.sum(tl.reshape(squares, (RUNS_PER, BLOCK)), axis=1) / L + eps),
                    RUNS_PER, BLOCK)
    for j0 in range(0, L, BLOCK):
        j = j0 + lane
        col_ok = run_ok & (j < L)
        kout = g * CG + j // S  # the channel of each value
        x = tl.load(x_ptr + base + j, mask=col_ok, other=0.0).to(tl.float32)
        y = (x - mean) * rstd
        if AFFINE:
            y = y * tl.load(w_ptr + kout, mask=col_ok, other=0.0).to(tl.float32)
            y = y + tl.load(b_ptr + kout, mask=col_ok, other=0.0).to(tl.float32)
        acc = y[None, :]
        out_offsets = (base + j)[None, :]
        mask = col_ok[None, :]
{epilogue}
        tl.store(out_ptr + out_offsets, {result}.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _per_run(value, RUNS_PER: tl.constexpr, BLOCK: tl.constexpr):
    # one value per run, repeated over the run's BLOCK lanes of the program's vector
    return tl.reshape(tl.broadcast_to(value[:, None], (RUNS_PER, BLOCK)), (RUNS_PER * BLOCK,))
'''


def kernel(norm: GroupNorm) -> str:
    params, lines, result = epilogue_lines(norm.epilogue, norm.out_dtype)
    return KERNEL.format(params=params, epilogue="\n".join("        " + line for line in lines) or "        pass",
                         result=result)


def forward(norm: GroupNorm, params: dict[str, Any]) -> str:
    x, module = norm.input, f"self.{norm.module}"
    groups = f"{module}.num_groups" if norm.groups is not None else f"{x}.shape[1]"
    weights = f"{module}.weight, {module}.bias" if norm.affine else f"{x}, {x}"
    body = [f"{x} = {x}.contiguous()",
            f"groups = {groups}",
            f"positions = {x}[0, 0].numel()",
            f"out = torch.empty({x}.shape, dtype=torch.{norm.out_dtype}, device={x}.device)"]
    lines, extra = epilogue_arguments(norm.epilogue)
    body += lines
    body += [f"runs = {x}.shape[0] * groups",
             f"run = ({x}.shape[1] // groups) * positions",
             # a run's lanes: the whole tile for a long run, the run's own size (at least 16) for a short one
             f"block = min({params['BLOCK']}, max(16, next_power_of_2(run)))",
             "if out.numel():",
             f"    group_norm_kernel[(ceil_div(runs, {params['BLOCK']} // block),)](",
             f"        {x}, {weights}, {extra}out, runs, groups, {x}.shape[1] // groups, positions, {norm.eps!r},",
             f"        AFFINE={norm.affine}, RUNS_PER={params['BLOCK']} // block, BLOCK=block, "
             f"num_warps={params['num_warps']})",
             "return out"]
    return f"def forward(self, {', '.join(norm.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK": block, "num_warps": warps}, f"seed: the run in blocks of {block} values")
            for block, warps in ((2048, 8), (1024, 4), (4096, 8))]


def describe(norm: GroupNorm) -> str:
    what = f"GroupNorm ({norm.groups} groups)" if norm.groups is not None else "InstanceNorm"
    epilogue = f" + {', '.join(norm.epilogue.ops)}" if norm.epilogue is not None else ""
    return f"{what}, eps {norm.eps:g}{', affine' if norm.affine else ''}{epilogue}"
