"""Recurrent cells called once (``nn.GRUCell``, ``nn.RNNCell``) written as what they compute, so that
the planners see two linear layers (one of the input, one of the state) and the gates between them,
which the matmul and pointwise templates cover. The formulas are torch's:

- GRU: ``r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)``, ``z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)``,
  ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``;
- RNN: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or ReLU, as the cell's ``nonlinearity`` says).

A cell called without a state (zeros in torch), or with a batch of one sample as a vector, is left as
it is.
"""

from __future__ import annotations

import operator

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

CELLS = (nn.GRUCell, nn.RNNCell)


def rewrite_cell(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.fx.Node | None:
    """The ops of the cell ``node`` calls (inserted before it), or None where it is no such call."""
    cell = gm.get_submodule(str(node.target))
    if not isinstance(cell, CELLS):
        return None
    x = node.args[0] if node.args else node.kwargs.get("input")
    h = node.args[1] if len(node.args) > 1 else node.kwargs.get("hx")
    if not all(isinstance(v, torch.fx.Node) and len(getattr(v.meta.get("tensor_meta"), "shape", ())) == 2
               for v in (x, h)):
        return None
    graph, call = gm.graph, gm.graph.call_function
    held = {name: graph.get_attr(f"{node.target}.{name}") if getattr(cell, name) is not None else None
            for name in ("weight_ih", "bias_ih", "weight_hh", "bias_hh")}
    of_input = call(F.linear, (x, held["weight_ih"], held["bias_ih"]))
    of_state = call(F.linear, (h, held["weight_hh"], held["bias_hh"]))
    if isinstance(cell, nn.RNNCell):
        total = call(operator.add, (of_input, of_state))
        return call(torch.tanh if cell.nonlinearity == "tanh" else torch.relu, (total,))
    i_r, i_z, i_n = (call(operator.getitem, (call(torch.chunk, (of_input, 3, 1)), k)) for k in range(3))
    h_r, h_z, h_n = (call(operator.getitem, (call(torch.chunk, (of_state, 3, 1)), k)) for k in range(3))
    reset = call(torch.sigmoid, (call(operator.add, (i_r, h_r)),))
    update = call(torch.sigmoid, (call(operator.add, (i_z, h_z)),))
    candidate = call(torch.tanh, (call(operator.add, (i_n, call(operator.mul, (reset, h_n)))),))
    kept = call(operator.mul, (call(operator.sub, (1.0, update)), candidate))
    return call(operator.add, (kept, call(operator.mul, (update, h))))
