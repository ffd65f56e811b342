"""Tensors ``forward`` builds from sizes alone: which calls qualify, the statement that makes them once
per size, and the helper that keeps them (``agent/builtin/made_from_sizes.py``)."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx
import torch.fx.passes.shape_prop
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
                    "lambda: ((torch.ones(x.size(1), x.size(1), device=x.device).tril()) * (0.5)))")
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


class _Drawn(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = torch.full((x.size(0), x.size(1)), 0.5, device=x.device).bernoulli()
        noisy = nn.functional.dropout1d(torch.ones(x.size(0), x.size(1), device=x.device), 0.5, training=True)
        return x * keep * noisy


class _Written(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = torch.zeros(x.size(0), x.size(1), device=x.device)
        torch.add(x, y, out=m)
        return m * 2


def test_random_draws_and_tensors_written_later_are_never_kept() -> None:
    drawn = {n.name for n in made_from_sizes.made_nodes(size_tracing.traced(_Drawn()))}
    assert "full" in drawn and "ones" in drawn
    assert not {"bernoulli", "dropout1d"} & drawn  # not the same tensor twice
    # zeros written through out= later: made once and kept, it would hold one call's sum forever
    assert made_from_sizes.made_nodes(size_tracing.traced(_Written())) == set()


def test_sizes_passed_by_keyword_and_negative_bases_are_written_as_torch_reads_them() -> None:
    class Signs(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * (-1.0) ** torch.arange(x.size(dim=1), device=x.device)

    gm = size_tracing.traced(Signs())
    nodes = {n.name: n for n in gm.graph.nodes}
    root = next(n for n in gm.graph.nodes if n.target is operator.pow)
    text = made_from_sizes.statement(root, nodes, {}, compute=True)
    assert "x.size(dim=1)" in text and "((-1.0) ** (torch.arange(" in text, text
    x = torch.randn(3, 5)
    made = eval(text.split("lambda: ", 1)[1][:-1], {"torch": torch, "x": x})  # noqa: S307 (our own generated source)
    assert torch.equal(made, (-1.0) ** torch.arange(5))


def test_a_strict_task_computes_no_arithmetic_on_made_tensors_in_torch() -> None:
    class Scaled(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + (torch.arange(x.size(-1), device=x.device) * 4).to(torch.int8)

    gm = size_tracing.traced(Scaled())
    torch.fx.passes.shape_prop.ShapeProp(gm).propagate(torch.randn(2, 6))
    nodes = {n.name: n for n in gm.graph.nodes}
    for name in ("mul", "to"):
        with pytest.raises(CannotCover, match="task is strict"):
            made_from_sizes.statement(nodes[name], nodes, {}, compute=False)


OUT_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        m = x * 0
        torch.add(x, y, out=m)
        return m * 2


def get_inputs():
    return [torch.randn(5, 37), torch.randn(5, 37)]


def get_init_inputs():
    return []
'''


def test_a_write_through_out_is_refused_not_dropped(tmp_path) -> None:  # noqa: ANN001
    """The call writing through ``out=`` has no users: planned as the graph reads, it would be dropped."""
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.tasks import load_task

    path = tmp_path / "written.py"
    path.write_text(OUT_TASK)
    with pytest.raises(CannotCover, match="through `out=`"):
        recognise(load_task(str(path), "full"))
