"""Cumulative sums, products, maxima, minima and log-sum-exps (``cumsum``, ``cumprod``, the values of
``cummax`` and ``cummin``, ``logcumsumexp``) along any dimension: inclusive or
exclusive, forward or reversed, of the input or of the input times a mask, as one Triton kernel
that reads each input once and writes the output once.

The input is viewed as ``[outer, R, inner]`` with R the scanned dimension. A program owns BLOCK_I
neighbouring inner positions of one outer index and walks the R values BLOCK_R rows at a time: each
tile is scanned in registers (``tl.cumsum``, a tree scan in log2(BLOCK_R) steps), offset by the carry
of the tiles before it, and stored; the carry then takes the tile's total. Loads are runs of
contiguous inner elements (or of contiguous scanned values when nothing is inside the dimension), so
memory is read in whole lines with no transposed copy. Reversed scans walk the tiles from the end;
exclusive scans load each value from one position back, so no value is subtracted out again.

Which variant a graph computes is read from what it does, not from how it is written: the graph is
run on small inputs and compared with each variant, so ``x.flip(d).cumsum(d).flip(d)``, a
``narrow`` and ``cat`` around a ``cumsum``, or an index expression all land on the same kernel.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin.dimreduce import STRIDED_PROGRAM
from kernelevo.agent.builtin.program import CannotCover

SCANS = {torch.cumsum: "sum", torch.cumprod: "prod", torch.cummax: "max", torch.cummin: "min",
         torch.logcumsumexp: "logsumexp"}
SCAN_METHODS = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min", "logcumsumexp": "logsumexp"}
IDENTITY = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf"), "logsumexp": float("-inf")}
"""Each scan's value for "nothing yet": an exclusive scan's first result, and what padding loads."""
HELPERS = {torch.flip, torch.narrow, torch.cat, torch.concat, torch.zeros_like, torch.ones_like, torch.select,
           torch.unsqueeze, torch.mul, operator.mul, operator.sub, operator.add, operator.getitem, getattr,
           torch.zeros, torch.ones}
HELPER_METHODS = {"flip", "narrow", "select", "unsqueeze", "size", "mul", "float", "to", "type_as", "contiguous"}
"""Ops the variants are written with (reversing, shifting, masking, shapes); a graph with any other
op is left to other templates."""
FLOATS = (torch.float32, torch.bfloat16, torch.float16)


@dataclass
class Scan:
    """One cumulative sum or product over ``dim`` of the task's input (times its mask)."""

    op: str
    """sum, prod, max, min (the values of ``cummax``/``cummin``; their indices are not covered) or
    logsumexp."""
    dim: int
    """The scanned dimension (non-negative)."""
    reverse: bool
    """From the last position to the first."""
    exclusive: bool
    """Each position's value left out of its own result (the first result is 0, or 1 for a product)."""
    masked: bool
    """The scanned values are the product of the two inputs (a value and a mask)."""
    out_dtype: str


def _scan_node(node: torch.fx.Node) -> str | None:
    if node.op == "call_function":
        return SCANS.get(node.target)
    if node.op == "call_method":
        return SCAN_METHODS.get(str(node.target))
    return None


def _helper(node: torch.fx.Node) -> bool:
    if node.op == "call_function":
        return node.target in HELPERS
    return node.op == "call_method" and str(node.target) in HELPER_METHODS


def _dim(node: torch.fx.Node) -> Any:
    return node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)


def reference(scan: Scan, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """What ``scan`` computes, in torch: the meaning each variant is checked against."""
    values = x * mask if scan.masked and mask is not None else x
    if scan.reverse:
        values = values.flip(scan.dim)
    if scan.exclusive:
        first = torch.full_like(values.narrow(scan.dim, 0, 1), IDENTITY[scan.op])
        values = torch.cat([first, values.narrow(scan.dim, 0, values.shape[scan.dim] - 1)], dim=scan.dim)
    out = {"sum": torch.cumsum, "prod": torch.cumprod, "max": lambda v, d: torch.cummax(v, d).values,
           "min": lambda v, d: torch.cummin(v, d).values, "logsumexp": torch.logcumsumexp}[scan.op](values, scan.dim)
    return out.flip(scan.dim) if scan.reverse else out


def _probes(inputs: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """The task's small inputs and one random set of the same shapes (values near 1, so products
    neither vanish nor explode)."""
    generator = torch.Generator().manual_seed(0)
    other = [torch.randint(0, 2, x.shape, generator=generator).bool() if x.dtype == torch.bool else
             (torch.rand(x.shape, generator=generator) + 0.5).to(x.dtype) for x in inputs]
    return [inputs, other]


def _matches(gm: torch.fx.GraphModule, scan: Scan, probes: list[list[torch.Tensor]]) -> bool:
    for probe in probes:
        want = gm(*probe)
        if not isinstance(want, torch.Tensor) or want.shape != probe[0].shape:
            return False
        got = reference(scan, *probe)
        if got.dtype != want.dtype or not torch.allclose(got.double(), want.double(), rtol=1e-4, atol=1e-5,
                                                         equal_nan=True):
            return False
    return True


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> Scan | None:
    """The scan if the graph is one ``cumsum`` or ``cumprod`` of its input (or of its two inputs'
    product), with only reversing, shifting and shape ops around it; None when it has no scan or
    other ops (other templates may take it)."""
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    scans = [n for n in calls if _scan_node(n) is not None]
    if len(scans) != 1 or not all(n is scans[0] or _helper(n) for n in calls):
        return None
    if not 1 <= len(inputs) <= 2 or not all(isinstance(x, torch.Tensor) and x.dim() > 0 for x in inputs):
        return None
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if not isinstance(output, torch.fx.Node):
        return None  # several outputs: not one scan
    name, dim = _scan_node(scans[0]), _dim(scans[0])
    what = f"`cum{name}`"
    if not isinstance(dim, int) or scans[0].kwargs.get("dtype") is not None:
        raise CannotCover(f"{what} with a dimension or dtype the graph computes (covered: a fixed dim)")
    x = inputs[0]
    if len(inputs) == 2 and inputs[1].shape != x.shape:
        raise CannotCover(f"{what} of two inputs of different shapes (covered: a value times a same-shaped mask)")
    if not any(t.dtype in FLOATS for t in inputs) or any(t.dtype not in (*FLOATS, torch.bool) for t in inputs):
        raise CannotCover(f"{what} of {', '.join(str(t.dtype) for t in inputs)} (covered: fp32, bf16, fp16, "
                          "and a bool mask)")
    dim %= x.dim()
    if x.shape[dim] < 2:
        raise CannotCover(f"{what} over a dimension of length {x.shape[dim]} at the size it is traced at "
                          "(its direction cannot be told)")
    probes = _probes(inputs)
    result = gm(*probes[1])
    if not isinstance(result, torch.Tensor) or result.dtype not in FLOATS:
        raise CannotCover(f"{what} whose result is not its values (the indices of cummax/cummin are not covered)")
    out_dtype = result.dtype
    for reverse, exclusive in itertools.product((False, True), repeat=2):
        scan = Scan(op=name, dim=dim, reverse=reverse, exclusive=exclusive, masked=len(inputs) == 2,
                    out_dtype=str(out_dtype).removeprefix("torch."))
        if _matches(gm, scan, probes):
            return scan
    raise CannotCover(f"{what} over dim {dim} in a form the scan template does not compute (covered: inclusive "
                      "or exclusive, forward or reversed, of the input or of the input times a mask)")


KERNEL = '''@triton.jit
def _times(a, b):
    return a * b


@triton.jit
def _larger(a, b):
    # NaN wins, as in torch's cummax: once a NaN is seen it is every later result
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _smaller(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def scan_kernel(x_ptr, mask_ptr, out_ptr, R, INNER, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
                WIDE: tl.constexpr):
    # Program p: inner positions [i * BLOCK_I, (i + 1) * BLOCK_I) of outer index o (p = o * blocks + i),
    # scanned over their R values {direction}. Reads R x INNER values of each input once, writes as
    # many. One grid axis: an outer count past 65535 still launches.
{program}    base = outer * R * INNER
    carry = tl.full((BLOCK_I,), {identity}, dtype={acc})
    for s0 in range(0, R, BLOCK_R):
        s = s0 + rs  # positions in scan order
        r = {position}  # positions in memory
        ok = (s < R)[:, None] & inner_ok[None, :]
        src = {source}  # where each position's scanned value comes from
        src_ok = ok & ((src >= 0) & (src < R))[:, None]
        at = base + src[:, None] * INNER + inner[None, :]
        v = tl.load(x_ptr + at, mask=src_ok, other={identity}).to({acc})
{mask}        result = {combine}
{round}        tl.store(out_ptr + base + r[:, None] * INNER + inner[None, :], result.to(out_ptr.dtype.element_ty),
                 mask=ok)
        carry = {advance}
'''


LOGADDEXP = '''@triton.jit
def _logaddexp(a, b):
    # log(exp(a) + exp(b)) taken from the larger, so nothing overflows; -inf ("nothing yet") adds nothing,
    # two equal infinities give themselves, and a NaN is every later result, as in torch
    m = tl.maximum(a, b)
    d = tl.minimum(a, b) - m
    out = tl.where(d != d, m, m + tl.log(1.0 + tl.exp(d)))
    return tl.where((a != a) | (b != b), a + b, out)


'''
"""The log-cumsum-exp's combine, written into the kernels that use it."""


COMBINE = {
    "sum": ("carry[None, :] + tl.cumsum(v, axis=0)", "carry + tl.sum(v, axis=0)"),
    "prod": ("carry[None, :] * tl.cumprod(v, axis=0)", "carry * tl.reduce(v, 0, _times)"),
    "max": ("_larger(carry[None, :], tl.associative_scan(v, 0, _larger))", "_larger(carry, tl.reduce(v, 0, _larger))"),
    "min": ("_smaller(carry[None, :], tl.associative_scan(v, 0, _smaller))",
            "_smaller(carry, tl.reduce(v, 0, _smaller))"),
    "logsumexp": ("_logaddexp(carry[None, :], tl.associative_scan(v, 0, _logaddexp))",
                  "_logaddexp(carry, tl.reduce(v, 0, _logaddexp))"),
}
"""Per scan: a tile's results from the carry and the tile's own scan, and the carry after the tile."""


ACCUMULATOR = {"prod": "tl.float64"}
"""Where a scan is carried wider than float32. A tile's products are multiplied as a tree, not one
after another: a partial product of several values above 1 that follow small ones can overflow
float32 (and meet a zero as inf * 0 = NaN) where the running product never does. In float64 no such
partial product overflows before the true one would. Measured on a GPU: 30 of KernelBench's cumprod
outputs came out inf (and 32646 NaN) on inputs a hundred times the usual scale, where eager's were finite."""


def kernel(scan: Scan) -> str:
    identity = repr(IDENTITY[scan.op]) if scan.op in ("sum", "prod") else f'float("{IDENTITY[scan.op]}")'
    shift = ("r + 1" if scan.reverse else "r - 1") if scan.exclusive else "r"
    # a padded position holds the identity and keeps it: its mask reads as 1 (0 would turn -inf to NaN)
    acc = ACCUMULATOR.get(scan.op, "tl.float32")
    mask = f"        v = v * tl.load(mask_ptr + at, mask=src_ok, other=1).to({acc})\n" if scan.masked else ""
    combine, advance = COMBINE[scan.op]
    rounding = "        result = round_to_bf16(result.to(tl.float32))\n" if scan.out_dtype == "bfloat16" else ""
    direction = ("from the last to the first" if scan.reverse else "from the first to the last") + (
        ", each position's own value left out" if scan.exclusive else "")
    helper = LOGADDEXP if scan.op == "logsumexp" else ""
    return helper + KERNEL.format(program=STRIDED_PROGRAM, direction=direction, identity=identity,
                         position="R - 1 - s" if scan.reverse else "s",
                         source=shift, mask=mask, combine=combine, advance=advance, round=rounding, acc=acc)


def forward(scan: Scan, names: list[str], params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the [outer, R, inner] view, the output, the launch."""
    x = names[0]
    mask = names[1] if scan.masked else x
    body = [f"{x} = {x}.contiguous()"]
    if scan.masked:
        body.append(f"{mask} = {mask}.contiguous()")
    body += [f"outer = {x}.shape[:{scan.dim}].numel()",
             f"length = {x}.shape[{scan.dim}]",
             f"inner = {x}.shape[{scan.dim + 1}:].numel()",
             f"out = torch.empty({x}.shape, dtype=torch.{scan.out_dtype}, device={x}.device)",
             f"BLOCK_R, BLOCK_I = {params['BLOCK_R']}, {params['BLOCK_I']}",
             "if out.numel():",
             "    scan_kernel[(ceil_div(inner, BLOCK_I) * outer,)](",
             f"        {x}, {mask}, out, length, inner, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I,",
             f"        WIDE={x}.numel() >= 2**31, num_warps={params['num_warps']})",
             "return out"]
    return f"def forward(self, {', '.join(names)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds(inner: int) -> list[tuple[dict[str, Any], str]]:
    """Tiles of 2-4K values: with nothing inside the dimension, a column of contiguous scanned values
    per step; otherwise whole 512-byte lines of inner positions per row of the tile."""
    if inner == 1:
        return [({"BLOCK_R": block, "BLOCK_I": 1, "num_warps": warps}, f"seed: {block} contiguous values per step")
                for block, warps in ((2048, 4), (4096, 8), (1024, 4))]
    out = []
    for block_r, block_i, warps in ((16, 128, 4), (32, 64, 4), (8, 256, 8)):
        if block_i > 2 * max(inner, 16) and block_i > 64:
            continue
        out.append(({"BLOCK_R": block_r, "BLOCK_I": block_i, "num_warps": warps},
                    f"seed: {block_r} scanned rows x {block_i} inner positions per step"))
    return out
