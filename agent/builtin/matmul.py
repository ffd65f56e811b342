"""Matmul chains: ``linear -> pointwise epilogue -> linear -> ...`` as one Triton GEMM per linear,
each with its bias and epilogue fused (no intermediate tensor for the epilogue's ops).

Recognised from the traced graph: a ``nn.Linear``, ``F.linear`` or a matmul starts a stage; the
pointwise ops after it, up to the next linear, are that stage's epilogue, lowered to a row program
(:mod:`lower`) whose only input is the accumulator. A matmul's right operand is a 2-D parameter or
a 2-D input, either of them possibly transposed (``.T``, ``.t()``, ``transpose``): the kernel reads
it through its strides, so a transposed operand costs no copy. The first stage's left operand may
be a transposed 2-D input for the same reason. ``triu``/``tril`` of the last stage's result is
applied in its epilogue from the tile's row and column indices.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin import size_tracing
from kernelevo.agent.builtin.lower import lower
from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.vocabulary import TRACED_CONSTANT, Capture

MATMUL_TARGETS = (torch.matmul, operator.matmul, torch.mm, torch.bmm)
TRIANGLES = {torch.triu: "triu", torch.tril: "tril"}


@dataclass
class Stage:
    """One GEMM: ``x @ W^T`` (``transposed``: W is [N, K], as nn.Linear holds it) or ``x @ W``."""

    weight: str
    """Python expression of the weight inside ``ModelNew.forward``."""
    transposed: bool
    n: int
    k: int
    epilogue: Program | None
    """The bias and pointwise ops after the GEMM (None: the accumulator is stored as it is)."""
    out_dtype: str
    chain_input: str = ""
    """The name of the input the chain's first linear reads (others are epilogue residuals)."""
    weight_input: bool = False
    """The weight is one of the reference's inputs (``weight`` is its name), not a parameter."""
    a_transposed: bool = False
    """The chain's input is read transposed (a 2-D ``A.T``): only the first stage has this."""
    triangle: tuple[str, int] | None = None
    """``("triu" | "tril", diagonal)`` applied to the result in the epilogue (last stage only)."""
    tail: Program | None = None
    """Row operations after the last stage's pointwise epilogue (a softmax, a sum over the row, a
    norm): a second kernel over the stage's stored output (last stage only)."""
    batched: bool = False
    """Both operands carry the same leading (batch) dims, ``bmm``-style: one GEMM per batch, along the
    grid's second axis (a chain of one stage only)."""


@dataclass
class Linear:
    """What one linear or matmul node reads."""

    source: torch.fx.Node
    """The left operand's node (an input, when ``a_transposed``)."""
    weight: str
    transposed: bool
    bias: Any
    a_transposed: bool = False
    weight_input: bool = False
    views: tuple[torch.fx.Node, ...] = ()
    """The transpose nodes the operands were read through (the kernel reads strides instead)."""


def _transpose_of(node: Any) -> torch.fx.Node | None:
    """The node a transpose view reads (``x.T``, ``x.mT``, ``x.t()``, ``x.transpose(0, 1)``,
    ``x.transpose(-2, -1)``, ``x.permute(1, 0)``), or None."""
    if not isinstance(node, torch.fx.Node):
        return None
    args = node.args
    if node.op == "call_function" and node.target is getattr and args[1] in ("T", "mT"):
        return args[0]
    if (node.op == "call_method" and node.target == "t") or (node.op == "call_function" and node.target is torch.t):
        return args[0]
    if (node.op == "call_method" and node.target == "transpose") or (
            node.op == "call_function" and node.target is torch.transpose):
        # any two dims: on a matrix every pair swaps its two; on a batch of matrices the batched
        # kernel accepts only the last two (``_swaps_last_two``)
        if len(args) == 3 and all(isinstance(d, int) for d in args[1:]) and args[1] != args[2]:
            return args[0]
    if node.op == "call_method" and node.target == "permute":
        dims = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
        if tuple(dims) == (1, 0):
            return args[0]
    return None


def _operand(node: Any) -> tuple[torch.fx.Node, bool, tuple[torch.fx.Node, ...]] | None:
    """(the parameter or input a matmul operand reads, read transposed or not, the views between)."""
    views: list[torch.fx.Node] = []
    flipped = False
    while (inner := _transpose_of(node)) is not None:
        views.append(node)
        node, flipped = inner, not flipped
    if isinstance(node, torch.fx.Node) and node.op in ("get_attr", "placeholder"):
        return node, flipped, tuple(views)
    return None


def _einsum_as_matmul(node: torch.fx.Node) -> tuple[Any, Any, bool] | None:
    """``(left, right, right transposed)`` for an einsum that is a matmul with a 2-D right operand
    contracting the left's last dimension (``"bijl,lk->bijk"``, or ``"bl,kl->bk"`` for a right operand
    held as [N, K]; no ellipsis) or a batched matmul of two operands, else None."""
    if not (node.op == "call_function" and node.target is torch.einsum and len(node.args) == 3
            and isinstance(node.args[0], str)):
        return None
    equation = node.args[0].replace(" ", "")
    batched = _einsum_as_batched_matmul(equation)
    if batched is not None:
        return node.args[1], node.args[2], batched
    found = re.fullmatch(r"([a-z]*)([a-z]),([a-z])([a-z])->([a-z]*)", equation)
    if found is None:
        return None
    batch, k, first, second, out = found.groups()
    if len(set(batch + k)) != len(batch + k):
        return None
    if first == k and second not in batch + k and out == batch + second:
        return node.args[1], node.args[2], False
    if second == k and first not in batch + k and out == batch + first:
        return node.args[1], node.args[2], True
    return None


def _einsum_as_batched_matmul(equation: str) -> bool | None:
    """Whether the right operand is read transposed, for an einsum that is a batched matmul of two
    operands with the same batch dims (``"bik,bkj->bij"``, or ``"bik,bjk->bij"`` transposed); None for
    any other equation."""
    if "." in equation or equation.count(",") != 1 or "->" not in equation:
        return None
    operands, out = equation.split("->")
    left, right = operands.split(",")
    if not (len(left) == len(right) == len(out) >= 3) or len(set(left + right[-2:])) != len(left) + 1:
        return None
    batch, (i, k) = left[:-2], left[-2:]
    j = (set(right[-2:]) - {k}).pop() if k in right[-2:] else None
    if j is None or right[:-2] != batch or out != batch + i + j:
        return None
    return right[-2:] == j + k


def _linear(gm: torch.fx.GraphModule, node: torch.fx.Node) -> Linear | None:
    """What a linear layer or a matmul reads, None for other nodes, CannotCover for matmuls the
    kernel cannot take."""
    if node.op == "call_module":
        sub = gm.get_submodule(str(node.target))
        if isinstance(sub, nn.Linear):
            if len(node.args) != 1 or node.kwargs:
                raise CannotCover("a linear layer called with its input by keyword (covered: `self.fc(x)`)")
            bias = f"{node.target}.bias" if sub.bias is not None else None
            return Linear(node.args[0], f"self.{node.target}.weight", True, bias)
        return None
    if node.op == "call_function" and node.target is F.linear:
        weight = node.args[1] if len(node.args) > 1 else node.kwargs.get("weight")
        bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if isinstance(weight, torch.fx.Node) and weight.op == "get_attr":
            return Linear(node.args[0], f"self.{weight.target}", True, bias)
        raise CannotCover("F.linear with a weight that is not a parameter")
    einsum = _einsum_as_matmul(node)
    if einsum is not None or (node.op == "call_function" and node.target in MATMUL_TARGETS) or (
            node.op == "call_method" and node.target in ("matmul", "mm", "bmm")):
        left_arg, right_arg, flip = einsum if einsum is not None else (node.args[0], node.args[1], False)
        right = _operand(right_arg)
        if right is None:
            raise CannotCover("a matmul whose right operand is computed (covered: a parameter or an input, "
                              "possibly transposed)")
        weight, transposed, views = right
        if weight.op == "get_attr" and str(weight.target).startswith(TRACED_CONSTANT):
            raise CannotCover("a matmul with a tensor made in forward (it lives on the traced module, which a "
                              "generated ModelNew is not)")
        transposed ^= flip
        left = _operand(left_arg)
        a_transposed = left is not None and left[1] and left[0].op == "placeholder"
        source = left[0] if a_transposed else left_arg
        views += left[2] if a_transposed else ()
        if weight.op == "get_attr":
            return Linear(source, f"self.{weight.target}", transposed, None, a_transposed, False, views)
        return Linear(source, weight.name, transposed, None, a_transposed, True, views)
    return None


def _triangle(node: torch.fx.Node) -> tuple[str, int] | None:
    """``("triu" | "tril", diagonal)`` for a triu/tril node, else None."""
    if node.op == "call_function" and node.target in TRIANGLES:
        kind = TRIANGLES[node.target]
    elif node.op == "call_method" and node.target in ("triu", "tril"):
        kind = str(node.target)
    else:
        return None
    diagonal = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
    return (kind, diagonal) if isinstance(diagonal, int) else None


def _param(gm: torch.fx.GraphModule, expression: str) -> torch.Tensor:
    obj: Any = gm
    for part in expression.removeprefix("self.").split("."):
        obj = getattr(obj, part)
    return obj


def lower_chain(model: nn.Module, inputs: list[Any]) -> list[Stage]:
    """The stages of a matmul chain, or CannotCover."""
    try:
        gm = size_tracing.traced(model)
    except Exception as exc:
        raise CannotCover(f"the reference could not be traced with torch.fx ({type(exc).__name__}: {exc})") from None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs) or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise CannotCover("matmul chains are covered for tensor inputs only")
    # The chain's input is what the first linear reads; any other input may only be a matmul's right
    # operand or be added in an epilogue (a residual stream, say), with the shape of that stage's output.
    first = next((n for n in gm.graph.nodes if n.op.startswith("call") and _linear(gm, n) is not None), None)
    chain_input = _linear(gm, first).source if first is not None else placeholders[0]
    if chain_input not in placeholders:
        raise CannotCover("ops before the first linear are not covered in a matmul chain")
    placeholders = [chain_input] + [p for p in placeholders if p is not chain_input]
    capture = Capture(gm)
    try:
        capture.run(*inputs)
    except Exception as exc:
        raise CannotCover(f"the reference does not run on its small inputs ({exc})") from None
    groups = _groups(gm, chain_input)
    stages = []
    for linear, found, epilogue_nodes in groups:
        triangle = _triangle(epilogue_nodes[-1]) if epilogue_nodes else None
        if triangle is not None and epilogue_nodes[-1].args[0] is not (epilogue_nodes[-2] if len(epilogue_nodes) > 1
                                                                        else linear):
            raise CannotCover("triu/tril of something other than the last op's result")
        if triangle is not None:
            if linear is not groups[-1][0] or capture.seen[linear.name].dim() != 2:
                raise CannotCover("triu/tril is covered on the last matmul's 2-D result only")
            epilogue_nodes = epilogue_nodes[:-1]
        if found.a_transposed and capture.seen[chain_input.name].dim() != 2:
            raise CannotCover("a transposed left operand is covered for a 2-D input only")
        w = capture.seen[found.weight] if found.weight_input else _param(gm, found.weight)
        batched = w.dim() > 2
        if batched:
            _check_batched(found, w, capture.seen[chain_input.name], len(groups))
        elif w.dim() != 2:
            raise CannotCover(f"the matmul's right operand {found.weight} is not a matrix")
        elif any(not _swaps_last_two(v, 2) for v in found.views):
            raise CannotCover("a transpose of a matrix that swaps a dim with itself")
        n, k = (w.shape[-2], w.shape[-1]) if found.transposed else (w.shape[-1], w.shape[-2])
        acc = capture.seen[linear.name]
        tail = None
        try:
            program = _epilogue(gm, linear, found.bias, epilogue_nodes, acc, capture, placeholders[0],
                                placeholders[1:])
        except CannotCover as exc:
            if linear is not groups[-1][0] or triangle is not None or "reduction after" not in str(exc):
                raise
            epilogue_nodes, program, tail = _split_tail(gm, linear, found.bias, epilogue_nodes, acc, capture,
                                                        placeholders)
        if batched and program is not None and any(o.kind == "row" for o in program.operands[1:]):
            raise CannotCover("a batched matmul's epilogue may read per-column values and numbers, not another "
                              "tensor of its output's shape")
        out = capture.seen[epilogue_nodes[-1].name] if epilogue_nodes else acc
        stages.append(Stage(weight=found.weight, transposed=found.transposed, n=int(n), k=int(k), epilogue=program,
                            out_dtype=str(out.dtype).removeprefix("torch."), chain_input=placeholders[0].name,
                            weight_input=found.weight_input, a_transposed=found.a_transposed, triangle=triangle,
                            tail=tail, batched=batched))
    return stages


def _check_batched(found: Linear, w: torch.Tensor, left: torch.Tensor, stages: int) -> None:
    """CannotCover unless a matmul with a right operand of more than 2 dims is one the batched kernel
    takes: one stage, batch dims that broadcast (either operand may hold fewer or ones, read in place),
    the left read as it is, the right read as it is or with its last two dims swapped."""
    if stages != 1:
        raise CannotCover("a chain of batched matmuls is not covered (one batched matmul, with its epilogue)")
    if left.dim() < 2:
        raise CannotCover(f"a vector times a batch of matrices ({list(left.shape)} @ {list(w.shape)}) is not "
                          "covered (a batched matmul takes matrices on both sides)")
    if found.a_transposed or any(not _swaps_last_two(v, w.dim()) for v in found.views):
        raise CannotCover("a batched matmul's operands are covered as they are or with their last two dims swapped")


def _swaps_last_two(view: torch.fx.Node, ndim: int) -> bool:
    """Whether a transpose view of a tensor of ``ndim`` dims swaps exactly its last two (``transpose(1,
    -1)`` of a matrix swaps nothing; ``.T`` of a batch reverses every dim)."""
    if view.op == "call_function" and view.target is getattr:
        return view.args[1] == "mT" or ndim == 2
    if (view.op == "call_method" and view.target == "transpose") or (
            view.op == "call_function" and view.target is torch.transpose):
        dims = {int(d) % ndim for d in view.args[1:3]}
        return dims == {ndim - 2, ndim - 1}
    return ndim == 2  # .t() and permute(1, 0), which only a matrix takes


def _split_tail(gm: torch.fx.GraphModule, linear: torch.fx.Node, bias: Any, nodes: list[torch.fx.Node],
                acc: torch.Tensor, capture: Capture,
                placeholders: list[torch.fx.Node]) -> tuple[list[torch.fx.Node], Program | None, Program]:
    """Split the last stage's ops into a pointwise epilogue and a row program over its stored output
    (the longest epilogue for which both halves lower): (epilogue nodes, epilogue, tail)."""
    why = "a reduction after a linear that no split into an epilogue and a row kernel covers"
    for k in range(len(nodes) - 1, -1, -1):
        boundary = nodes[k - 1] if k else linear
        rest = nodes[k:]
        inside = {boundary, *rest}
        if any(isinstance(a, torch.fx.Node) and a not in inside and a.op != "get_attr"
               for n in rest for a in n.all_input_nodes):
            continue  # the tail would read something other than the stored output and parameters
        try:
            head = _epilogue(gm, linear, bias, nodes[:k], acc, capture, placeholders[0], placeholders[1:])
            tail = _tail_program(gm, boundary, rest, capture)
        except CannotCover as exc:
            why = f"a reduction after a linear: {exc}"
            continue
        return nodes[:k], head, tail
    raise CannotCover(why)


def _tail_program(gm: torch.fx.GraphModule, boundary: torch.fx.Node, nodes: list[torch.fx.Node],
                  capture: Capture) -> Program:
    """``nodes`` as a row program whose one input, ``h``, is ``boundary``'s value."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {boundary: graph.placeholder("h")}

    def mapped(n: torch.fx.Node) -> torch.fx.Node:
        if n not in env:
            env[n] = graph.get_attr(str(n.target))
        return env[n]

    for node in nodes:
        env[node] = graph.node_copy(node, mapped)
    graph.output(env[nodes[-1]])
    program = lower(torch.fx.GraphModule(gm, graph), [capture.seen[boundary.name]])
    if program.torch_prefix or program.position_rank or any(o.kind == "value" for o in program.operands):
        raise CannotCover("the row operations after the linear need torch")
    return program


def _groups(gm: torch.fx.GraphModule,
            chain_input: torch.fx.Node) -> list[tuple[torch.fx.Node, Linear, list[torch.fx.Node]]]:
    """Each linear node with what it reads and the nodes after it, up to the next linear."""
    groups: list[tuple[torch.fx.Node, Linear, list[torch.fx.Node]]] = []
    views = {view for n in gm.graph.nodes if n.op.startswith("call") and (found := _linear(gm, n)) is not None
             for view in found.views}
    output = None
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") or node in views:
            continue
        if node.op == "output":
            output = node.args[0]
            continue
        found = _linear(gm, node)
        if found is not None:
            last = groups[-1][2][-1] if groups and groups[-1][2] else (groups[-1][0] if groups else chain_input)
            if found.source is not last:
                raise CannotCover("a linear whose input is not the previous stage's result")
            if groups and found.a_transposed:
                raise CannotCover("only the first matmul's left operand may be read transposed")
            groups.append((node, found, []))
            continue
        if not groups:
            raise CannotCover("ops before the first linear are not covered in a matmul chain")
        groups[-1][2].append(node)
    if not groups:
        raise CannotCover("no linear layer or matmul")
    last_node = groups[-1][2][-1] if groups[-1][2] else groups[-1][0]
    if output is not last_node:
        raise CannotCover("the reference's output is not the last stage's result")
    return groups


def _epilogue(gm: torch.fx.GraphModule, linear: torch.fx.Node, bias: Any, nodes: list[torch.fx.Node],
              acc: torch.Tensor, capture: Capture, chain_input: torch.fx.Node,
              extra_inputs: Sequence[torch.fx.Node] = ()) -> Program | None:
    """The epilogue as its own graph (inputs: the GEMM's accumulator, before the bias, and, for a
    residual, the chain's input or another input of the stage's output shape), lowered."""
    if bias is None and not nodes:
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    start = graph.placeholder("acc")
    example = [acc]
    if isinstance(bias, torch.fx.Node) and bias.op != "get_attr":
        # A bias passed to forward (a captured region's, computed before it): an input read per column.
        if bias not in extra_inputs or capture.seen[bias.name].shape != acc.shape[-1:]:
            raise CannotCover("a linear's bias that is neither a parameter nor an input of one value per column")
        b = graph.placeholder(bias.name)
        example.append(capture.seen[bias.name])
        start = graph.call_function(operator.add, (start, b))
    elif bias is not None:
        b = graph.get_attr(bias) if isinstance(bias, str) else graph.get_attr(str(bias.target))
        start = graph.call_function(operator.add, (start, b))
    env[linear] = start

    def mapped(n: torch.fx.Node) -> torch.fx.Node:
        if n in env:
            return env[n]
        if n.op == "get_attr":
            env[n] = graph.get_attr(str(n.target))
            return env[n]
        if n is chain_input and capture.seen[n.name].shape == acc.shape:
            # A residual: the chain's input added back (same shape as this stage's output).
            env[n] = graph.placeholder("residual")
            example.append(capture.seen[n.name])
            return env[n]
        if n in extra_inputs and capture.seen[n.name].shape == acc.shape:
            # Another input of the output's shape (a transformer's residual stream): read per row.
            env[n] = graph.placeholder(n.name)
            example.append(capture.seen[n.name])
            return env[n]
        raise CannotCover(f"the epilogue uses `{n.name}`, which is not the stage's result, a parameter or a "
                          "residual input of the stage's output shape")

    for node in nodes:
        env[node] = graph.node_copy(node, mapped)
    graph.output(env[nodes[-1]] if nodes else start)
    # Placeholders must come first in an fx graph: move the residuals' next to the accumulator's.
    for node in reversed([n for n in graph.nodes if n.op == "placeholder" and n.target != "acc"]):
        next(iter(graph.nodes)).append(node)
    sub = torch.fx.GraphModule(gm, graph)
    program = lower(sub, example)
    if any(o.kind == "value" for o in program.operands):
        raise CannotCover("a number passed to forward after a linear (covered: in pointwise and row kernels)")
    if program.position_rank:
        raise CannotCover("positions made with arange after a linear (covered: in pointwise and row kernels)")
    if program.kind != "pointwise":
        raise CannotCover("a reduction after a linear is not covered in a matmul chain")
    if program.main_chunks > 1:  # the tile holds columns of one part: the pairs are planned as their own kernel
        raise CannotCover("a chunk of a linear's output is not covered in its epilogue")
    if any(o.kind in ("channel", "per_row", "view") for o in program.operands):
        raise CannotCover("a per-channel or per-row value (shaped [C, 1]) after a linear is not covered in a "
                          "matmul chain")
    if bias is not None:
        # Eager (cuBLAS) adds the bias to the fp32 accumulator and rounds once: so do we.
        program.nodes[0].round_to = None
    return program
