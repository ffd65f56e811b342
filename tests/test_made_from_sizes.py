"""Tensors ``forward`` builds from sizes alone: which calls qualify, the statement that makes them once
per size, and the helper that keeps them (``agent/builtin/made_from_sizes.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn as nn

from kernelevo.agent.builtin import made_from_sizes, size_tracing
from kernelevo.agent.builtin.program import CannotCover


class _Masked(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.size(1)
        m = torch.ones(n, n, device=x.device).tril() * 0.5
        noise = torch.rand_like(m)
        return x @ m + noise + x.sum()


def _graph() -> tuple[torch.fx.GraphModule, dict[str, torch.fx.Node]]:
    gm = size_tracing.traced(_Masked())
    return gm, {n.name: n for n in gm.graph.nodes}


def test_only_deterministic_calls_on_sizes_are_made() -> None:
    gm, nodes = _graph()
    made = made_from_sizes.made_nodes(gm)
    names = {n.name for n in made}
    assert {"size", "getattr_1", "ones", "tril", "mul"} <= names
    assert "rand_like" not in names  # a random draw is not the same tensor twice
    assert not {"matmul", "sum_1", "add"} & names  # the input's values
    assert made_from_sizes.made_root(nodes["mul"], made, torch.zeros(2))
    assert not made_from_sizes.made_root(nodes["tril"], made, torch.zeros(2))  # only made values read it
    assert not made_from_sizes.made_root(nodes["size"], made, 3)  # a number, not a tensor


def test_the_statement_keeps_the_tensor_per_size_and_device() -> None:
    gm, nodes = _graph()
    text = made_from_sizes.statement(nodes["mul"], nodes, {}, compute=True)
    assert text == ("_kernelevo_made_mul = made_from_sizes(self, 'mul', (x.size(1), x.device, ), "
                    "lambda: (torch.ones(x.size(1), x.size(1), device=x.device).tril() * 0.5))")
    # a size forward already holds is read by name, and keys the tensor too
    text = made_from_sizes.statement(nodes["mul"], nodes, {"size": "size"}, compute=True)
    assert "(size, x.device, )" in text and "torch.ones(size, size," in text


def test_a_strict_task_makes_only_what_factories_make() -> None:
    gm, nodes = _graph()
    with pytest.raises(CannotCover, match="computes in torch, and the task is strict"):
        made_from_sizes.statement(nodes["mul"], nodes, {}, compute=False)
    text = made_from_sizes.statement(nodes["ones"], nodes, {}, compute=False)
    assert "torch.ones(x.size(1), x.size(1), device=x.device)" in text
    with pytest.raises(CannotCover, match="not made from sizes alone"):
        made_from_sizes.statement(nodes["add"], nodes, {}, compute=True)


def test_the_numbers_are_those_of_the_size_being_optimised() -> None:
    class Frequencies(nn.Module):
        def __init__(self, half: int) -> None:
            super().__init__()
            self.half = half

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return t[:, None] * torch.exp(torch.arange(self.half, device=t.device) * -0.5)[None]

    small, full = size_tracing.traced(Frequencies(4)), size_tracing.traced(Frequencies(128))
    root = next(n for n in small.graph.nodes if n.name == "exp")
    there = {n.name: n for n in full.graph.nodes}
    assert "torch.arange(128, device=t.device)" in made_from_sizes.statement(root, there, {}, compute=True)


def test_the_helper_makes_again_only_when_the_key_changes() -> None:
    namespace: dict = {"torch": torch}
    exec(made_from_sizes.HELPER_SOURCE, namespace)  # noqa: S102 (our own generated source)
    helper = namespace[made_from_sizes.HELPER]
    owner, made = nn.Module(), []

    def make(n: int) -> torch.Tensor:
        made.append(n)
        return torch.ones(n)

    first = helper(owner, "m", (3,), lambda: make(3))
    assert helper(owner, "m", (3,), lambda: make(3)) is first and made == [3]
    assert helper(owner, "m", (4,), lambda: make(4)).shape == (4,) and made == [3, 4]
    assert helper(owner, "other", (4,), lambda: make(4)) is not None and made == [3, 4, 4]
    assert "_kernelevo_made" not in owner.state_dict()  # kept beside the model, never in a checkpoint
