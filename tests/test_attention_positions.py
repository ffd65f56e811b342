"""Attention masks made from positions: read from the graph, their bands, and the same values in torch."""

from __future__ import annotations

import math

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp

from kernelevo.agent.builtin.attention_positions import (
    UNBOUNDED,
    attention_with_positions,
    band,
    evaluate,
    kernel_function,
    simplified,
    triton_text,
)
from kernelevo.agent.builtin.position_masks import rewrite

I, J = ("i", 0, 1), ("j", 0, 1)


def test_a_sliding_window_is_a_band_of_distances() -> None:
    window = ("and", ("le", J, I), ("lt", ("sub", I, J), ("number", 512)))
    assert band(window, "bool") == (-511, 0)  # j - i > -512: -511 for whole distances
    prefix = ("or", ("lt", J, ("number", 4)), ("le", J, ("add", I, ("number", 8))))
    assert band(prefix, "bool") == (-UNBOUNDED, UNBOUNDED)  # the first keys are seen by every query


def test_an_additive_triangle_of_minus_inf_bounds_the_keys_it_hides() -> None:
    upper = ("where", ("ge", ("sub", J, I), ("number", 1)), ("number", -math.inf), ("number", 0.0))
    assert band(upper, "additive") == (-UNBOUNDED, 0)  # hidden where j - i >= 1: seen up to the diagonal
    penalty = ("mul", ("number", -0.5), ("abs", ("sub", I, J)))
    assert band(penalty, "additive") == (-UNBOUNDED, UNBOUNDED)


def test_a_triangle_of_ones_compared_reads_as_its_condition() -> None:
    condition = ("le", ("sub", J, I), ("number", 0))
    ones = ("eq", ("where", condition, ("number", 1.0), ("number", 0.0)), ("number", 1))
    assert simplified(ones) == condition
    assert simplified(("not", ("not", condition))) == condition
    assert simplified(("cast", "bool", ("where", condition, ("number", 0.0), ("number", 1.0)))) == ("not", condition)


def test_the_kernel_text_names_the_positions_as_torch_computes_them() -> None:
    spec = ("and", ("le", J, I), ("lt", ("sub", ("i", 3, 2), J), ("number", 5)))
    text = triton_text(spec)
    i, j = torch.arange(6)[:, None], torch.arange(9)[None, :]
    assert torch.equal(eval(text, {"i": i, "j": j}), evaluate(spec, i, j))  # the operators mean the same in both
    assert "(i * 2 + 3)" in text


class _Window(nn.Module):
    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = window

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.shape[2]
        i = torch.arange(t, device=q.device).unsqueeze(1)
        j = torch.arange(t, device=q.device).unsqueeze(0)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (i - j < self.window))


class _Product(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        i = torch.arange(q.shape[2])
        return F.scaled_dot_product_attention(q, k, v, attn_mask=(i[:, None] * i[None, :]) > 3)


class _FromInput(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=q.sum(-1, keepdim=True) > 0)


def _traced(model: nn.Module, inputs: list[torch.Tensor]) -> torch.fx.GraphModule:
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
    return gm


def test_a_mask_of_positions_is_replaced_and_computes_the_same() -> None:
    inputs = [torch.randn(2, 3, 20, 8) for _ in range(3)]
    model = _Window(5)
    gm = _traced(model, inputs)
    assert rewrite(gm)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [attention_with_positions]  # the mask's arange, compares and sizes are gone
    assert torch.allclose(gm(*inputs), model(*inputs), atol=1e-6)


def test_masks_that_are_not_positions_alone_stay_with_their_reason() -> None:
    inputs = [torch.randn(1, 2, 12, 8) for _ in range(3)]
    gm = _traced(_FromInput(), inputs)
    assert not rewrite(gm)  # it reads q: not made from positions
    gm = _traced(_Product(), inputs)
    assert not rewrite(gm)
    reasons = [n.meta.get("positions_refused") for n in gm.graph.nodes if n.meta.get("positions_refused")]
    assert reasons == ["`mul`: a product of two positions"]  # int32 in the kernel could overflow


def test_bands_are_read_only_where_the_kernel_computes_the_same_comparison() -> None:
    """A cast to an integer truncates (chunked causal masks), and a fractional coefficient compares in
    fp32 what a float64 bound would cut: neither bounds the keys visited, so none is skipped."""
    third = ("mul", I, ("number", 1 / 3))
    chunked = ("le", ("cast", "int32", ("mul", J, ("number", 1 / 3))), ("cast", "int32", third))
    assert band(chunked, "bool") == (-UNBOUNDED, UNBOUNDED)
    seconds = ("mul", ("sub", I, J), ("number", 0.07))
    assert band(("and", ("ge", seconds, ("number", 0)), ("le", seconds, ("number", 4.55))), "bool") == \
        (-UNBOUNDED, UNBOUNDED)  # d * 0.07 <= 4.55 holds at d = 65 in fp32
    halves = ("lt", ("mul", ("number", 2), ("sub", J, I)), ("number", 3))
    assert band(halves, "bool") == (-UNBOUNDED, 1)  # 2d < 3: d <= 1


class _Masked(nn.Module):
    def __init__(self, make) -> None:  # noqa: ANN001
        super().__init__()
        self.make = make

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.shape[2]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.make(torch.arange(t)[:, None],
                                                                            torch.arange(t)[None, :], t))


def _rewritten(make) -> tuple[bool, list[str], torch.fx.GraphModule]:  # noqa: ANN001
    inputs = [torch.randn(1, 2, 24, 8) for _ in range(3)]
    gm = torch.fx.symbolic_trace(_Masked(make))
    ShapeProp(gm).propagate(*inputs)
    changed = rewrite(gm)
    return changed, [n.meta["positions_refused"] for n in gm.graph.nodes if "positions_refused" in n.meta], gm


def test_masks_the_kernel_would_compute_otherwise_are_refused_with_a_reason() -> None:
    changed, reasons, _ = _rewritten(lambda i, j, t: torch.arange(0, t / 3, 1 / 3)[:, None] >= j * 0)
    assert not changed and "whole number" in reasons[0]  # torch rounds start + k*step from float64
    changed, reasons, _ = _rewritten(lambda i, j, t: torch.full((t, t), float("-inf")).triu(1).long() == 0)
    assert not changed and "cast to" in reasons[0]  # an infinity cast to an integer: no crash


def test_booleans_added_are_their_or_and_wide_products_are_computed_in_int64() -> None:
    inputs = [torch.randn(1, 2, 24, 8) for _ in range(3)]
    changed, _, gm = _rewritten(lambda i, j, t: (i >= j) + (i - j < 4))
    assert changed and gm.graph.find_nodes(op="call_function", target=attention_with_positions)[0].kwargs[
        "positions"][0] == "or"
    torch.testing.assert_close(gm(*inputs), _Masked(lambda i, j, t: (i >= j) | (i - j < 4))(*inputs))
    changed, _, gm = _rewritten(lambda i, j, t: i * 268435456 >= j * 268435456)
    node = gm.graph.find_nodes(op="call_function", target=attention_with_positions)[0]
    text = kernel_function({"kind": "bool", "positions": node.kwargs["positions"]})
    assert "i = i.to(tl.int64)" in text
