"""Max and average pooling (``nn.MaxPool1d/2d/3d``, ``nn.AvgPool1d/2d/3d`` and their functional
forms), with the pointwise ops after them fused into the epilogue.

Each program computes a block of output positions of one (image, channel) plane; the window's taps
are unrolled at compile time, and neighbouring outputs share most of their input lines, which stay
in L1. The input is read from memory about once and the output written once. As with the
convolutions (:mod:`conv`), every pooling is treated as 3-D.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.conv import FINISH
from kernelevo.agent.builtin.conv_direct import PLANE_PIXELS, WINDOW_TAP
from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.shape_reads import same_call_at_full_size
from kernelevo.agent.builtin.tile_epilogue import chain_after, epilogue_arguments, epilogue_lines, epilogue_program
from kernelevo.agent.builtin.vocabulary import graph_calls

MODULES = {nn.MaxPool1d: ("max", 1), nn.MaxPool2d: ("max", 2), nn.MaxPool3d: ("max", 3),
           nn.AvgPool1d: ("avg", 1), nn.AvgPool2d: ("avg", 2), nn.AvgPool3d: ("avg", 3)}
FUNCTIONS = {F.max_pool1d: ("max", 1), F.max_pool2d: ("max", 2), F.max_pool3d: ("max", 3),
             F.avg_pool1d: ("avg", 1), F.avg_pool2d: ("avg", 2), F.avg_pool3d: ("avg", 3)}
ARGUMENTS = {"max": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
             "avg": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")}


@dataclass
class Pool:
    op: str
    """max or avg."""
    dims: int
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]
    count_include_pad: bool
    epilogue: Program | None
    out_dtype: str
    input: str
    inputs: list[str]
    module: str | None = None
    """The pooling module's name (its window is read from it at run time), None for a function call."""
    ceil_mode: bool = False
    """Output sizes rounded up: a last window may hang past the input (its taps there are skipped, and
    an average divides by the part inside the input and padding), but starts inside them."""


def _three(value: Any, dims: int, fill: int) -> tuple[int, int, int]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
    if len(values) != dims or not all(isinstance(v, int) for v in values):
        raise CannotCover(f"a pooling argument {value!r} that is not {dims} integers")
    return (fill,) * (3 - dims) + values  # type: ignore[return-value]


def _settings(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[str, int, dict[str, Any]] | None:
    if node.op == "call_module":
        sub = gm.get_submodule(str(node.target))
        found = MODULES.get(type(sub))
        if found is None:
            return None
        return found[0], found[1], {name: getattr(sub, name, None) for name in ARGUMENTS[found[0]]}
    if node.op == "call_function" and node.target in FUNCTIONS:
        op, dims = FUNCTIONS[node.target]
        settings = dict(zip(ARGUMENTS[op], node.args[1:], strict=False))
        settings.update(node.kwargs)
        return op, dims, settings
    return None


def recognise(gm: torch.fx.GraphModule, inputs: list[Any], full: torch.nn.Module | None = None) -> Pool | None:
    """The pooling plan if the graph starts with a pooling of an input, else None (``full``: the
    model at the size being optimised, to check a pooling function's constant arguments)."""
    calls, placeholders = graph_calls(gm)
    found = _settings(gm, calls[0]) if calls else None
    if found is None:
        return None
    op, dims, settings = found
    node = calls[0]
    if node.args[0] not in placeholders:
        raise CannotCover("a pooling whose input is computed (covered: a pooling of an input)")
    x = inputs[placeholders.index(node.args[0])]
    if not isinstance(x, torch.Tensor) or x.dim() != dims + 2:
        raise CannotCover(f"a {dims}-D pooling on an input without a batch dimension is not covered")
    if node.op == "call_function":
        same_call_at_full_size(node, full, "pooling")
    if settings.get("return_indices") or settings.get("divisor_override"):
        raise CannotCover("pooling with return_indices or divisor_override is not covered")
    kernel = _three(settings["kernel_size"], dims, 1)
    stride_arg = settings.get("stride")
    stride = kernel if stride_arg in (None, [], ()) else _three(stride_arg, dims, 1)
    padding = _three(settings.get("padding") or 0, dims, 0)
    dilation = _three(settings.get("dilation") or 1, dims, 1)
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    chain = chain_after(gm, node, output)
    epilogue = epilogue_program(gm, node, chain, inputs, placeholders, "pooling")
    last = chain[-1] if chain else node
    if tuple(last.meta["tensor_meta"].shape) != tuple(node.meta["tensor_meta"].shape):
        raise CannotCover("the ops after the pooling change its shape (covered: pointwise ops)")
    include = settings.get("count_include_pad")
    return Pool(op=op, dims=dims, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                count_include_pad=True if include is None else bool(include), epilogue=epilogue,
                out_dtype=str(last.meta["tensor_meta"].dtype).removeprefix("torch."), input=node.args[0].name,
                inputs=[p.name for p in placeholders],
                module=str(node.target) if node.op == "call_module" else None,
                ceil_mode=bool(settings.get("ceil_mode")))


KERNEL = '''@triton.jit
def pool_kernel(x_ptr, b_ptr, {params}out_ptr, BATCH, C, D, H, W, OD, OH, OW,
                KT: tl.constexpr, KR: tl.constexpr, KS: tl.constexpr, ST: tl.constexpr, SR: tl.constexpr,
                SS: tl.constexpr, PT: tl.constexpr, PR: tl.constexpr, PS: tl.constexpr, DT: tl.constexpr,
                DR: tl.constexpr, DS: tl.constexpr, MAX: tl.constexpr, COUNT_PAD: tl.constexpr,
                HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr):
    # Program p: BLOCK_M output positions of one (image, channel) plane, the window's taps unrolled.
    K_OUT = C
''' + PLANE_PIXELS + '''\
    x_base = plane.to(tl.int64) * D * H * W
    if MAX:
        total = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    else:
        total = tl.zeros((BLOCK_M,), dtype=tl.float32)
    count = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for t in tl.static_range(KT):
        for r in tl.static_range(KR):
            for s in tl.static_range(KS):
''' + WINDOW_TAP + '''\
                if MAX:
                    value = tl.load(x_ptr + x_base + (di * H + hi) * W + wi, mask=ok, other=float("-inf"))
                    value = value.to(tl.float32)
                    total = tl.where((value > total) | (value != value), value, total)  # NaN sticks, as in torch
                else:
                    value = tl.load(x_ptr + x_base + (di * H + hi) * W + wi, mask=ok, other=0.0)
                    total += value.to(tl.float32)
                    count += ok.to(tl.float32)
    if MAX:
        acc = total[:, None]
    elif COUNT_PAD:
        # padding counts, the part of the window past the padding does not (as torch counts)
        d_end = tl.minimum(od * ST - PT + KT, D + PT) - (od * ST - PT)
        h_end = tl.minimum(oh * SR - PR + KR, H + PR) - (oh * SR - PR)
        w_end = tl.minimum(ow * SS - PS + KS, W + PS) - (ow * SS - PS)
        acc = tl.math.div_rn(total, (d_end * h_end * w_end).to(tl.float32))[:, None]
    else:
        acc = tl.math.div_rn(total, tl.maximum(count, 1.0))[:, None]  # rounded once, as torch divides
{finish}'''


def kernel(pool: Pool) -> str:
    params, lines, result = epilogue_lines(pool.epilogue, pool.out_dtype)
    finish = FINISH.format(epilogue="\n".join("    " + line for line in lines) or "    pass", result=result)
    return KERNEL.format(params=params, finish=finish)


GEOMETRY = '''def pool_geometry(pool, dims):
    """A pooling module's window as 3-D (missing leading dims are 1, or 0 for padding): kernel,
    stride, padding and dilation, read from the module at run time."""
    def three(value, fill):
        value = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
        return (fill,) * (3 - dims) + tuple(int(v) for v in value)

    kernel = three(pool.kernel_size, 1)
    stride = kernel if pool.stride in (None, [], ()) else three(pool.stride, 1)
    return kernel, stride, three(pool.padding, 0), three(getattr(pool, "dilation", 1), 1)


'''


def forward(pool: Pool, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the window (from the module at run time, or the call's constants), the
    output's size from the pooling's arithmetic, one launch."""
    x = pool.input
    sizes = ["1"] * (3 - pool.dims) + [f"{x}.shape[{2 + i}]" for i in range(pool.dims)]
    body = [f"{x} = {x}.contiguous()", f"d, h, w = {', '.join(sizes)}"]
    if pool.module is not None:
        body.append(f"(kt, kr, ks), (st, sr, ss), (pt, pr, ps), (dt, dr, ds) = pool_geometry(self.{pool.module}, "
                    f"{pool.dims})")
    else:
        k, s, p, dl = pool.kernel, pool.stride, pool.padding, pool.dilation
        body += [f"kt, kr, ks = {k[0]}, {k[1]}, {k[2]}", f"st, sr, ss = {s[0]}, {s[1]}, {s[2]}",
                 f"pt, pr, ps = {p[0]}, {p[1]}, {p[2]}", f"dt, dr, ds = {dl[0]}, {dl[1]}, {dl[2]}"]
    for axis, size, k, s, p, dl in (("od", "d", "kt", "st", "pt", "dt"), ("oh", "h", "kr", "sr", "pr", "dr"),
                                    ("ow", "w", "ks", "ss", "ps", "ds")):
        if pool.ceil_mode:  # rounded up, then the last window dropped if it would start past the padding
            body.append(f"{axis} = -(-({size} + 2 * {p} - {dl} * ({k} - 1) - 1) // {s}) + 1")
            body.append(f"{axis} -= int(({axis} - 1) * {s} >= {size} + {p})")
        else:
            body.append(f"{axis} = ({size} + 2 * {p} - {dl} * ({k} - 1) - 1) // {s} + 1")
    body.append(f"out = torch.empty(({x}.shape[0], {x}.shape[1], {', '.join(('od', 'oh', 'ow')[3 - pool.dims:])}), "
                f"dtype=torch.{pool.out_dtype}, device={x}.device)")
    lines, extra = epilogue_arguments(pool.epilogue)
    body += lines
    body += ["if out.numel():",
             f"    pool_kernel[({x}.shape[0] * {x}.shape[1] * ceil_div(od * oh * ow, {params['BLOCK_M']}),)](",
             f"        {x}, {x}, {extra}out, {x}.shape[0], {x}.shape[1], d, h, w, od, oh, ow,",
             "        KT=kt, KR=kr, KS=ks, ST=st, SR=sr, SS=ss, PT=pt, PR=pr, PS=ps, DT=dt, DR=dr, DS=ds,",
             f"        MAX={pool.op == 'max'}, COUNT_PAD={pool.count_include_pad},",
             f"        HAS_BIAS=False, BLOCK_M={params['BLOCK_M']}, num_warps={params['num_warps']})",
             "return out"]
    return f"def forward(self, {', '.join(pool.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK_M": block, "num_warps": warps}, f"seed: {block} output positions per program")
            for block, warps in ((256, 4), (512, 4), (1024, 8))]


def describe(pool: Pool) -> str:
    epilogue = f" + {', '.join(pool.epilogue.ops)}" if pool.epilogue is not None else ""
    kernel = "x".join(str(k) for k in pool.kernel[3 - pool.dims:])
    return (f"{'Max' if pool.op == 'max' else 'Avg'}Pool{pool.dims}d, window {kernel}, stride "
            f"{pool.stride[3 - pool.dims:]}, padding {pool.padding[3 - pool.dims:]}{epilogue}")
