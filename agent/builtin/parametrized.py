"""Layers under weight normalisation (``torch.nn.utils.parametrizations.weight_norm``, or the older
``torch.nn.utils.weight_norm`` and its forward pre-hook) written as what they compute on every call, in
the traced graph: the weight ``g * v / ||v||`` from the two parameters it holds (``original0`` and
``original1``, or ``weight_g`` and ``weight_v``), then the layer as its function (``F.linear``,
``F.conv2d``, ...) of that computed weight.

torch.fx sees such a layer as one module call and its weight as an attribute; the planners cover a
weight computed in ``forward`` (a segment of its own, recomputed each call as the reference does), so
the layer is spelled out for them. The norm is over every dim but the parametrization's ``dim`` (over
the whole tensor where it is -1), as ``torch._weight_norm`` takes it. Other parametrizations (spectral
norm, orthogonal, a user's own) stay module calls: a plan reading such a weight runs the
parametrization's torch in ``forward``, which a strict task's judge refuses.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize

from kernelevo.agent.builtin import conv_functional
from kernelevo.agent.builtin.program import CannotCover

LAYERS = {nn.Linear: F.linear, nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d,
          nn.ConvTranspose1d: F.conv_transpose1d, nn.ConvTranspose2d: F.conv_transpose2d,
          nn.ConvTranspose3d: F.conv_transpose3d}
"""The layers spelled out, and the function each computes."""


def _weight_norm(module: nn.Module) -> tuple[int, str, str] | None:
    """(``dim``, path of ``g``, path of ``v``, under the module) of a module whose weight, and nothing
    else, is weight-normalised: by a parametrization (``parametrizations.weight_norm``) or by the older
    forward pre-hook (``torch.nn.utils.weight_norm``, parameters ``weight_g`` and ``weight_v``)."""
    hooks = list(module._forward_pre_hooks.values())
    if parametrize.is_parametrized(module):
        chain = module.parametrizations["weight"] if set(module.parametrizations.keys()) == {"weight"} else []
        if hooks or len(chain) != 1 or type(chain[0]).__name__ != "_WeightNorm":
            return None
        return chain[0].dim, "parametrizations.weight.original0", "parametrizations.weight.original1"
    if len(hooks) == 1 and type(hooks[0]).__name__ == "WeightNorm" and hooks[0].name == "weight":
        return hooks[0].dim, "weight_g", "weight_v"
    return None


def _layer_function(module: nn.Module) -> Any:
    """The function a linear or zero-padded convolution layer computes, else None."""
    kind = next((k for k in LAYERS if isinstance(module, k)), None)
    if kind is None or getattr(module, "padding_mode", "zeros") != "zeros":
        return None
    return LAYERS[kind]


def _layer_arguments(module: nn.Module, function: Any, x: torch.fx.Node, weight: torch.fx.Node, bias: Any
                     ) -> tuple[Any, ...]:
    """The function's arguments, in its order: the layer's own geometry after the weight and bias."""
    if function is F.linear:
        return x, weight, bias
    if function in conv_functional.TRANSPOSED:
        return (x, weight, bias, module.stride, module.padding, module.output_padding, module.groups,
                module.dilation)
    return x, weight, bias, module.stride, module.padding, module.dilation, module.groups


def _normalised_weight(graph: torch.fx.Graph, g: str, v: str, dim: int, rank: int) -> torch.fx.Node:
    """``v * (g / ||v||)``, the norm over every dim but ``dim`` (all of them where it is -1), kept."""
    g_node, v_node = graph.get_attr(g), graph.get_attr(v)
    over = [d for d in range(rank) if d != dim]
    squares = graph.call_function(torch.sum, (graph.call_function(operator.mul, (v_node, v_node)), over),
                                  {"keepdim": True})
    norm = graph.call_function(torch.sqrt, (squares,))
    return graph.call_function(operator.mul, (v_node, graph.call_function(operator.truediv, (g_node, norm))))


def expand_weight_norm(gm: torch.fx.GraphModule) -> bool:
    """Each call of a weight-normalised linear or convolution layer as its computed weight and its
    function (see the module); True when one changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
            continue
        module = gm.get_submodule(str(node.target))
        found, function = _weight_norm(module), _layer_function(module)
        if found is None or function is None:
            continue
        dim, g, v = found
        rank = module.get_parameter(v).dim()
        if dim is None or not (dim == -1 or 0 <= dim < rank):
            continue
        if g == "weight_g" and isinstance(module.weight, torch.Tensor) and module.weight.grad_fn is not None:
            # the hook's last weight, computed from the parameters: a copy of the model (which the
            # planners make) cannot hold a tensor with a history; the hook computes it again on each call
            module.weight = module.weight.detach()
        with gm.graph.inserting_before(node):
            weight = _normalised_weight(gm.graph, f"{node.target}.{g}", f"{node.target}.{v}", dim, rank)
            bias = gm.graph.get_attr(f"{node.target}.bias") if getattr(module, "bias", None) is not None else None
            replaced = gm.graph.call_function(function, _layer_arguments(module, function, node.args[0], weight, bias))
        node.replace_all_uses_with(replaced)
        gm.graph.erase_node(node)
        changed = True
    return changed


def refuse_other_parametrizations(gm: torch.fx.GraphModule) -> None:
    """CannotCover where a module the graph calls is still parametrized (spectral norm, orthogonal, a
    user's own): its weight is computed by torch on every read, which a candidate's kernels would have
    to do themselves, and no template computes it."""
    for node in gm.graph.nodes:
        if node.op == "call_module" and parametrize.is_parametrized(module := gm.get_submodule(str(node.target))):
            kinds = sorted({type(p).__name__.lstrip("_") for chain in module.parametrizations.values() for p in chain})
            raise CannotCover(f"`{node.target}` is under a parametrization ({', '.join(kinds)}) that torch computes "
                              "on every read of its weight (covered: weight norm)")
