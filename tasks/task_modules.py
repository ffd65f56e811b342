"""How a region task writes the modules and tensors of the network it came from: torch.nn modules
re-created from their own settings, and tensors drawn afresh over the range the network's own span
(pure code generation; no GPU)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _span(value: torch.Tensor) -> tuple[float, float]:
    """The range a tensor's values span; one constant value widened by half its size either way (zero by
    0.5 either way), so that a drawn tensor keeps its sign and scale."""
    low, high = float(value.detach().min()), float(value.detach().max())
    if low == high:
        low, high = (-0.5, 0.5) if low == 0 else tuple(sorted((low * 0.5, low * 1.5)))
    return low, high


def drawn_like(value: torch.Tensor) -> str:
    """Python that draws a tensor of ``value``'s shape and dtype uniformly over the range its values
    span (a temperature stays positive, a scale stays near its size); one constant value is varied by
    half its size either way, zero by 0.5 either way."""
    low, high = _span(value)
    return (f"torch.empty({tuple(value.shape)}, dtype=torch.{dtype_name(value.dtype)}).uniform_({low!r}, "
            f"{high!r})")


def module_init(module: nn.Module | None) -> str | None:
    """Python that constructs a module like ``module`` (same shapes and options); None if unknown."""
    if module is None:
        return None
    if isinstance(module, nn.Linear):
        return f"nn.Linear({module.in_features}, {module.out_features}, bias={module.bias is not None})"
    if isinstance(module, nn.Conv2d):
        return (f"nn.Conv2d({module.in_channels}, {module.out_channels}, {module.kernel_size}, "
                f"stride={module.stride}, padding={module.padding!r}, dilation={module.dilation}, "
                f"groups={module.groups}, bias={module.bias is not None})")
    if isinstance(module, nn.LayerNorm):
        return (f"nn.LayerNorm({tuple(module.normalized_shape)}, eps={module.eps}, "
                f"elementwise_affine={module.elementwise_affine})")
    if hasattr(nn, "RMSNorm") and isinstance(module, nn.RMSNorm):
        return (f"nn.RMSNorm({tuple(module.normalized_shape)}, eps={module.eps}, "
                f"elementwise_affine={module.elementwise_affine})")
    if isinstance(module, nn.GELU):
        return f"nn.GELU(approximate={module.approximate!r})"
    if isinstance(module, nn.Softmax):
        return f"nn.Softmax(dim={module.dim})"
    if isinstance(module, nn.Dropout):
        return f"nn.Dropout(p={module.p})"
    if isinstance(module, nn.LeakyReLU):
        return f"nn.LeakyReLU({module.negative_slope})"
    if isinstance(module, nn.MultiheadAttention):
        return (f"nn.MultiheadAttention({module.embed_dim}, {module.num_heads}, dropout={module.dropout}, "
                f"bias={module.in_proj_bias is not None}, add_bias_kv={module.bias_k is not None}, "
                f"add_zero_attn={module.add_zero_attn}, kdim={module.kdim}, vdim={module.vdim}, "
                f"batch_first={module.batch_first})")
    simple = (nn.ReLU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Identity, nn.Mish)
    if isinstance(module, simple):
        return f"nn.{type(module).__name__}()"
    return _from_repr(module)


def _from_repr(module: nn.Module) -> str | None:
    """A torch.nn module with no children, constructed from its own ``extra_repr`` (which for most of
    torch's modules reads as their constructor's arguments: ``BatchNorm2d(64, eps=1e-05, ...)``), if
    the module so built is the same: every public attribute equal, and the same parameters and
    buffers by name and shape (some descriptions leave arguments out: AvgPool2d's
    ``count_include_pad``, Upsample's ``align_corners``; those modules are refused). Built on the meta
    device: nothing is allocated or launched, which matters while a reassembled network is built in
    the judge's process. Never in place: a region task must leave its inputs as they were."""
    cls = type(module)
    if (getattr(nn, cls.__name__, None) is not cls or next(module.children(), None) is not None
            or isinstance(module, (nn.Embedding, nn.EmbeddingBag))):  # indices as inputs: a task draws others
        return None
    text = f"nn.{cls.__name__}({module.extra_repr()})".replace("inplace=True", "inplace=False")
    try:
        with torch.device("meta"):
            rebuilt = eval(text, {"nn": nn, "torch": torch, "inf": float("inf"), "nan": float("nan")})  # noqa: S307
    except Exception:  # a description that is not its constructor's arguments
        return None
    return text if _settings(rebuilt) == _settings(module) else None


def _settings(module: nn.Module) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], torch.dtype]]]:
    """What makes a module compute what it computes, tensors aside: its public attributes (``inplace``
    and ``training`` excepted), and its parameters' and buffers' names, shapes and dtypes."""
    public = {k: v for k, v in vars(module).items() if not k.startswith("_") and k not in ("training", "inplace")}
    tensors = [(k, tuple(v.shape), v.dtype) for k, v in module.state_dict(keep_vars=True).items()]
    return public, tensors


def varied_constants(attr: str, module: nn.Module) -> list[str]:
    """Lines for a region task's ``__init__`` that redraw each floating parameter or buffer of
    ``self.<attr>`` holding one value throughout (a norm's weight of ones, its bias of zeros,
    BatchNorm's running mean and variance as constructed): in a trained network they vary, and a
    kernel that ignored them would pass a task where they are ones and zeros. Signs are kept (a
    variance stays positive)."""
    lines = []
    for name, value in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
        if value is None or not value.is_floating_point() or value.numel() < 2:
            continue
        flat = value.detach().reshape(-1)
        if not bool((flat == flat[0]).all()):
            continue
        low, high = _span(value)
        lines.append(f"self.{attr}.{name}.uniform_({low!r}, {high!r})")
    return ["        with torch.no_grad():  # values a trained network would have, not the constructor's constants",
            *("            " + line for line in lines)] if lines else []
