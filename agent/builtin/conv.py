"""Convolutions (``nn.Conv1d``, ``nn.Conv2d``, ``nn.Conv3d``: any stride, padding, dilation and
groups) with the ops after them fused into the kernel's epilogue.

Three kernels. ``implicit_gemm`` computes the convolution as the GEMM it is — output pixels x output
channels, summed over input channels x kernel taps — without ever building the unfolded ("im2col")
matrix: each K step decodes its (channel, tap) pairs and gathers the input tile straight from the
NC(D)HW tensor, padding by masking, so the input is read from memory about once and reused from
L1/L2 across the taps. ``tap_major`` (``conv_taps.py``) is the same GEMM with K walked tap by tap and
channel blocks within a tap, so that its index arithmetic is per pixel, not per element: the faster
one wherever a group has enough channels to fill a K step. ``direct`` is for convolutions whose
groups hold one input channel each (depthwise): there the GEMM's K is just the taps, too short for
tensor cores, so each program accumulates a block of output pixels of one channel with the taps
unrolled at compile time.

Every convolution is treated as 3-D (a 2-D one has depth 1, a 1-D one height 1 too): the sizes the
compiler sees as constants collapse the unused loops. The bias and the epilogue (pointwise ops,
per-channel parameters, a residual input of the output's shape) are applied to the fp32
accumulator in registers, and the output is written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn

from kernelevo.agent.builtin import (
    conv_direct,
    conv_edges,
    conv_functional,
    conv_taps,
    conv_transposed,
    expressions,
)
from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.tile_epilogue import chain_after, epilogue_arguments, epilogue_lines, epilogue_program
from kernelevo.agent.builtin.vocabulary import graph_calls

CONV_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


@dataclass
class Conv:
    """One convolution and what follows it, as the kernels need it."""

    module: str
    """The module's qualified name inside the model (``self.<module>``)."""
    dims: int
    in_channels: int
    out_channels: int
    groups: int
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]
    has_bias: bool
    epilogue: Program | None
    out_dtype: str
    input: str
    inputs: list[str]
    transposed: bool = False
    """A transposed convolution (the gradient of a convolution with respect to its input)."""
    padding_mode: str = "zeros"
    """Anything else pads the input first by a kernel of its own (:mod:`conv_edges`)."""
    weight_source: str = ""
    """A functional convolution's weight as ``forward`` names it (``self.<path>`` or an input); a
    module's is ``self.<module>.weight``."""
    bias_source: str = ""
    options_call: str = ""
    """A functional convolution's geometry (``ConvOptions(...)``, :mod:`conv_functional`)."""

    @property
    def functional(self) -> bool:
        return bool(self.options_call)

    @property
    def per_group_in(self) -> int:
        return self.in_channels // self.groups

    @property
    def per_group_out(self) -> int:
        return self.out_channels // self.groups

    @property
    def taps(self) -> int:
        return self.kernel[0] * self.kernel[1] * self.kernel[2]


def _three(value: Any, dims: int, fill: int) -> tuple[int, int, int]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
    return (fill,) * (3 - dims) + tuple(int(v) for v in values)  # type: ignore[return-value]


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> Conv | None:
    """The convolution plan if the graph starts with a convolution of an input, else None."""
    calls, placeholders = graph_calls(gm)
    if calls and conv_functional.is_functional(calls[0]):
        return _functional(gm, inputs, calls[0], placeholders)
    if not calls or calls[0].op != "call_module":
        return None
    sub = gm.get_submodule(str(calls[0].target))
    if not isinstance(sub, CONV_MODULES):
        return None
    node = calls[0]
    transposed = isinstance(sub, nn.modules.conv._ConvTransposeNd)
    if node.args[0] not in placeholders or len(node.args) != 1 or node.kwargs:
        raise CannotCover("a convolution whose input is computed (covered: a convolution of an input)")
    if sub.padding_mode not in ("zeros", *conv_edges.MODES):
        raise CannotCover(f"a convolution with padding_mode={sub.padding_mode!r}")
    dims = len(sub.kernel_size)
    x = inputs[placeholders.index(node.args[0])]
    if not isinstance(x, torch.Tensor) or x.dim() != dims + 2:
        raise CannotCover(f"a Conv{dims}d on an input without a batch dimension is not covered")
    epilogue, out_dtype = _after(gm, node, inputs, placeholders)
    padding = conv_functional.padding_numbers(sub.padding, sub.dilation, sub.kernel_size)
    return Conv(module=str(node.target), dims=dims, in_channels=sub.in_channels, out_channels=sub.out_channels,
                groups=sub.groups, kernel=_three(sub.kernel_size, dims, 1), stride=_three(sub.stride, dims, 1),
                padding=_three(padding, dims, 0), dilation=_three(sub.dilation, dims, 1),
                has_bias=sub.bias is not None, epilogue=epilogue, out_dtype=out_dtype, input=node.args[0].name,
                inputs=[p.name for p in placeholders], transposed=transposed, padding_mode=sub.padding_mode)


def _after(gm: torch.fx.GraphModule, node: torch.fx.Node, inputs: list[Any], placeholders: list[torch.fx.Node]
           ) -> tuple[Program | None, str]:
    """The epilogue after the convolution ``node`` and the dtype it ends in."""
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    chain = chain_after(gm, node, output)
    epilogue = epilogue_program(gm, node, chain, inputs, placeholders, "convolution")
    last = chain[-1] if chain else node
    if tuple(last.meta["tensor_meta"].shape) != tuple(node.meta["tensor_meta"].shape):
        raise CannotCover("the ops after the convolution change its shape (covered: pointwise ops)")
    return epilogue, str(last.meta["tensor_meta"].dtype).removeprefix("torch.")


def _functional(gm: torch.fx.GraphModule, inputs: list[Any], node: torch.fx.Node,
                placeholders: list[torch.fx.Node]) -> Conv:
    """``F.conv2d(x, weight, bias, ...)`` and its kin, of an input, with a weight that is a parameter
    or an input (a weight computed earlier)."""
    found = conv_functional.options(node)
    x, dims = node.args[0] if node.args else node.kwargs.get("input"), found["dims"]
    if x not in placeholders:
        raise CannotCover("a convolution whose input is computed (covered: a convolution of an input)")
    value = inputs[placeholders.index(x)]
    if not isinstance(value, torch.Tensor) or value.dim() != dims + 2:
        raise CannotCover(f"a conv{dims}d on an input without a batch dimension is not covered")
    weight, bias = found["weight"], found["bias"]
    meta = weight.meta.get("tensor_meta") if isinstance(weight, torch.fx.Node) else None
    if meta is None or len(meta.shape) != dims + 2:
        raise CannotCover("a functional convolution whose weight's shape is not known")
    kernel = tuple(int(k) for k in meta.shape[2:])
    in_channels, out_channels = conv_functional.channels(found, tuple(meta.shape))
    epilogue, out_dtype = _after(gm, node, inputs, placeholders)
    return Conv(module="", dims=dims, in_channels=in_channels, out_channels=out_channels, groups=found["groups"],
                kernel=_three(kernel, dims, 1), stride=_three(found["stride"], dims, 1),
                padding=_three(conv_functional.padding_numbers(found["padding"], found["dilation"], kernel), dims, 0),
                dilation=_three(found["dilation"], dims, 1), has_bias=bias is not None, epilogue=epilogue,
                out_dtype=out_dtype, input=x.name, inputs=[p.name for p in placeholders],
                transposed=found["transposed"], weight_source=conv_functional.source(weight, "weight"),
                bias_source=conv_functional.source(bias, "bias") if bias is not None else "",
                options_call=conv_functional.options_call(found))


GEMM_SIGNATURE = '''@triton.jit
def conv_kernel(x_ptr, w_ptr, b_ptr, {params}out_ptr, BATCH, C_IN, D, H, W, OD, OH, OW, K_OUT,
                CG: tl.constexpr, KG: tl.constexpr, KT: tl.constexpr, KR: tl.constexpr, KS: tl.constexpr,
                ST: tl.constexpr, SR: tl.constexpr, SS: tl.constexpr, PT: tl.constexpr, PR: tl.constexpr,
                PS: tl.constexpr, DT: tl.constexpr, DR: tl.constexpr, DS: tl.constexpr,
                HAS_BIAS: tl.constexpr, TRANSPOSED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, WIDEN: tl.constexpr):
'''
"""The implicit GEMMs' signature: the geometry as constants, tiles, and whether to widen to fp32."""

DOT_STEP = '''        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc{precision})
{finish}'''
"""The end of an implicit GEMM's K step (tiles ``a`` and ``b`` loaded), then the epilogue."""

OUTPUT_TILE = '''\
    group = tl.program_id(2)
    pixels = OD * OH * OW
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < BATCH * pixels
    n = rows // pixels
    pix = rows % pixels
    ow = pix % OW
    oh = (pix // OW) % OH
    od = pix // (OW * OH)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < KG
    kout = group * KG + cols
    if TRANSPOSED:
        d0 = od + PT
        h0 = oh + PR
        w0 = ow + PS
    else:
        d0 = od * ST - PT
        h0 = oh * SR - PR
        w0 = ow * SS - PS
'''
"""Program (m, n, g)'s output pixels and channels, and where each pixel's window starts in the input
(TRANSPOSED: where its first tap reads); shared by the implicit GEMMs."""

IMPLICIT_GEMM = GEMM_SIGNATURE + '''\
    # Program (m, n, g): BLOCK_M output pixels x BLOCK_N output channels of group g. The GEMM's K is
    # (input channel, tap): each step gathers a BLOCK_M x BLOCK_K tile of the input (zeros where a
    # tap falls in the padding) and a BLOCK_K x BLOCK_N tile of the weights, and the tensor cores
    # add their product to the fp32 accumulator. TRANSPOSED: the same sum seen from the output, as
    # the gradient of a convolution is: tap t of output o reads input (o + pad - t * dilation) /
    # stride where that divides exactly, and the weights are [in, out per group, taps].
    # A convolution's input address is linear in (channel, tap): a pixel's window start plus a
    # column's offset, one add per element; without padding no tap of a valid pixel leaves the input,
    # so the only per-element work besides the multiply is that add.
''' + OUTPUT_TILE + '''\
    KTOT: tl.constexpr = CG * KT * KR * KS
    UNPADDED: tl.constexpr = PT == 0 and PR == 0 and PS == 0
    x_base = n.to(tl.int64) * C_IN * D * H * W + group * CG * D * H * W
    x_row = x_base + (d0 * H + h0) * W + w0
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, KTOT, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < KTOT
        s = ks % KS
        r = (ks // KS) % KR
        t = (ks // (KS * KR)) % KT
        c = ks // (KS * KR * KT)
        if TRANSPOSED:
            dn = d0[:, None] - (t * DT)[None, :]
            hn = h0[:, None] - (r * DR)[None, :]
            wn = w0[:, None] - (s * DS)[None, :]
            di = dn // ST
            hi = hn // SR
            wi = wn // SS
            inside = (dn >= 0) & (hn >= 0) & (wn >= 0) & (di * ST == dn) & (hi * SR == hn) & (wi * SS == wn)
            inside = inside & (di < D) & (hi < H) & (wi < W)
            taps = ks % (KT * KR * KS)
            w_offsets = ((tl.program_id(2) * CG + c)[:, None] * KG + cols[None, :]) * (KT * KR * KS) + taps[:, None]
            ok = row_ok[:, None] & k_ok[None, :] & inside
            a_offsets = x_base[:, None] + ((c[None, :] * D + di) * H + hi) * W + wi
        else:
            a_offsets = x_row[:, None] + (((c * D + t * DT) * H + r * DR) * W + s * DS)[None, :]
            if UNPADDED:
                ok = row_ok[:, None] & k_ok[None, :]
            else:
                di = d0[:, None] + (t * DT)[None, :]
                hi = h0[:, None] + (r * DR)[None, :]
                wi = w0[:, None] + (s * DS)[None, :]
                inside = (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
                ok = row_ok[:, None] & k_ok[None, :] & inside
            w_offsets = kout[None, :] * KTOT + ks[:, None]
        a = tl.load(x_ptr + a_offsets, mask=ok, other=0.0)
        b = tl.load(w_ptr + w_offsets, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
''' + DOT_STEP

FINISH = '''    if HAS_BIAS:
        acc += tl.load(b_ptr + kout, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    mask = row_ok[:, None] & col_ok[None, :]
    out_offsets = (n.to(tl.int64) * K_OUT * pixels + pix)[:, None] + kout[None, :].to(tl.int64) * pixels
    # Epilogue, on the fp32 accumulator while it is still in registers.
{epilogue}
    tl.store(out_ptr + out_offsets, {result}.to(out_ptr.dtype.element_ty), mask=mask)
'''

PIXEL_MAJOR_STORE = '''\
    # stored as [channels, pixels]: a warp's stores run along the output's pixels, not across its
    # channels' planes
    pixel_offsets = (n.to(tl.int64) * K_OUT * pixels + pix)[None, :] + kout[:, None].to(tl.int64) * pixels
    tl.store(out_ptr + pixel_offsets, tl.trans({result}).to(out_ptr.dtype.element_ty),
             mask=row_ok[None, :] & col_ok[:, None])
'''
"""FINISH's store for a kernel whose tiles are read pixel-major (``conv_transposed.DILATED_BODY``)."""


def _phased(conv: Conv) -> bool:
    return conv_transposed.phased(conv.transposed, conv.stride, conv.groups)


def kernel(conv: Conv, strategy: str, precision: str | None) -> str:
    params, lines, result = epilogue_lines(conv.epilogue, conv.out_dtype)
    finish = FINISH.format(epilogue="\n".join("    " + line for line in lines) or "    pass", result=result)
    if strategy == "direct":
        return conv_direct.DIRECT.format(params=params, finish=finish)
    precision_arg = f", input_precision={expressions.dot_name(precision)}" if precision else ""
    if strategy == "tap_major":
        if not conv_taps.applies(conv.transposed, conv.stride, _phased(conv), conv.per_group_in):
            raise CannotCover("the tap-major kernel takes a convolution, or a transposed one without stride or "
                              f"split by phase, with at least {conv_taps.MIN_CHANNELS} channels a group")
        signature = GEMM_SIGNATURE.removesuffix("):\n") + conv_taps.SIGNATURE_EXTRA
        body = (conv_transposed.body(conv.dilation, tap_major=True) if _phased(conv)
                else conv_taps.INTRO + OUTPUT_TILE + conv_taps.INPUT_LAYOUT + conv_taps.LOOP)
        source = signature + body + DOT_STEP
        return conv_transposed.with_helper(source.format(params=params, precision=precision_arg, finish=finish))
    if _phased(conv):
        if conv_transposed.pixel_major(conv.dilation, tap_major=False):
            store = FINISH.splitlines(keepends=True)[-1].format(result=result)
            assert finish.count(store) == 1, "FINISH ends in the store that PIXEL_MAJOR_STORE replaces"
            finish = finish.replace(store, PIXEL_MAJOR_STORE.format(result=result))
        source = GEMM_SIGNATURE + conv_transposed.body(conv.dilation, tap_major=False) + DOT_STEP
        return conv_transposed.with_helper(source.format(params=params, precision=precision_arg, finish=finish))
    return IMPLICIT_GEMM.format(params=params, precision=precision_arg, finish=finish)


GEOMETRY = '''def conv_geometry(conv, x, weight):
    """A 1-, 2- or 3-D convolution's geometry as 3-D (missing leading dims are 1, or 0 for padding):
    input size, kernel, stride, padding, dilation and output size, read from the module at run time."""
    dims = weight.dim() - 2

    def three(value, fill):
        value = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
        return (fill,) * (3 - dims) + tuple(int(v) for v in value)

    kernel = three(weight.shape[2:], 1)
    if conv.padding == "same":
        padding = three([d * (k - 1) // 2 for d, k in zip(conv.dilation, weight.shape[2:])], 0)
    elif conv.padding == "valid":
        padding = (0, 0, 0)
    else:
        padding = three(conv.padding, 0)
    size, stride, dilation = three(x.shape[2:], 1), three(conv.stride, 1), three(conv.dilation, 1)
    if conv.transposed:
        extra = three(conv.output_padding, 0)
        out = tuple((n - 1) * s - 2 * p + d * (k - 1) + e + 1
                    for n, k, s, p, d, e in zip(size, kernel, stride, padding, dilation, extra))
    else:
        out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                    for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))
    return size, kernel, stride, padding, dilation, out


'''


def forward(conv: Conv, strategy: str, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the geometry from the module and the tensors (not from the sizes the
    plan was made at), the output, one launch."""
    x = conv.input
    # a module's options are read from it at run time; a function call's are written in place
    module = conv.options_call if conv.functional else f"self.{conv.module}"
    # what the kernel reads: the input, or its copy padded by the edges' mode (the input itself stays
    # as it is for the epilogue, which may read it as a residual)
    data = x if conv.padding_mode == "zeros" else conv_edges.PADDED
    body = [f"{x} = {x}.contiguous()",
            f"weight = {conv.weight_source or module + '.weight'}.contiguous()",
            "(d, h, w), (kt, kr, ks), (st, sr, ss), (pt, pr, ps), (dt, dr, ds), (od, oh, ow) = conv_geometry(",
            f"    {module}, {x}, weight)",
            *(conv_edges.pad_lines(x, conv.dims, conv.padding_mode) if conv.padding_mode != "zeros" else []),
            f"groups = {conv.groups if conv.functional else module + '.groups'}",
            # a transposed convolution's weight is [in, out per group, taps]; a convolution's [out, in per group, taps]
            ("k_out, cg = weight.shape[1] * groups, weight.shape[0] // groups" if conv.transposed
             else "k_out, cg = weight.shape[0], weight.shape[1]"),
            f"out = torch.empty(({x}.shape[0], k_out, {', '.join(('od', 'oh', 'ow')[3 - conv.dims:])}), "
            f"dtype=torch.{conv.out_dtype}, device={x}.device)"]
    channels_last = bool(params.get("CHANNELS_LAST"))
    if strategy == "tap_major":
        body += conv_taps.prepare_lines(data, conv.transposed, conv.dims, channels_last)
    lines, extra = epilogue_arguments(conv.epilogue)
    body += lines
    bias = (conv.bias_source or f"{module}.bias") if conv.has_bias else "weight"
    constants = ("CG=cg, KG=k_out // groups, KT=kt, KR=kr, KS=ks, ST=st, SR=sr, SS=ss, PT=pt, PR=pr, PS=ps, "
                 f"DT=dt, DR=dr, DS=ds, HAS_BIAS={conv.has_bias}")
    if strategy != "direct":
        constants += f", TRANSPOSED={conv.transposed}"
    sizes = f"{x}.shape[0], {x}.shape[1], d, h, w, od, oh, ow, k_out"
    if strategy == "direct":
        body += ["if cg != 1:",
                 "    raise ValueError(f'the direct kernel takes one input channel per group, not {cg}')"]
    body.append("if out.numel():")
    if strategy == "direct":
        grid = f"({x}.shape[0] * k_out * ceil_div(od * oh * ow, {params['BLOCK_M']}),)"
        body += [f"    conv_kernel[{grid}](",
                 f"        {data}, weight, {bias}, {extra}out, {sizes},",
                 f"        {constants},",
                 f"        BLOCK_M={params['BLOCK_M']}, num_warps={params['num_warps']})"]
    else:
        grid = (conv_transposed.grid(x, params) if _phased(conv)
                else f"(ceil_div({x}.shape[0] * od * oh * ow, {params['BLOCK_M']}), "
                f"ceil_div(k_out // groups, {params['BLOCK_N']}), groups)")
        source, layout = data, ""
        if strategy == "tap_major":
            source = conv_taps.channels_last_name(data) if channels_last else data
            layout = f" CHANNELS_LAST={channels_last},"
        body += [f"    conv_kernel[{grid}](",
                 f"        {source}, weight, {bias}, {extra}out, {sizes},",
                 f"        {constants},",
                 f"        BLOCK_M={params['BLOCK_M']}, BLOCK_N={params['BLOCK_N']}, BLOCK_K={params['BLOCK_K']}, "
                 f"WIDEN=INTERPRETED,{layout}",
                 f"        num_warps={params['num_warps']}, num_stages={params['num_stages']})"]
    body.append("return out")
    return f"def forward(self, {', '.join(conv.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def full_size(conv: Conv, model: nn.Module, shapes: dict[str, tuple[int, ...]] | None = None,
              traced: torch.fx.GraphModule | None = None) -> None:
    """Channels and groups at the size being optimised (``model``: built at that size, on the meta
    device; ``shapes``: nodes' shapes there; ``traced``: its trace, where known); the plan was
    recognised at the small size, which only describes it. A functional convolution's weight and
    numbers read there where they are known."""
    if conv.functional:
        _functional_full_size(conv, model, shapes, traced)
        return
    sub = model.get_submodule(conv.module)
    conv.in_channels, conv.out_channels, conv.groups = sub.in_channels, sub.out_channels, sub.groups


def _functional_full_size(conv: Conv, model: nn.Module, shapes: dict[str, tuple[int, ...]] | None,
                          traced: torch.fx.GraphModule | None) -> None:
    """A functional convolution's numbers (stride, padding, dilation, groups) and weight as the call
    makes them at the size being optimised."""
    path = conv.weight_source.removeprefix("self.")
    bias = conv.bias_source.removeprefix("self.")
    found = conv_functional.options_at_full_size(model, path if conv.weight_source != path else None,
                                                 bias if bias and conv.bias_source != bias else None, traced)
    shape = conv_functional.weight_shape(path, conv.weight_source != path, model, shapes)
    known = shape is not None and len(shape) == conv.dims + 2
    if found is not None:
        if found["transposed"] != conv.transposed or found["dims"] != conv.dims:
            raise CannotCover("the functional convolution differs between the small and the full size")
        kernel = tuple(shape[2:]) if known else conv.kernel[3 - conv.dims:]
        conv.groups, conv.kernel = found["groups"], _three(kernel, conv.dims, 1)
        conv.stride, conv.dilation = _three(found["stride"], conv.dims, 1), _three(found["dilation"], conv.dims, 1)
        conv.padding = _three(conv_functional.padding_numbers(found["padding"], found["dilation"], kernel),
                              conv.dims, 0)
        conv.options_call = conv_functional.options_call(found)
    if known:
        conv.in_channels, conv.out_channels = conv_functional.channels(
            {"groups": conv.groups, "transposed": conv.transposed}, shape)


def seeds(conv: Conv, dtype: str, shared_bytes: int) -> list[tuple[str, dict[str, Any], str]]:
    """Direct kernels first for one input channel per group; then tap-major tiles where they apply,
    then implicit-GEMM ones, each sized to the output channels per group (at least 16, the tensor
    cores' smallest). fp32 seeds: ``conv_taps.FP32_PRODUCTS``."""
    out: list[tuple[str, dict[str, Any], str]] = []
    if conv.per_group_in == 1 and not conv.transposed:
        for block, warps in ((256, 4), (512, 4), (1024, 8)):
            out.append(("direct", {"BLOCK_M": block, "num_warps": warps},
                        f"seed: {block} output pixels per program, taps unrolled"))
    fp32 = dtype == "float32"
    block_n = max(16, min(128, 1 << max(conv.per_group_out - 1, 0).bit_length()))
    taps = conv_transposed.phase_taps(conv.kernel, conv.stride, conv.dilation) if _phased(conv) else conv.taps
    if conv_taps.applies(conv.transposed, conv.stride, _phased(conv), conv.per_group_in):
        out += conv_taps.seeds(conv.per_group_in, block_n, fp32, shared_bytes)
    block_k = 32 if conv.per_group_in * taps >= 32 else 16
    exact, fast = conv_taps.FP32_PRODUCTS if fp32 else ({}, {})
    tiles = [(128, 4, 3, exact), *([(128, 4, 3, fast)] if fp32 else []), (64, 4, 3, exact), (256, 8, 3, exact)]
    for bm, warps, stages, chosen in tiles:
        products = ", three bf16 products per fp32 one" if chosen.get("precision") == "bf16x3" else ""
        out.append(("implicit_gemm", {"BLOCK_M": bm, "BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": warps,
                                      "num_stages": stages, **chosen},
                    f"seed: {bm} output pixels x {block_n} output channels per program, K steps of {block_k}"
                    + products))
    return out


def describe(conv: Conv) -> str:
    epilogue = f" + {', '.join(conv.epilogue.ops)}" if conv.epilogue is not None else ""
    groups = f", {conv.groups} groups" if conv.groups > 1 else ""
    kernel = "x".join(str(k) for k in conv.kernel[3 - conv.dims:])
    name = "ConvTranspose" if conv.transposed else "Conv"
    edges = f" ({conv.padding_mode})" if conv.padding_mode != "zeros" else ""
    return (f"{name}{conv.dims}d {conv.in_channels}->{conv.out_channels}, kernel {kernel}, stride "
            f"{conv.stride[3 - conv.dims:]}, padding {conv.padding[3 - conv.dims:]}{edges}, dilation "
            f"{conv.dilation[3 - conv.dims:]}{groups}{epilogue}")

