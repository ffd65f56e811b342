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
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevo.agent.builtin import codegen
from kernelevo.agent.builtin.lower import lower
from kernelevo.agent.builtin.program import CannotCover, Program

MATMUL_TARGETS = (torch.matmul, operator.matmul, torch.mm)
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


class _Capture(torch.fx.Interpreter):
    """Runs the graph and keeps every node's value (for example inputs of the epilogues)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.seen: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        self.seen[n.name] = value
        return value


def _transpose_of(node: Any) -> torch.fx.Node | None:
    """The node a 2-D transpose view reads (``x.T``, ``x.mT``, ``x.t()``, ``x.transpose(0, 1)``,
    ``x.permute(1, 0)``), or None."""
    if not isinstance(node, torch.fx.Node):
        return None
    args = node.args
    if node.op == "call_function" and node.target is getattr and args[1] in ("T", "mT"):
        return args[0]
    if (node.op == "call_method" and node.target == "t") or (node.op == "call_function" and node.target is torch.t):
        return args[0]
    if (node.op == "call_method" and node.target == "transpose") or (
            node.op == "call_function" and node.target is torch.transpose):
        if len(args) == 3 and {args[1], args[2]} in ({0, 1}, {-1, -2}, {0, -1}, {1, -2}):
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


def _linear(gm: torch.fx.GraphModule, node: torch.fx.Node) -> Linear | None:
    """What a linear layer or a matmul reads, None for other nodes, CannotCover for matmuls the
    kernel cannot take."""
    if node.op == "call_module":
        sub = gm.get_submodule(str(node.target))
        if isinstance(sub, nn.Linear):
            bias = f"{node.target}.bias" if sub.bias is not None else None
            return Linear(node.args[0], f"self.{node.target}.weight", True, bias)
        return None
    if node.op == "call_function" and node.target is F.linear:
        weight = node.args[1] if len(node.args) > 1 else node.kwargs.get("weight")
        bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        if isinstance(weight, torch.fx.Node) and weight.op == "get_attr":
            return Linear(node.args[0], f"self.{weight.target}", True, bias)
        raise CannotCover("F.linear with a weight that is not a parameter")
    if (node.op == "call_function" and node.target in MATMUL_TARGETS) or (
            node.op == "call_method" and node.target in ("matmul", "mm")):
        right = _operand(node.args[1])
        if right is None:
            raise CannotCover("a matmul whose right operand is computed (covered: a parameter or an input, "
                              "possibly transposed)")
        weight, transposed, views = right
        left = _operand(node.args[0])
        a_transposed = left is not None and left[1] and left[0].op == "placeholder"
        source = left[0] if a_transposed else node.args[0]
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
        gm = torch.fx.symbolic_trace(model)
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
    capture = _Capture(gm)
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
        if w.dim() != 2:
            raise CannotCover(f"the matmul's right operand {found.weight} is not a matrix (a batched matmul of "
                              "two inputs is not covered)")
        n, k = (w.shape[0], w.shape[1]) if found.transposed else (w.shape[1], w.shape[0])
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
        out = capture.seen[epilogue_nodes[-1].name] if epilogue_nodes else acc
        stages.append(Stage(weight=found.weight, transposed=found.transposed, n=int(n), k=int(k), epilogue=program,
                            out_dtype=str(out.dtype).removeprefix("torch."), chain_input=placeholders[0].name,
                            weight_input=found.weight_input, a_transposed=found.a_transposed, triangle=triangle,
                            tail=tail))
    return stages


def _split_tail(gm: torch.fx.GraphModule, linear: torch.fx.Node, bias: Any, nodes: list[torch.fx.Node],
                acc: torch.Tensor, capture: _Capture,
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
                  capture: _Capture) -> Program:
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
    if program.torch_prefix or any(o.kind == "value" for o in program.operands):
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
              acc: torch.Tensor, capture: _Capture, chain_input: torch.fx.Node,
              extra_inputs: Sequence[torch.fx.Node] = ()) -> Program | None:
    """The epilogue as its own graph (inputs: the GEMM's accumulator, before the bias, and, for a
    residual, the chain's input or another input of the stage's output shape), lowered."""
    if bias is None and not nodes:
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    start = graph.placeholder("acc")
    if bias is not None:
        b = graph.get_attr(bias) if isinstance(bias, str) else graph.get_attr(str(bias.target))
        start = graph.call_function(operator.add, (start, b))
    env[linear] = start
    example = [acc]

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
    if program.kind != "pointwise":
        raise CannotCover("a reduction after a linear is not covered in a matmul chain")
    if bias is not None:
        # Eager (cuBLAS) adds the bias to the fp32 accumulator and rounds once: so do we.
        program.nodes[0].round_to = None
    return program


MATMUL_KERNEL = '''@triton.jit
def {name}(a_ptr, w_ptr, {operands}out_ptr, M, N, K, stride_am, stride_ak, stride_wn, stride_wk,
{pad}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
{pad}EVEN_K: tl.constexpr, WIDE: tl.constexpr, WIDEN: tl.constexpr{split_arg}):
    # Grouped ordering: GROUP_M row-blocks share each column-block of W while it is in L2.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    # Loads wrap out-of-range rows and columns back into the matrix instead of masking them (their
    # results are never stored): the K loop carries no row or column masks, which keeps registers for
    # the accumulator and lets the loads stay wide. Offsets are 32-bit unless the matrices need 64.
    rows_a = tl.max_contiguous(tl.multiple_of(rows % M, BLOCK_M), BLOCK_M)
    cols_w = tl.max_contiguous(tl.multiple_of(cols % N, BLOCK_N), BLOCK_N)
    if WIDE:
        rows_a = rows_a.to(tl.int64)
        cols_w = cols_w.to(tl.int64)
    a_ptrs = a_ptr + rows_a[:, None] * stride_am + ks[None, :] * stride_ak
    w_ptrs = w_ptr + ks[:, None] * stride_wk + cols_w[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
{k_loop}
        if EVEN_K:
            a = tl.load(a_ptrs)
            w = tl.load(w_ptrs)
        else:
            k_ok = ks < K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
            w = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc{precision})
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk
    row_ok = rows < M
    col_ok = cols < N
    rows64 = rows.to(tl.int64)
    mask = row_ok[:, None] & col_ok[None, :]
{finish}
'''

K_LOOP = "    for k in range(0, tl.cdiv(K, BLOCK_K)):"

TRIANGLE_K_LOOP = '''    # A tile the {kind} zeroes entirely stores zeros without reading A or W: about half the tiles.
    live = {live}
    for k in range(0, tl.cdiv(K, BLOCK_K) * live.to(tl.int32)):'''

TRIANGLE_LIVE = {"triu": "pid_n * BLOCK_N + BLOCK_N - 1 - pid_m * BLOCK_M >= {d}",
                 "tril": "pid_n * BLOCK_N - (pid_m * BLOCK_M + BLOCK_M - 1) <= {d}"}
TRIANGLE_KEEP = {"triu": "cols[None, :] - rows[:, None] >= {d}", "tril": "cols[None, :] - rows[:, None] <= {d}"}

SPLIT_K_LOOP = '''    # Split-K: program (tile, s) sums the s-th share of the K tiles, so that a GEMM with few output
    # tiles and a long K still fills every SM.
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    k_first = tl.program_id(1) * per_split
    a_ptrs += k_first * BLOCK_K * stride_ak
    w_ptrs += k_first * BLOCK_K * stride_wk
    for k in range(k_first, tl.minimum(k_first + per_split, k_tiles)):'''

EPILOGUE = '''    # Epilogue, on the fp32 accumulator while it is still in registers.
{epilogue}{triangle}
    if WIDE:
        out_offsets = rows64[:, None] * N + cols[None, :]
    else:
        out_offsets = rows[:, None] * N + cols[None, :]
    tl.store(out_ptr + out_offsets, {result}.to(out_ptr.dtype.element_ty), mask=mask)'''

SPLIT_K_STORE = '''    # The partial sum goes to slice s of an fp32 workspace; {name}_reduce adds the slices up.
    part = tl.program_id(1).to(tl.int64) * M * N + rows64[:, None] * N + cols[None, :]
    tl.store(out_ptr + part, acc, mask=mask)'''

SPLIT_K_REDUCE = '''@triton.jit
def {name}_reduce(ws_ptr, {operands}out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
{pad}SPLIT_K: tl.constexpr, WIDE: tl.constexpr):
    # Adds the SPLIT_K partial sums of each output tile in a fixed order (deterministic), then the
    # epilogue, rounding once as the unsplit kernel does. Moves SPLIT_K x 4 bytes per output element.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    rows64 = rows.to(tl.int64)
    mask = row_ok[:, None] & col_ok[None, :]
    offsets = rows64[:, None] * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + (M * s).to(tl.int64) * N + offsets, mask=mask, other=0.0)
'''


TMA_KERNEL = '''@triton.jit
def {name}(a_ptr, w_ptr, {operands}out_ptr, M, N, K, stride_a, stride_w, NUM_SMS,
{pad}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
{pad}W_NK: tl.constexpr, WIDE: tl.constexpr, WIDEN: tl.constexpr):
    # Hopper's tensor memory accelerator (TMA): each program describes A and W once, then the copy
    # engine moves whole tiles into shared memory (no per-element address arithmetic, zeros past the
    # edges) while the tensor cores work. A persistent grid (one program per SM) walks the output
    # tiles in grouped order, so that consecutive tiles reuse W's column blocks from L2.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_a, 1], block_shape=[BLOCK_M, BLOCK_K])
    if W_NK:  # nn.Linear's weight: [N, K], K contiguous
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[stride_w, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[K, N], strides=[stride_w, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        first_m = (tile // in_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % group_m
        pid_n = (tile % in_group) // group_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            if W_NK:
                w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T
            else:
                w = w_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            if WIDEN:
                a = a.to(tl.float32)
                w = w.to(tl.float32)
            acc = tl.dot(a, w, acc{precision})
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < M
        col_ok = cols < N
        rows64 = rows.to(tl.int64)
        mask = row_ok[:, None] & col_ok[None, :]
{finish}
'''


def tma_ready(stages: Sequence[Stage], dtype: str) -> str | None:
    """Why the TMA template cannot take these stages (None: it can): a descriptor needs row strides
    that are multiples of 16 bytes."""
    itemsize = getattr(torch, dtype).itemsize
    if any(st.a_transposed for st in stages):
        return "the left operand is read transposed (its rows are not contiguous)"
    for st in stages:
        for what, count in (("K", st.k), ("N", st.n)):
            if count * itemsize % 16:
                return f"a row of {count} ({what}) is not a multiple of 16 bytes"
    return None


def kernel(stage: Stage, index: int, precision: str | None, split_k: int = 1, tma: bool = False) -> str:
    """The fused GEMM kernel of one stage; with ``split_k`` > 1, a kernel that writes partial sums
    and a ``_reduce`` kernel that adds them and applies the epilogue; with ``tma``, the persistent
    TMA kernel."""
    name = f"stage{index}_kernel"
    program = stage.epilogue
    lines: list[str] = []
    operands = ""
    # No epilogue: round the accumulator to the output dtype ourselves (see codegen.ROUND_TO_BF16).
    result = "round_to_bf16(acc)" if stage.out_dtype == "bfloat16" else "acc"
    if program is not None:
        em = codegen.Emitter(program)
        extra = program.operands[1:]  # the first operand is the accumulator
        operands = "".join(f"{o.name}_ptr, {o.name}_stride, " if o.kind == "row" else f"{o.name}_ptr, "
                           for o in extra)
        needed = em.deps(program.output)
        for node in program.nodes:
            if node.name not in needed:
                continue
            if node.op == "load" and node.args[0] == program.operands[0].name:
                lines.append(f"{node.name} = {codegen.rounded(node, 'acc')}")
            else:
                lines.append(em.statement(node))
        result = program.output
    triangle, k_loop = "", K_LOOP
    if stage.triangle is not None:
        kind, d = stage.triangle
        triangle = f"\n    kept = tl.where({TRIANGLE_KEEP[kind].format(d=d)}, {result}, 0.0)"
        result = "kept"
        k_loop = TRIANGLE_K_LOOP.format(kind=kind, live=TRIANGLE_LIVE[kind].format(d=d))
    epilogue = EPILOGUE.format(epilogue="\n".join("    " + line for line in lines) or "    pass", result=result,
                               triangle=triangle)
    precision = f", input_precision=\"{precision}\"" if precision else ""
    if tma:
        return TMA_KERNEL.format(name=name, operands=operands, pad=" " * (len(name) + 5), precision=precision,
                                 finish=textwrap.indent(epilogue, "    "))
    if split_k <= 1:
        return MATMUL_KERNEL.format(name=name, operands=operands, pad=" " * (len(name) + 5), precision=precision,
                                    split_arg="", k_loop=k_loop, finish=epilogue)
    main = MATMUL_KERNEL.format(name=name, operands="", pad=" " * (len(name) + 5), precision=precision,
                                split_arg=", SPLIT_K: tl.constexpr", k_loop=SPLIT_K_LOOP,
                                finish=SPLIT_K_STORE.format(name=name))
    reduce = SPLIT_K_REDUCE.format(name=name, operands=operands, pad=" " * (len(name) + 12))
    return main + "\n\n" + reduce + epilogue + "\n"


def forward(stages: list[Stage], input_name: str, params: dict[str, Any], inputs: Sequence[str] = (),
            tma: bool = False) -> str:
    """``ModelNew.forward``: flatten to [M, K], one launch per stage, restore the leading dims.
    ``inputs``: the reference's arguments in order (default: just ``input_name``); the others than
    ``input_name`` are residuals added in an epilogue, flattened the same way. ``tma``: the
    persistent TMA kernels (:func:`tma_ready` says when they apply)."""
    weights = {st.weight for st in stages if st.weight_input}
    extra_inputs = [x for x in inputs if x != input_name and x not in weights]
    if stages[0].a_transposed:  # the kernel reads A^T through its strides
        start = [f"h = h0 = {input_name}.t()"]
    else:
        start = [f"{input_name} = {input_name}.contiguous()",
                 f"h = h0 = {input_name}.reshape(-1, {input_name}.shape[-1])"]
    body = [*start,
            *[f"{x}_rows = {x}.contiguous().reshape(-1, {x}.shape[-1])" for x in extra_inputs],
            *[f"{w} = {w}.contiguous()" for w in sorted(weights) if tma],
            f"BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = {params['BLOCK_M']}, {params['BLOCK_N']}, {params['BLOCK_K']}, "
            f"{params['GROUP_M']}"]
    if tma:
        body.append("sms = torch.cuda.get_device_properties(h.device).multi_processor_count if h.is_cuda else 4")
    for i, stage in enumerate(stages):
        w = stage.weight
        strides = f"{w}.stride(0), {w}.stride(1)" if stage.transposed else f"{w}.stride(1), {w}.stride(0)"
        cols = []
        for o in stage.epilogue.operands[1:] if stage.epilogue else []:
            if o.kind == "row":
                rows = "h0" if o.source == "residual" else f"{o.source}_rows"
                cols += [rows, f"{rows}.stride(0)"]
            else:
                cols.append(o.source)
        n = f"{w}.shape[0]" if stage.transposed else f"{w}.shape[1]"
        split = params.get("SPLIT_K", 1)
        wide = f"WIDE=max(h.shape[0], {n}) * max(h.shape[1], {n}) >= 2**31"
        body.append(f"out = torch.empty((h.shape[0], {n}), dtype=torch.{stage.out_dtype}, device=h.device)")
        epilogue_args = "".join(c + ", " for c in cols)
        if tma:
            # as many programs as SMs (4 under the CPU interpreter), each looping over output tiles
            body += [f"tiles = triton.cdiv(h.shape[0], BLOCK_M) * triton.cdiv({n}, BLOCK_N)",
                     f"stage{i}_kernel[(min(tiles, sms),)](",
                     f"    h, {w}, {epilogue_args}out, h.shape[0], {n}, h.shape[1], h.stride(0), {w}.stride(0), sms,",
                     "    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,",
                     f"    W_NK={stage.transposed}, {wide}, WIDEN=INTERPRETED,",
                     f"    num_warps={params['num_warps']}, num_stages={params['num_stages']})",
                     "h = out"]
            continue
        tiles = f"triton.cdiv(h.shape[0], BLOCK_M) * triton.cdiv({n}, BLOCK_N)"
        if split > 1:
            body += [f"ws = torch.empty(({split}, h.shape[0], {n}), dtype=torch.float32, device=h.device)",
                     f"grid = ({tiles}, {split})"]
        else:
            body.append(f"grid = ({tiles},)")
        body += [f"stage{i}_kernel[grid](",
                 f"    h, {w}, {'ws, ' if split > 1 else epilogue_args + 'out, '}h.shape[0], {n}, h.shape[1], "
                 f"h.stride(0), h.stride(1), {strides},",
                 "    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,",
                 f"    EVEN_K=h.shape[1] % BLOCK_K == 0, {wide},",
                 "    WIDEN=INTERPRETED," + (f" SPLIT_K={split}," if split > 1 else ""),
                 f"    num_warps={params['num_warps']}, num_stages={params['num_stages']})"]
        if split > 1:
            # 64 x 64 tiles for the reduction: 32 fp32 values per thread, whatever the GEMM's tiles
            body += [f"stage{i}_kernel_reduce[(triton.cdiv(h.shape[0], 64), triton.cdiv({n}, 64))](",
                     f"    ws, {epilogue_args}out, h.shape[0], {n}, BLOCK_M=64, BLOCK_N=64, SPLIT_K={split}, {wide},",
                     "    num_warps=4)"]
        body.append("h = out")
    result = "h" if stages[0].a_transposed else f"h.reshape(*{input_name}.shape[:-1], h.shape[-1])"
    body.append(f"return self._kernelevo_tail({result})" if stages[-1].tail is not None else f"return {result}")
    args = ", ".join(inputs or [input_name])
    return f"def forward(self, {args}):\n" + "\n".join("    " + line for line in body) + "\n"
