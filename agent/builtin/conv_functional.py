"""Convolutions written as functions (``F.conv2d(x, w, b, stride, padding, dilation, groups)``, the
1-D and 3-D ones, and the transposed ones), with a weight that is a parameter or a tensor computed in
``forward`` (a weight standardised or normalised on every call, which the sequence planner passes in
from the kernel that computed it).

The kernels are the module convolution's (:mod:`conv`): only where the weight, the bias and the
geometry come from differs. The generated ``forward`` reads the weight and bias as the reference
names them (``self.conv.weight``, or the input it was given) and the geometry from numbers written in
place, since a function call has no module to read them from at run time.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.rewrite_in_place import option

FUNCTIONS = {F.conv1d: 1, F.conv2d: 2, F.conv3d: 3}
TRANSPOSED = {F.conv_transpose1d: 1, F.conv_transpose2d: 2, F.conv_transpose3d: 3}

OPTIONS = '''class ConvOptions:
    """A functional convolution's options, read by ``conv_geometry`` as a module's would be."""

    def __init__(self, stride, padding, dilation, groups, transposed=False, output_padding=0):
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.transposed, self.output_padding = transposed, output_padding


'''
"""Written into a candidate whose convolution is a function call."""


def is_functional(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and (node.target in FUNCTIONS or node.target in TRANSPOSED)


def source(node: Any, what: str) -> str:
    """How ``forward`` names the weight or bias: a parameter as ``self.<path>``, an input by its name."""
    if isinstance(node, torch.fx.Node) and node.op == "get_attr":
        return f"self.{node.target}"
    if isinstance(node, torch.fx.Node) and node.op == "placeholder":
        return node.name
    raise CannotCover(f"a convolution whose {what} is computed in the same kernel (covered: a parameter, or a "
                      "tensor an earlier kernel computes)")


def _numbers(value: Any, dims: int, what: str) -> tuple[int, ...]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims
    if len(values) != dims or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise CannotCover(f"a functional convolution whose {what} is not {dims} whole numbers written in place")
    return values


def options(node: torch.fx.Node) -> dict[str, Any]:
    """The call's geometry as numbers: stride, padding (numbers or 'same'/'valid'), dilation, groups,
    output padding; the weight and bias nodes; whether it is transposed; its dims."""
    transposed = node.target in TRANSPOSED
    dims = (TRANSPOSED if transposed else FUNCTIONS)[node.target]
    weight, bias = option(node, "weight", 1, None), option(node, "bias", 2, None)
    stride = _numbers(option(node, "stride", 3, 1), dims, "stride")
    padding = option(node, "padding", 4, 0)
    if transposed:
        output_padding = _numbers(option(node, "output_padding", 5, 0), dims, "output padding")
        groups, dilation = option(node, "groups", 6, 1), option(node, "dilation", 7, 1)
    else:
        output_padding = (0,) * dims
        dilation, groups = option(node, "dilation", 5, 1), option(node, "groups", 6, 1)
    dilation = _numbers(dilation, dims, "dilation")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise CannotCover("a functional convolution whose groups is not a whole number written in place")
    if isinstance(padding, str):
        if padding not in ("same", "valid") or transposed:
            raise CannotCover(f"a functional convolution with padding {padding!r}")
    else:
        padding = _numbers(padding, dims, "padding")
    return {"transposed": transposed, "dims": dims, "weight": weight, "bias": bias, "stride": stride,
            "padding": padding, "dilation": dilation, "groups": groups, "output_padding": output_padding}


def padding_numbers(padding: Any, dilation: Any, kernel: Any) -> tuple[int, ...]:
    """The padding on each side, for a module or a call: 'valid' is none, 'same' half the dilated
    kernel's extent (torch pads an odd extent's extra row on one side only, which the kernels here do
    not), numbers as they are."""
    if padding == "valid":
        return (0,) * len(kernel)
    if padding == "same":
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        if any(t % 2 for t in totals):
            raise CannotCover("padding='same' with an even kernel extent (asymmetric padding) is not covered")
        return tuple(t // 2 for t in totals)
    return tuple(padding)


def options_call(found: dict[str, Any]) -> str:
    """The ``ConvOptions(...)`` expression ``forward`` passes to ``conv_geometry``."""
    return (f"ConvOptions(stride={found['stride']}, padding={found['padding']!r}, dilation={found['dilation']}, "
            f"groups={found['groups']}, transposed={found['transposed']}, "
            f"output_padding={found['output_padding']})")


def channels(found: dict[str, Any], weight_shape: tuple[int, ...]) -> tuple[int, int]:
    """(input channels, output channels) from the weight's shape: [out, in per group, taps] for a
    convolution, [in, out per group, taps] for a transposed one."""
    groups = found["groups"]
    if found["transposed"]:
        return weight_shape[0], weight_shape[1] * groups
    return weight_shape[1] * groups, weight_shape[0]


def weight_shape(name: str, is_attribute: bool, model: torch.nn.Module | None,
                 shapes: dict[str, tuple[int, ...]] | None) -> tuple[int, ...] | None:
    """The weight's shape at the size being optimised where it can be known (a parameter of the model
    built there, or an input whose shape there the planner recorded), else None."""
    from kernelevo.agent.builtin.vocabulary import attribute_at

    if is_attribute:
        value = attribute_at(model, name) if model is not None else None
        return tuple(value.shape) if isinstance(value, torch.Tensor) else None
    return tuple(shapes[name]) if shapes and name in shapes else None


def options_at_full_size(model: torch.nn.Module, weight: str | None, bias: str | None = None,
                         traced: torch.fx.GraphModule | None = None) -> dict[str, Any] | None:
    """The options of the same functional convolution in ``model`` built at the size being optimised:
    its numbers are written into the candidate, and a stride, padding or groups taken from a
    constructor argument or a size differs from the small trace's. The call is told by its weight
    (``weight``: the parameter's path), else by its bias (a weight-normalised layer's weight is
    computed, its bias a parameter), else by being the model's only one. None where the model cannot
    be traced (the judge at that size still decides); CannotCover where the call cannot be told apart.
    ``traced``: the model's trace where the caller has it already."""
    from kernelevo.agent.builtin import size_tracing

    try:
        traced = traced if traced is not None else size_tracing.traced(model)
    except Exception:
        return None
    calls = [n for n in traced.graph.nodes if n.op == "call_function" and is_functional(n)]
    for what, place, path in (("weight", 1, weight), ("bias", 2, bias)):
        if path is not None:
            calls = [n for n in calls if isinstance(v := option(n, what, place, None), torch.fx.Node) and
                     v.op == "get_attr" and v.target == path]
            break
    if len(calls) != 1:
        raise CannotCover("a functional convolution whose numbers at the size being optimised are not known (it "
                          "cannot be told apart from the model's other convolutions there)")
    return options(calls[0])
