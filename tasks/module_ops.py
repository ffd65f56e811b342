"""torch.nn containers whose ``forward`` torch.fx cannot trace, captured as the modules they call.

``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``, their stacks and ``nn.Transformer`` decide in Python, on
the input's rank, dtype, sizes and flags, whether to take a fused fast path or which mask to build;
a traced input has none of those values, so tracing stops there and the layer would stay one opaque
module that no task can re-create. With no masks their computation is plain: attention (and the
decoder's attention to the encoder's output), feed-forward, residuals and norms, in the order
``norm_first`` says. The tracer below records that computation in terms of the layer's own
submodules (``self_attn``, ``linear1``, ``norm1``...), each then a node like any other module call of
the network, so regions can be cut through the layer. A container called with a mask or a causal
flag is recorded as one module call, as before: it stays in PyTorch.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch.fx
import torch.nn as nn


def _residual(x: Any, blocks: list[tuple[nn.Module, Callable[[Any], Any]]], norm_first: bool) -> Any:
    """Each (norm, block) as a residual: ``x + block(norm(x))`` with the norm first, else
    ``norm(x + block(x))`` (the layers' ``norm_first``)."""
    for norm, block in blocks:
        x = x + block(norm(x)) if norm_first else norm(x + block(x))
    return x


def _attention(attn: nn.MultiheadAttention, dropout: nn.Module, memory: Any = None) -> Callable[[Any], Any]:
    """Attention of x to itself, or to ``memory`` (the decoder's cross-attention), then its dropout."""
    def block(x: Any) -> Any:
        keys = x if memory is None else memory
        return dropout(attn(x, keys, keys, need_weights=False)[0])

    return block


def _feed_forward(layer: nn.Module, dropout: nn.Module) -> Callable[[Any], Any]:
    return lambda x: dropout(layer.linear2(layer.dropout(layer.activation(layer.linear1(x)))))


def _encoder_layer(layer: nn.TransformerEncoderLayer, src: Any) -> Any:
    return _residual(src, [(layer.norm1, _attention(layer.self_attn, layer.dropout1)),
                           (layer.norm2, _feed_forward(layer, layer.dropout2))], layer.norm_first)


def _encoder(encoder: nn.TransformerEncoder, src: Any) -> Any:
    out = src
    for layer in encoder.layers:  # called as torch calls them (a layer of the user's own reads these too)
        out = layer(out, src_mask=None, is_causal=False, src_key_padding_mask=None)
    return encoder.norm(out) if encoder.norm is not None else out


def _decoder_layer(layer: nn.TransformerDecoderLayer, tgt: Any, memory: Any) -> Any:
    return _residual(tgt, [(layer.norm1, _attention(layer.self_attn, layer.dropout1)),
                           (layer.norm2, _attention(layer.multihead_attn, layer.dropout2, memory)),
                           (layer.norm3, _feed_forward(layer, layer.dropout3))], layer.norm_first)


def _decoder(decoder: nn.TransformerDecoder, tgt: Any, memory: Any) -> Any:
    out = tgt
    for layer in decoder.layers:
        out = layer(out, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)
    return decoder.norm(out) if decoder.norm is not None else out


def _transformer(transformer: nn.Transformer, src: Any, tgt: Any) -> Any:
    memory = transformer.encoder(src, mask=None, src_key_padding_mask=None, is_causal=None)
    return transformer.decoder(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                               memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)


AS_OPS: dict[type[nn.Module], Callable[..., Any]] = {
    nn.TransformerEncoderLayer: _encoder_layer,
    nn.TransformerEncoder: _encoder,
    nn.TransformerDecoderLayer: _decoder_layer,
    nn.TransformerDecoder: _decoder,
    nn.Transformer: _transformer,
}
"""Container types traced through, by the function that writes their forward as submodule calls,
given the inputs the function names (the forward's own parameter names) and no other argument
(every other one None or False)."""


def _plain_inputs(m: nn.Module, as_ops: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> list[Any] | None:
    """The inputs ``as_ops`` takes, where ``m`` is called with them alone; else None."""
    parameters = list(inspect.signature(type(m).forward).parameters)[1:]
    if len(args) > len(parameters):
        return None
    given = {**dict(zip(parameters, args, strict=False)), **kwargs}
    inputs = list(inspect.signature(as_ops).parameters)[1:]
    if any(name not in given for name in inputs) or any(
            value is not None and value is not False for name, value in given.items() if name not in inputs):
        return None
    return [given[name] for name in inputs]


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
        inputs = None if as_ops is None else _plain_inputs(m, as_ops, args, kwargs)
        if inputs is None:
            return super().call_module(m, forward, args, kwargs)
        self._through.add(id(m))
        try:
            return super().call_module(m, lambda *_, **__: as_ops(m, *inputs), args, kwargs)
        finally:
            self._through.discard(id(m))
