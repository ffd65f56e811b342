"""torch.nn containers whose ``forward`` torch.fx cannot trace, captured as the modules they call.

``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder`` decide in Python, on the input's rank,
dtype and flags, whether to take a fused fast path; a traced input has none of those values, so
tracing stops there and the layer would stay one opaque module that no task can re-create. With no
masks their computation is plain: attention, feed-forward, residuals and norms, in the order
``norm_first`` says. The tracer below records that computation in terms of the layer's own
submodules (``self_attn``, ``linear1``, ``norm1``...), each then a node like any other module call of
the network, so regions can be cut through the layer. A container called with a mask or a causal
flag is recorded as one module call, as before: it stays in PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx
import torch.nn as nn


def _encoder_layer(layer: nn.TransformerEncoderLayer, src: Any) -> Any:
    def attention(x: Any) -> Any:
        return layer.dropout1(layer.self_attn(x, x, x, need_weights=False)[0])

    def feed_forward(x: Any) -> Any:
        return layer.dropout2(layer.linear2(layer.dropout(layer.activation(layer.linear1(x)))))

    x = src
    if layer.norm_first:
        x = x + attention(layer.norm1(x))
        return x + feed_forward(layer.norm2(x))
    x = layer.norm1(x + attention(x))
    return layer.norm2(x + feed_forward(x))


def _encoder(encoder: nn.TransformerEncoder, src: Any) -> Any:
    out = src
    for layer in encoder.layers:
        out = layer(out)
    return encoder.norm(out) if encoder.norm is not None else out


AS_OPS: dict[type[nn.Module], Callable[..., Any]] = {
    nn.TransformerEncoderLayer: _encoder_layer,
    nn.TransformerEncoder: _encoder,
}
"""Container types traced through, by the function that writes their forward as submodule calls
(given the input alone: every other argument None or False)."""


class ModulesAsOps(torch.fx.Tracer):
    """A tracer that goes into the :data:`AS_OPS` containers (exactly those types, not subclasses,
    whose forward may differ) through their functions above, where called with the input alone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._through: set[int] = set()

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        if type(m) in AS_OPS:
            return id(m) not in self._through
        return super().is_leaf_module(m, module_qualified_name)

    def call_module(self, m: nn.Module, forward: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        as_ops = AS_OPS.get(type(m))
        if as_ops is None or len(args) != 1 or any(v is not None and v is not False for v in kwargs.values()):
            return super().call_module(m, forward, args, kwargs)
        self._through.add(id(m))
        try:
            return super().call_module(m, lambda src, **_: as_ops(m, src), args, kwargs)
        finally:
            self._through.discard(id(m))
