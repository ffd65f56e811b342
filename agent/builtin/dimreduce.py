"""Reductions over dimensions other than the last: ``sum``, ``mean``, ``prod``, ``max``, ``min``,
``amax``, ``amin``, ``argmax`` and ``argmin`` over one dimension or several adjacent ones (``prod``
over the last one too), as one Triton kernel that reads the input once.

The input is viewed as ``[outer, reduced, inner]``. A program owns BLOCK_I neighbouring inner
positions of one outer index and walks the reduced dimension BLOCK_R rows at a time, so every load
is a run of contiguous inner elements: memory is read in whole lines, once, and nothing is copied
or transposed first (which is what ``x.movedim(d, -1)`` followed by a row kernel would cost).
Partial results stay per lane (BLOCK_R x BLOCK_I) until the end, where one tree reduction combines
them: no cross-lane work inside the loop, and sums add in a blocked order rather than one long chain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover

OPS = {"sum": "sum", "mean": "mean", "prod": "prod", "amax": "max", "amin": "min", "max": "max", "min": "min",
       "argmax": "argmax", "argmin": "argmin", "logsumexp": "logsumexp", "softmax": "softmax",
       "log_softmax": "log_softmax"}
TARGETS = {torch.sum: "sum", torch.mean: "mean", torch.prod: "prod", torch.amax: "amax", torch.amin: "amin",
           torch.max: "max", torch.min: "min", torch.argmax: "argmax", torch.argmin: "argmin",
           torch.logsumexp: "logsumexp", torch.softmax: "softmax", F.softmax: "softmax",
           torch.log_softmax: "log_softmax", F.log_softmax: "log_softmax"}
SOFTMAX_MODULES = {nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax"}
ELEMENTWISE = ("softmax", "log_softmax")
"""Ops whose output has the input's shape: normalised along the dimension rather than reduced."""


@dataclass
class DimReduction:
    """One reduction of the task's single input over adjacent dimensions (all of them, or any run
    but the last alone)."""

    op: str
    """sum, mean, prod, max, min, argmax or argmin (amax and amin are max and min), a norm, or a
    normalisation (softmax, log_softmax, logsumexp)."""
    first: int
    """The first reduced dimension (non-negative)."""
    count: int
    """How many adjacent dimensions are reduced."""
    keepdim: bool
    out_dtype: str


def _dims(dim: Any, rank: int, last_alone: bool = False) -> tuple[int, int] | None:
    """(first, count) for adjacent dims (None: all of them), else None; the last dimension alone is
    left to the row templates, which fuse what comes before and after, unless ``last_alone``."""
    if dim is None:
        return 0, rank
    dims = sorted(d % rank for d in (dim if isinstance(dim, (tuple, list)) else [dim]) if isinstance(d, int))
    if not dims or len(dims) != (len(dim) if isinstance(dim, (tuple, list)) else 1):
        return None
    if dims != list(range(dims[0], dims[0] + len(dims))) or (dims == [rank - 1] and not last_alone):
        return None
    return dims[0], len(dims)


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> DimReduction | None:
    """The reduction if the graph is exactly one reduction of its only input over adjacent dimensions
    other than the last alone (then maybe ``[0]`` or ``.values``), else None (the row templates may
    take it)."""
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(inputs) != 1 or not isinstance(inputs[0], torch.Tensor) or not calls or len(calls) > 2:
        return None
    node = calls[0]
    norm = _norm(node)
    if norm is not None:
        return _norm_reduction(norm, node, inputs[0], len(calls), placeholders[0])
    name = TARGETS.get(node.target) if node.op == "call_function" else (
        str(node.target) if node.op == "call_method" and node.target in OPS else None)
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    if node.op == "call_module":  # a global average pool is a mean by now (``rewrite_functions``)
        module = gm.get_submodule(str(node.target))
        name, dim = SOFTMAX_MODULES.get(type(module)), getattr(module, "dim", None)
    if name is None or node.args[:1] != (placeholders[0],):
        return None
    x = inputs[0]
    keepdim = False if name in ELEMENTWISE else node.kwargs.get("keepdim", node.args[2] if len(node.args) > 2
                                                                 else False)
    # the row programs have no product: this kernel takes it over the last dimension too
    found = _dims(dim, x.dim(), last_alone=name == "prod") if x.dim() >= 1 else None
    if found is None or not isinstance(keepdim, bool) or node.kwargs.get("dtype") is not None:
        return None
    if name in ("softmax", "log_softmax", "logsumexp") and (dim is None or found[1] != 1):
        return None  # over one dimension only (a softmax over the last one is a row program)
    if name in ("max", "min") and dim is not None:
        # torch.max(x, dim) gives (values, indices): covered when only the values are used
        if len(calls) != 2 or not _takes_values(calls[1], node):
            raise CannotCover(f"`{name}` over dim {dim} with its indices used; covered: the values")
    elif len(calls) != 1:
        return None
    if name == "sum" and x.dtype in INTEGRAL:  # a count (of a mask) or a sum of integers: int64, exact
        return DimReduction(op="count", first=found[0], count=found[1], keepdim=keepdim, out_dtype="int64")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise CannotCover(f"`{name}` over dim {dim} of a {x.dtype} tensor (covered: fp32, bf16, fp16; a sum of "
                          "bools or integers)")
    op = OPS[name]
    out_dtype = "int64" if op.startswith("arg") else str(x.dtype).removeprefix("torch.")
    if op in ELEMENTWISE:
        keepdim = True
    return DimReduction(op=op, first=found[0], count=found[1], keepdim=keepdim, out_dtype=out_dtype)


NORM_FUNCTIONS = {torch.norm: "p", torch.linalg.vector_norm: "ord"}
NORM_OPS = {2.0: "norm2", 1.0: "norm1", math.inf: "normmax"}


def _norm(node: torch.fx.Node) -> tuple[Any, Any, Any] | None:
    """``(order, dim, keepdim)`` of a vector norm call (``torch.norm``, ``Tensor.norm``,
    ``torch.linalg.vector_norm``), else None. The Frobenius norm of anything is its 2-norm as a vector."""
    if node.op == "call_function" and node.target in NORM_FUNCTIONS:
        key, default = NORM_FUNCTIONS[node.target], ("fro" if node.target is torch.norm else 2)
    elif node.op == "call_method" and node.target == "norm":
        key, default = "p", "fro"
    else:
        return None
    args = node.args
    order = node.kwargs.get(key, args[1] if len(args) > 1 else default)
    dim = node.kwargs.get("dim", args[2] if len(args) > 2 else None)
    keepdim = node.kwargs.get("keepdim", args[3] if len(args) > 3 else False)
    return (2 if order == "fro" else order), dim, keepdim


def _norm_reduction(norm: tuple[Any, Any, Any], node: torch.fx.Node, x: torch.Tensor, calls: int,
                    placeholder: torch.fx.Node) -> DimReduction | None:
    order, dim, keepdim = norm
    if calls != 1 or node.args[:1] != (placeholder,) or node.kwargs.get("dtype") is not None:
        return None
    if not isinstance(order, (int, float)) or float(order) not in NORM_OPS or not isinstance(keepdim, bool):
        raise CannotCover(f"norm with p={order!r} over dim {dim} (covered: any order of a float input)")
    found = _dims(dim, x.dim()) if x.dim() >= 1 else None
    if found is None:
        return None  # one dimension, the last: the row templates take it
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise CannotCover(f"norm over dim {dim} of a {x.dtype} tensor (covered: fp32, bf16, fp16)")
    return DimReduction(op=NORM_OPS[float(order)], first=found[0], count=found[1], keepdim=keepdim,
                        out_dtype=str(x.dtype).removeprefix("torch."))


def _takes_values(node: torch.fx.Node, of: torch.fx.Node) -> bool:
    import operator

    if node.args[:1] != (of,):
        return False
    return (node.target is operator.getitem and node.args[1] == 0) or (
        node.target is getattr and node.args[1] == "values")


STRIDED_PROGRAM = """    blocks = tl.cdiv(INNER, BLOCK_I)
    inner = (tl.program_id(0) % blocks) * BLOCK_I + tl.arange(0, BLOCK_I)
    inner_ok = inner < INNER
    outer = tl.program_id(0) // blocks
    rs = tl.arange(0, BLOCK_R)
    if WIDE:
        outer = outer.to(tl.int64)
        rs = rs.to(tl.int64)
"""
"""The start of every kernel over an ``[outer, R, inner]`` view: which BLOCK_I inner positions of which
outer index this program owns (``p = o * blocks + i``), and the offsets of BLOCK_R rows, 64-bit on
inputs of 2^31 values or more."""

KERNEL = '''@triton.jit
def {name}(x_ptr, out_ptr, R, INNER, CHUNK, N_TOTAL, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
           EVEN_I: tl.constexpr, WIDE: tl.constexpr):
    # Program (p, k): inner positions [i * BLOCK_I, (i + 1) * BLOCK_I) of outer index o (p = o * blocks + i),
    # reduced over rows [k * CHUNK, (k + 1) * CHUNK) of the R between them (k is 0 and CHUNK is R unless
    # the reduction is split). Reads R x INNER elements per outer index once; writes INNER values per
    # share. The first grid axis holds every outer index: a count past 65535 still launches.
{program}    share = tl.program_id(1)
    if WIDE:
        share = share.to(tl.int64)
    base = x_ptr + outer * R * INNER
    lo = share * CHUNK
    hi = lo + tl.minimum(CHUNK, R - lo)  # no lo + CHUNK past the int32 range
{init}
    for r0 in range(lo, hi, BLOCK_R):
        r = r0 + rs
        if EVEN_I:
            mask = (r < hi)[:, None]
        else:
            mask = (r < hi)[:, None] & inner_ok[None, :]
        tile = tl.load(base + r[:, None] * INNER + inner[None, :], mask=mask, other={other}).to({computed_in})
{step}
{finish}
    at = (outer * tl.num_programs(1) + share) * INNER + inner
    tl.store(out_ptr + at, result.to(out_ptr.dtype.element_ty), mask=inner_ok)
'''

SPLIT_PARTIAL = {"count": "count", "sum": "sum", "mean": "sum", "prod": "prod", "norm1": "norm1", "norm2": "sumsq",
                 "max": "max",
                 "min": "min", "normmax": "normmax"}
"""Split reductions: what each share computes (partials the combine can add or compare)."""
SPLIT_COMBINE = {"count": "count", "sum": "sum", "mean": "mean", "prod": "prod", "norm1": "sum", "norm2": "sqrtsum",
                 "max": "max",
                 "min": "min", "normmax": "max"}
"""And how the combine kernel reduces the shares' partials into the result."""
SPLIT_MIN_VALUES = 1 << 15
"""Reductions at least this long, with too few outputs to fill the GPU, are split across programs."""


INTEGRAL = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
"""Inputs whose sum torch takes in int64 (:data:`PARTS` ``count``)."""

PARTS = {
    # a sum of bools or integers in int64, exact at any length, as torch gives it
    "count": ("    acc = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.int64)", "0",
              "        acc += tile",
              "    result = tl.sum(acc, axis=0)"),
    "sum": ("    acc = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.float32)", "0.0",
            "        acc += tile",
            "    result = tl.sum(acc, axis=0)"),
    # lanes multiply in fp32 (as eager does), then one tree combines them; masked values read 1
    "prod": ("    acc = tl.full((BLOCK_R, BLOCK_I), 1.0, dtype=tl.float32)", "1.0",
             "        acc *= tile",
             "    result = tl.reduce(acc, 0, product_of)"),
    "max": ("    acc = tl.full((BLOCK_R, BLOCK_I), float(\"-inf\"), dtype=tl.float32)", "float(\"-inf\")",
            "        acc = tl.where((tile > acc) | (tile != tile), tile, acc)  # NaN sticks, as in torch",
            "    nan = tl.max((acc != acc).to(tl.int32), axis=0) > 0\n"
            "    result = tl.where(nan, float(\"nan\"), tl.max(acc, axis=0))"),
    "argmax": ("    best = tl.full((BLOCK_R, BLOCK_I), float(\"-inf\"), dtype=tl.float32)\n"
               "    at = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.int64)", "float(\"-inf\")",
               "        # strictly better only: a lane keeps its first row of the best value; NaN wins, as in torch\n"
               "        take = (tile > best) | ((tile != tile) & (best == best))\n"
               "        best = tl.where(take, tile, best)\n"
               "        at = tl.where(take, r[:, None].to(tl.int64) + tl.zeros_like(at), at)",
               "    nan_lane = best != best\n"
               "    nan = tl.max(nan_lane.to(tl.int32), axis=0) > 0\n"
               "    top = tl.max(tl.where(nan_lane, float(\"-inf\"), best), axis=0)\n"
               "    winner = tl.where(nan[None, :], nan_lane, best == top[None, :])\n"
               "    # the first row among the lanes holding the best value\n"
               "    result = tl.min(tl.where(winner, at, R), axis=0)"),
}

PRODUCT_OF = '''@triton.jit
def product_of(a, b):
    # Triton has no tl.prod: the combine function of tl.reduce for a product
    return a * b'''


NORMALISE = '''@triton.jit
def dim_reduce_kernel(x_ptr, out_ptr, R, INNER, CHUNK, N_TOTAL, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
                      EVEN_I: tl.constexpr, WIDE: tl.constexpr):
    # (CHUNK and N_TOTAL are R: a normalisation is never split.)
    # {what} along a dimension other than the last: program p owns BLOCK_I inner positions of outer
    # index o (p = o * blocks + i) and walks the R values of each in place: a pass for the maximum, a
    # pass for the sum of exp(x - max){write_note}. An infinite maximum counts as 0, as in torch.
{program}    base = x_ptr + outer * R * INNER
    top = tl.full((BLOCK_R, BLOCK_I), float("-inf"), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + rs
        mask = (r < R)[:, None] & inner_ok[None, :]
        tile = tl.load(base + r[:, None] * INNER + inner[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        top = tl.maximum(top, tile, propagate_nan=tl.PropagateNan.ALL)
    m = tl.max(top, axis=0)
    m = tl.where(tl.abs(m) == float("inf"), 0.0, m)
    total = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + rs
        mask = (r < R)[:, None] & inner_ok[None, :]
        tile = tl.load(base + r[:, None] * INNER + inner[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        total += tl.exp(tile - m[None, :])
    s = tl.sum(total, axis=0)
{finish}'''

NORMALISE_FINISH = {
    "logsumexp": "    result = tl.log(s) + m\n{round}"
                 "    tl.store(out_ptr + outer * INNER + inner, result.to(out_ptr.dtype.element_ty), mask=inner_ok)\n",
    "softmax": """    out_base = out_ptr + outer * R * INNER
    for r0 in range(0, R, BLOCK_R):
        r = r0 + rs
        mask = (r < R)[:, None] & inner_ok[None, :]
        tile = tl.load(base + r[:, None] * INNER + inner[None, :], mask=mask, other=0.0).to(tl.float32)
        result = {value}
{round}        tl.store(out_base + r[:, None] * INNER + inner[None, :], result.to(out_ptr.dtype.element_ty), mask=mask)
""",
}


def _normalise(reduction: DimReduction) -> str:
    op = reduction.op
    bf16 = reduction.out_dtype == "bfloat16"
    if op == "logsumexp":
        finish = NORMALISE_FINISH["logsumexp"].format(round="    result = round_to_bf16(result)\n" if bf16 else "")
        note = ""
    else:
        value = "tl.exp(tile - m[None, :]) / s[None, :]" if op == "softmax" else \
            "(tile - m[None, :]) - tl.log(s)[None, :]"
        finish = NORMALISE_FINISH["softmax"].format(value=value, round="        result = round_to_bf16(result)\n"
                                                    if bf16 else "")
        note = ", and a pass that writes the normalised values"
    what = {"logsumexp": "log-sum-exp", "softmax": "softmax", "log_softmax": "log-softmax"}[op]
    return NORMALISE.format(what=what[0].upper() + what[1:], write_note=note, finish=finish, program=STRIDED_PROGRAM)


def _parts(op: str) -> tuple[str, str, str, str]:
    if op in ("sumsq", "sqrtsum"):
        init, other, step, finish = PARTS["sum"]
        if op == "sumsq":
            return init, other, "        acc += tile * tile", finish
        return init, other, step, "    result = tl.sqrt(tl.sum(acc, axis=0))"
    if op in ("norm2", "norm1"):
        init, other, step, finish = PARTS["sum"]
        if op == "norm2":
            return init, other, "        acc += tile * tile", "    result = tl.sqrt(tl.sum(acc, axis=0))"
        return init, other, "        acc += tl.abs(tile)", finish
    if op == "normmax":
        _, _, step, finish = PARTS["max"]
        init = PARTS["sum"][0]  # |x| >= 0: start from 0, and masked lanes read 0, not -inf
        return init, "0.0", step.replace("tile > acc", "tl.abs(tile) > acc").replace(
            "tl.where((tl.abs(tile) > acc) | (tile != tile), tile, acc)",
            "tl.where((tl.abs(tile) > acc) | (tile != tile), tl.abs(tile), acc)"), finish
    if op == "mean":
        init, other, step, finish = PARTS["sum"]
        return init, other, step, finish.replace("result = ", "result = divide_by_count(") + ", N_TOTAL)"
    if op in ("min", "argmin"):
        # the mirror image of max: compare the other way, start from +inf
        init, other, step, finish = PARTS[op.replace("min", "max")]
        swap = {"-inf": "inf", "tile > acc": "tile < acc", "tile > best": "tile < best", "tl.max(acc": "tl.min(acc",
                "tl.where(nan_lane, float(\"-inf\")": "tl.where(nan_lane, float(\"inf\")",
                "top = tl.max(": "top = tl.min("}
        for old, new in swap.items():
            init, other, step, finish = (s.replace(old, new) for s in (init, other, step, finish))
        return init, other, step, finish
    return PARTS[op]


def _reduce_kernel(op: str, name: str, bf16: bool) -> str:
    init, other, step, finish = _parts(op)
    if bf16 and op in ("sum", "mean", "prod", "norm2", "norm1", "sqrtsum"):
        finish += "\n    result = round_to_bf16(result)"
    return KERNEL.format(name=name, program=STRIDED_PROGRAM, init=init, other=other, step=step, finish=finish,
                         computed_in="tl.int64" if op == "count" else "tl.float32")


def split(reduction: DimReduction, params: dict[str, Any]) -> int:
    """How many shares each output's reduction is split into (1: not split)."""
    return int(params.get("SPLIT", 1)) if reduction.op in SPLIT_PARTIAL else 1


def kernel(reduction: DimReduction, params: dict[str, Any] | None = None) -> str:
    if reduction.op in ("logsumexp", *ELEMENTWISE):
        return _normalise(reduction)
    bf16 = reduction.out_dtype == "bfloat16"
    helper = PRODUCT_OF + "\n\n" if reduction.op == "prod" else ""
    if split(reduction, params or {}) == 1:
        return helper + _reduce_kernel(reduction.op, "dim_reduce_kernel", bf16)
    return (helper + _reduce_kernel(SPLIT_PARTIAL[reduction.op], "dim_reduce_kernel", False) + "\n\n"
            + _reduce_kernel(SPLIT_COMBINE[reduction.op], "dim_combine_kernel", bf16))


def _partial_dtype(reduction: DimReduction) -> str:
    """The dtype of a split reduction's partials: counts stay integers."""
    return "int64" if reduction.op == "count" else "float32"


def forward(reduction: DimReduction, name: str, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the [outer, reduced, inner] view, the output's shape, the launch."""
    first, last = reduction.first, reduction.first + reduction.count
    kept = f"(*{name}.shape[:{first}], {', '.join(['1'] * reduction.count)}, *{name}.shape[{last}:])" \
        if reduction.keepdim else f"(*{name}.shape[:{first}], *{name}.shape[{last}:])"
    if reduction.op in ELEMENTWISE:
        kept = f"{name}.shape"
    body = [f"{name} = {name}.contiguous()",
            f"outer = {name}.shape[:{first}].numel()",
            f"reduced = {name}.shape[{first}:{last}].numel()",
            f"inner = {name}.shape[{last}:].numel()",
            f"out = torch.empty({kept}, dtype=torch.{reduction.out_dtype}, device={name}.device)",
            f"BLOCK_R, BLOCK_I = {params['BLOCK_R']}, {params['BLOCK_I']}",
            "if out.numel() and reduced:"]
    shares = split(reduction, params)
    if shares == 1:
        body += ["    dim_reduce_kernel[(ceil_div(inner, BLOCK_I) * outer,)](",
                 f"        {name}, out, reduced, inner, reduced, reduced, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I,",
                 f"        EVEN_I=inner % BLOCK_I == 0, WIDE={name}.numel() >= 2**31, num_warps={params['num_warps']})"]
    else:
        body += [f"    # Too few outputs to fill the GPU: each reduction split into {shares} shares, each share's",
                 "    # partial written to a small workspace, then combined by a second kernel.",
                 f"    chunk = ceil_div(ceil_div(reduced, {shares}), BLOCK_R) * BLOCK_R",
                 "    shares = ceil_div(reduced, chunk)",
                 f"    ws = torch.empty((outer, shares, inner), dtype=torch.{_partial_dtype(reduction)}, "
                 f"device={name}.device)",
                 "    dim_reduce_kernel[(ceil_div(inner, BLOCK_I) * outer, shares)](",
                 f"        {name}, ws, reduced, inner, chunk, reduced, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I,",
                 f"        EVEN_I=inner % BLOCK_I == 0, WIDE={name}.numel() >= 2**31, num_warps={params['num_warps']})",
                 "    COMBINE_R = min(next_power_of_2(shares), max(1, 4096 // BLOCK_I))",
                 "    dim_combine_kernel[(ceil_div(inner, BLOCK_I) * outer,)](",
                 "        ws, out, shares, inner, shares, reduced, BLOCK_R=COMBINE_R, BLOCK_I=BLOCK_I,",
                 "        EVEN_I=inner % BLOCK_I == 0, WIDE=ws.numel() >= 2**31, num_warps=4)"]
    body += _nothing_reduced(reduction.op)
    body.append("return out")
    return f"def forward(self, {name}):\n" + "\n".join("    " + line for line in body) + "\n"


EMPTY = {"count": "0", "sum": "0", "norm1": "0", "norm2": "0", "normmax": "0", "mean": "float('nan')", "prod": "1",
         "logsumexp": "float('-inf')"}
"""What a reduction over no values gives, as torch gives it; the others (max, argmax, ...) raise."""


def _nothing_reduced(op: str) -> list[str]:
    """Outputs over reduced dimensions of size 0: torch's value for an empty reduction, or its error."""
    if op in ELEMENTWISE:
        return []  # (no values in, none out)
    if op in EMPTY:
        return ["elif out.numel():", f"    out.fill_({EMPTY[op]})"]
    return ["elif out.numel():", f"    raise RuntimeError('{op} of a dimension of size 0: no identity to give')"]


def seeds(reduction: DimReduction, inner: int, outputs: int = 0, reduced: int = 0,
          sms: int = 132, element_bytes: int = 4) -> list[tuple[dict[str, Any], str]]:
    """Tiles that keep 16 to 32 fp32 partials per thread; wide inner runs first where the inner size
    allows (whole 512-byte lines per row of the tile). With nothing inside the reduced dimensions,
    the reduced values are contiguous: a column of BLOCK_R of them per step. Long reductions with
    too few outputs to give every SM a few programs are split first (``outputs``, ``reduced``:
    the plan's sizes).

    Where a reduced row of ``inner`` values is not a whole number of 16-byte words, no load can be
    wider than one value, and the tile with the most loads in flight comes first: on an H100, a mean
    over dim 1 of [128, 4096, 4095] fp32 took 3.73 ms in 8 x 256 tiles with 4 warps, 3.03 ms in 32 x
    128 with 8 (eager 2.88); at [128, 4096, 4096] the 8 x 256 tiles took 2.70 ms (eager 2.74). Not
    for argmax and argmin, whose (value, index) pairs per thread double the registers: there the 32 x
    128 tiles took 6.17 ms against eager's 3.23 on the same shape."""
    out = _tile_seeds(inner)
    if inner > 1 and (inner * element_bytes) % 16 and inner >= 128 and reduction.op not in ("argmax", "argmin"):
        out.insert(0, ({"BLOCK_R": 32, "BLOCK_I": 128, "num_warps": 8},
                       "seed: 32 reduced rows x 128 inner positions per step (rows not 16-byte aligned: "
                       "one-value loads, as many in flight as fit)"))
    programs = max(1, (outputs // max(inner, 1)) * -(-inner // out[0][0]["BLOCK_I"])) if out else 1
    if reduction.op in SPLIT_PARTIAL and reduced >= SPLIT_MIN_VALUES and programs < 2 * sms:
        shares = min(1024, 1 << max(1, (4 * sms // programs) - 1).bit_length())
        out = [(dict(params, SPLIT=shares), why.replace("seed:", f"seed: split {shares} ways,", 1))
               for params, why in out[:2]] + out
    return out


def _tile_seeds(inner: int) -> list[tuple[dict[str, Any], str]]:
    if inner == 1:
        return [({"BLOCK_R": block, "BLOCK_I": 1, "num_warps": warps},
                 f"seed: {block} contiguous values per step") for block, warps in ((2048, 4), (4096, 8), (1024, 4))]
    out = []
    for block_r, block_i, warps in ((8, 256, 4), (32, 64, 4), (16, 128, 8), (4, 512, 8)):
        if block_i > 2 * max(inner, 16) and block_i > 64:
            continue
        out.append(({"BLOCK_R": block_r, "BLOCK_I": block_i, "num_warps": warps},
                    f"seed: {block_r} reduced rows x {block_i} inner positions per step"))
    return out
