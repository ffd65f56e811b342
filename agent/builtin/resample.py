"""Resampling: upsampling and downsampling by ``F.interpolate`` / ``nn.Upsample`` (nearest,
nearest-exact, linear, bilinear, trilinear, corners aligned or not), and ``pixel_shuffle`` /
``pixel_unshuffle``, with the pointwise ops after them fused into the epilogue.

Every output value is a few input values picked by its coordinates: one for nearest and the pixel
shuffles, two per interpolated dimension for the linear modes. Each program computes a block of output
positions of one (image, channel) plane, as the pooling kernel does (``pool.py``); neighbouring outputs
read neighbouring inputs, which stay in L1, so the input is read from memory about once and the output
written once. Source coordinates follow torch's CUDA arithmetic (fp32, the same scale: ``1 / scale_factor``
where a factor is given and not recomputed, else ``in / out`` divided exactly, ``(in - 1) / (out - 1)``
with corners aligned), so an output picks the input torch picks on a GPU. (Torch's CPU kernels take a
shortcut or two, nearest at equal sizes and at twice the size, that agree with it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin.conv import FINISH
from kernelevo.agent.builtin.conv_direct import PLANE_PIXELS
from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.shape_reads import same_call_at_full_size
from kernelevo.agent.builtin.tile_epilogue import chain_after, epilogue_arguments, epilogue_lines, epilogue_program
from kernelevo.agent.builtin.vocabulary import graph_calls

MODES = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2, "shuffle": 3, "unshuffle": 4}
"""The kernel's MODE for each way of resampling."""
LINEAR_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}
INTERPOLATE = (F.interpolate, F.upsample)
SHUFFLES = {F.pixel_shuffle: "shuffle", F.pixel_unshuffle: "unshuffle"}
SHUFFLE_MODULES = {nn.PixelShuffle: ("shuffle", "upscale_factor"), nn.PixelUnshuffle: ("unshuffle", "downscale_factor")}


@dataclass
class Resample:
    mode: str
    """nearest, nearest-exact, linear (any of 1-3 dims), shuffle or unshuffle."""
    dims: int
    """Spatial dimensions (1-3; 2 for the pixel shuffles)."""
    epilogue: Program | None
    out_dtype: str
    input: str
    inputs: list[str]
    align_corners: bool = False
    size: tuple[int, ...] | None = None
    """The output's spatial size where the call gives it; else it follows from ``scale``."""
    scale: tuple[float, ...] | None = None
    """The call's scale factor per dim (None where a size is given)."""
    recompute: bool = False
    """``recompute_scale_factor``: coordinates scaled by ``in / out``, not by ``1 / scale``."""
    ratio: int = 1
    """The pixel shuffles' factor."""
    module: str | None = None
    """The module's name (its factors are read from it at run time), None for a function call."""


def _per_dim(value: Any, dims: int, what: str) -> tuple[Any, ...] | None:
    if value is None:
        return None
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
    if len(values) != dims or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                      for v in values):
        raise CannotCover(f"a resampling {what} {value!r} that is not {dims} positive numbers")
    return values


def _interpolation(gm: torch.fx.GraphModule, node: torch.fx.Node) -> dict[str, Any] | None:
    """The settings of an ``interpolate``/``upsample`` call or an ``nn.Upsample`` module, else None."""
    if node.op == "call_module":
        sub = gm.get_submodule(str(node.target))
        if not isinstance(sub, nn.Upsample):
            return None
        return {"size": sub.size, "scale_factor": sub.scale_factor, "mode": sub.mode,
                "align_corners": sub.align_corners, "recompute_scale_factor": sub.recompute_scale_factor,
                "module": str(node.target)}
    if node.op == "call_function" and node.target in INTERPOLATE:
        names = ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias")
        settings = dict(zip(names, node.args[1:], strict=False))
        settings.update(node.kwargs)
        return settings
    if node.op == "call_function" and node.target in (F.upsample_nearest, F.upsample_bilinear):
        settings = dict(zip(("size", "scale_factor"), node.args[1:], strict=False))
        settings.update(node.kwargs)
        bilinear = node.target is F.upsample_bilinear
        return {**settings, "mode": "bilinear" if bilinear else "nearest", "align_corners": bilinear or None}
    return None


def _shuffle(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple[str, Any, str | None] | None:
    if node.op == "call_module":
        found = SHUFFLE_MODULES.get(type(gm.get_submodule(str(node.target))))
        if found is None:
            return None
        return found[0], getattr(gm.get_submodule(str(node.target)), found[1]), str(node.target)
    if node.op == "call_function" and node.target in SHUFFLES:
        factor = node.kwargs.get("upscale_factor", node.kwargs.get("downscale_factor",
                                                                   node.args[1] if len(node.args) > 1 else None))
        return SHUFFLES[node.target], factor, None
    return None


def _interpolate_plan(settings: dict[str, Any], x: torch.Tensor) -> dict[str, Any]:
    mode = settings.get("mode") or "nearest"
    dims = x.dim() - 2
    if mode not in MODES or mode in ("shuffle", "unshuffle"):
        raise CannotCover(f"interpolation mode {mode!r} (covered: nearest, nearest-exact, linear, bilinear, "
                          "trilinear)")
    if mode in LINEAR_DIMS and LINEAR_DIMS[mode] != dims:
        raise CannotCover(f"{mode} interpolation of a {x.dim()}-D input")
    if not 1 <= dims <= 3 or settings.get("antialias"):
        raise CannotCover("resampling of other than 1-3 spatial dims with a batch and channels, or with antialias")
    size, scale = _per_dim(settings.get("size"), dims, "size"), _per_dim(settings.get("scale_factor"), dims, "scale")
    if (size is None) == (scale is None):
        raise CannotCover("an interpolation with both or neither of size and scale_factor")
    if size is not None and not all(isinstance(s, int) for s in size):
        raise CannotCover(f"an interpolation to a size {settings.get('size')!r} that is not integers")
    return {"mode": "linear" if mode in LINEAR_DIMS else mode, "dims": dims, "size": size,
            "scale": None if scale is None else tuple(float(s) for s in scale),
            "align_corners": bool(settings.get("align_corners")) and mode in LINEAR_DIMS,
            "recompute": bool(settings.get("recompute_scale_factor")), "module": settings.get("module")}


def recognise(gm: torch.fx.GraphModule, inputs: list[Any], full: torch.nn.Module | None = None) -> Resample | None:
    """The plan if the graph starts with a resampling of an input, else None (``full``: the model at the
    size being optimised, to check a function's constant arguments)."""
    calls, placeholders = graph_calls(gm)
    if not calls:
        return None
    node = calls[0]
    interpolation, shuffle = _interpolation(gm, node), _shuffle(gm, node)
    if interpolation is None and shuffle is None:
        return None
    if node.args[0] not in placeholders:
        raise CannotCover("a resampling whose input is computed (covered: a resampling of an input)")
    x = inputs[placeholders.index(node.args[0])]
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise CannotCover(f"resampling of a {getattr(x, 'dtype', type(x))} input (covered: fp32, bf16, fp16)")
    same_call_at_full_size(node, full, "resampling")
    if shuffle is not None:
        mode, factor, module = shuffle
        if x.dim() != 4 or not isinstance(factor, int) or factor < 1:
            raise CannotCover(f"pixel {mode} of a {x.dim()}-D input by {factor!r} (covered: [N, C, H, W], an integer)")
        settings: dict[str, Any] = {"mode": mode, "dims": 2, "ratio": factor, "module": module}
    else:
        settings = _interpolate_plan(interpolation, x)
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    chain = chain_after(gm, node, output)
    epilogue = epilogue_program(gm, node, chain, inputs, placeholders, "resampling")
    last = chain[-1] if chain else node
    if tuple(last.meta["tensor_meta"].shape) != tuple(node.meta["tensor_meta"].shape):
        raise CannotCover("the ops after the resampling change its shape (covered: pointwise ops)")
    return Resample(epilogue=epilogue, out_dtype=str(last.meta["tensor_meta"].dtype).removeprefix("torch."),
                    input=node.args[0].name, inputs=[p.name for p in placeholders], **settings)


HELPERS = '''@triton.jit
def resample_scale(size, out_size, given, GIVEN: tl.constexpr, ALIGN: tl.constexpr):
    # torch's scale from output to input coordinates, in fp32: (in - 1) / (out - 1) with corners
    # aligned, 1 / scale_factor where a factor is given (rounded to fp32 on the host), else in / out,
    # each divided exactly (div_rn), as torch's float division is
    if ALIGN:
        scale = tl.where(out_size > 1, tl.math.div_rn((size - 1).to(tl.float32),
                                                      tl.maximum(out_size - 1, 1).to(tl.float32)), 0.0)
    elif GIVEN:
        scale = given + 0.0
    else:
        scale = tl.math.div_rn(size.to(tl.float32), out_size.to(tl.float32))
    return scale


@triton.jit
def resample_source(o, scale, size, MODE: tl.constexpr, ALIGN: tl.constexpr):
    # The input coordinates an output coordinate reads (i0, i1) and the weight of i1: nearest picks
    # floor(o * scale) (nearest-exact: floor((o + 0.5) * scale)); linear reads i0 = floor(src) and its
    # next neighbour, src = o * scale with corners aligned, else (o + 0.5) * scale - 0.5 clamped at 0.
    of = o.to(tl.float32)
    if MODE == 0:
        i0 = tl.minimum((of * scale).to(tl.int32), size - 1)
        i1 = i0
        weight = of * 0.0
    elif MODE == 1:
        i0 = tl.minimum(((of + 0.5) * scale).to(tl.int32), size - 1)
        i1 = i0
        weight = of * 0.0
    else:
        if ALIGN:
            src = of * scale
        else:
            src = tl.maximum((of + 0.5) * scale - 0.5, 0.0)
        i0 = src.to(tl.int32)  # src >= 0: truncation is the floor
        i1 = tl.minimum(i0 + 1, size - 1)
        weight = src - i0.to(tl.float32)
    return i0, i1, weight


'''

KERNEL = '''@triton.jit
def resample_kernel(x_ptr, b_ptr, {params}out_ptr, BATCH, C, D, H, W, OD, OH, OW, C_IN,
                    GD, GH, GW, MODE: tl.constexpr, ALIGN: tl.constexpr, GIVEN: tl.constexpr,
                    TAPS_D: tl.constexpr, TAPS_H: tl.constexpr, TAPS_W: tl.constexpr, RATIO: tl.constexpr,
                    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr):
    # Program p: BLOCK_M output positions of one (image, channel) plane; each reads the one input
    # value (nearest, shuffles) or the 2, 4 or 8 neighbours (linear) its coordinates pick.
    K_OUT = C
''' + PLANE_PIXELS + '''\
    if MODE == 3:
        # pixel shuffle: output (c, h, w) is input channel c * r^2 + (h % r) * r + w % r at (h // r, w // r)
        ic = kout * RATIO * RATIO + (oh % RATIO) * RATIO + ow % RATIO
        at = (n.to(tl.int64) * C_IN + ic) * H * W + (oh // RATIO) * W + ow // RATIO
        total = tl.load(x_ptr + at, mask=row_ok, other=0.0).to(tl.float32)
    elif MODE == 4:
        # pixel unshuffle: output channel c * r^2 + i * r + j at (h, w) is input c at (h * r + i, w * r + j)
        ic = kout // (RATIO * RATIO)
        hi = oh * RATIO + (kout // RATIO) % RATIO
        wi = ow * RATIO + kout % RATIO
        at = (n.to(tl.int64) * C_IN + ic) * H * W + hi * W + wi
        total = tl.load(x_ptr + at, mask=row_ok, other=0.0).to(tl.float32)
    else:
        d0, d1, ld = resample_source(od, resample_scale(D, OD, GD, GIVEN, ALIGN), D, MODE, ALIGN)
        h0, h1, lh = resample_source(oh, resample_scale(H, OH, GH, GIVEN, ALIGN), H, MODE, ALIGN)
        w0, w1, lw = resample_source(ow, resample_scale(W, OW, GW, GIVEN, ALIGN), W, MODE, ALIGN)
        x_base = plane.to(tl.int64) * D * H * W
        total = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for t in tl.static_range(TAPS_D):
            for r in tl.static_range(TAPS_H):
                for s in tl.static_range(TAPS_W):
                    # corner (t, r, s): the first or the second neighbour along each dimension
                    di = d0 + (d1 - d0) * t
                    hi = h0 + (h1 - h0) * r
                    wi = w0 + (w1 - w0) * s
                    weight = (ld * t + (1.0 - ld) * (1 - t)) * (lh * r + (1.0 - lh) * (1 - r)) * \\
                        (lw * s + (1.0 - lw) * (1 - s))
                    value = tl.load(x_ptr + x_base + (di * H + hi) * W + wi, mask=row_ok, other=0.0)
                    total += weight * value.to(tl.float32)
    acc = total[:, None]
{finish}'''


def kernel(plan: Resample) -> str:
    params, lines, result = epilogue_lines(plan.epilogue, plan.out_dtype)
    finish = FINISH.format(epilogue="\n".join("    " + line for line in lines) or "    pass", result=result)
    return HELPERS + KERNEL.format(params=params, finish=finish)


def _settings_lines(plan: Resample) -> list[str]:
    """``forward`` lines that set the factors (from the module at run time, or the call's constants)."""
    if plan.module is None:
        if plan.mode in ("shuffle", "unshuffle"):
            return [f"ratio = {plan.ratio}"]
        return [f"size, scale = {plan.size!r}, {plan.scale!r}"]
    if plan.mode == "shuffle":
        return [f"ratio = int(self.{plan.module}.upscale_factor)"]
    if plan.mode == "unshuffle":
        return [f"ratio = int(self.{plan.module}.downscale_factor)"]
    dims = plan.dims
    return [f"size, scale = self.{plan.module}.size, self.{plan.module}.scale_factor",
            f"size = None if size is None else tuple(size) if isinstance(size, (tuple, list)) else (size,) * {dims}",
            "scale = None if scale is None else \\",
            f"    tuple(scale) if isinstance(scale, (tuple, list)) else (scale,) * {dims}"]


def _sizes_lines(plan: Resample, x: str) -> list[str]:
    """The output's shape, the input's spatial sizes as 3-D, and the scales handed to the kernel."""
    lead = 3 - plan.dims
    sizes = ["1"] * lead + [f"{x}.shape[{2 + i}]" for i in range(plan.dims)]
    body = [f"d, h, w = {', '.join(sizes)}"]
    if plan.mode == "shuffle":
        return body + ["c_out, od, oh, ow = " + f"{x}.shape[1] // (ratio * ratio), 1, h * ratio, w * ratio",
                       f"if {x}.shape[1] % (ratio * ratio):",
                       "    raise ValueError('pixel_shuffle: channels not divisible by the factor squared')",
                       "given = (0.0, 0.0, 0.0)"]
    if plan.mode == "unshuffle":
        return body + ["c_out, od, oh, ow = " + f"{x}.shape[1] * ratio * ratio, 1, h // ratio, w // ratio",
                       "if h % ratio or w % ratio:",
                       "    raise ValueError('pixel_unshuffle: sizes not divisible by the factor')",
                       "given = (0.0, 0.0, 0.0)"]
    spatial = ", ".join(("d", "h", "w")[lead:])
    body += [f"c_out = {x}.shape[1]",
             "# as F.interpolate sizes it: floor(in * scale), in double precision",
             "out_size = size if size is not None else \\",
             f"    tuple(int(float(i) * s) for i, s in zip(({spatial},), scale))",
             f"od, oh, ow = {', '.join(['1'] * lead + [f'out_size[{i}]' for i in range(plan.dims)])}",
             "# the kernel's scales: 1 / scale_factor where one is given (rounded to fp32 as the kernel reads it)",
             f"given = (1.0,) * {lead} + (tuple(1.0 / s for s in scale) if scale is not None else "
             f"(0.0,) * {plan.dims})"]
    return body


def forward(plan: Resample, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the factors, the output's size as torch computes it, one launch."""
    x = plan.input
    body = [f"{x} = {x}.contiguous()", *_settings_lines(plan), *_sizes_lines(plan, x)]
    out_spatial = ", ".join(("od", "oh", "ow")[3 - plan.dims:])
    body.append(f"out = torch.empty(({x}.shape[0], c_out, {out_spatial}), dtype=torch.{plan.out_dtype}, "
                f"device={x}.device)")
    lines, extra = epilogue_arguments(plan.epilogue)
    body += lines
    linear = plan.mode == "linear"
    taps = [2 if linear and i >= 3 - plan.dims else 1 for i in range(3)]
    shuffled = plan.mode in ("shuffle", "unshuffle")
    given = "False" if shuffled else "scale is not None and not " + str(plan.recompute)
    body += ["if out.numel():",
             f"    resample_kernel[({x}.shape[0] * c_out * ceil_div(od * oh * ow, {params['BLOCK_M']}),)](",
             f"        {x}, {x}, {extra}out, {x}.shape[0], c_out, d, h, w, od, oh, ow, {x}.shape[1], *given,",
             f"        MODE={MODES[plan.mode]}, ALIGN={plan.align_corners}, GIVEN={given},",
             f"        TAPS_D={taps[0]}, TAPS_H={taps[1]}, TAPS_W={taps[2]}, RATIO={'ratio' if shuffled else 1},",
             f"        HAS_BIAS=False, BLOCK_M={params['BLOCK_M']}, num_warps={params['num_warps']})",
             "return out"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK_M": block, "num_warps": warps}, f"seed: {block} output positions per program")
            for block, warps in ((512, 4), (1024, 4), (256, 4))]


def describe(plan: Resample) -> str:
    epilogue = f" + {', '.join(plan.epilogue.ops)}" if plan.epilogue is not None else ""
    if plan.mode in ("shuffle", "unshuffle"):
        what = f"pixel {plan.mode} by {plan.ratio if plan.module is None else 'the module factor'}"
    else:
        how = f"to size {list(plan.size)}" if plan.size else (
            f"by {list(plan.scale)}" if plan.scale else "by the module's factor")
        mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[plan.dims] if plan.mode == "linear" else plan.mode
        what = f"{mode} resampling {how}{', corners aligned' if plan.align_corners else ''}"
    return what + epilogue
