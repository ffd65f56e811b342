"""The pointwise ops after a tiled kernel's result (a convolution's, a pooling's, a gather's) as an
epilogue on its fp32 accumulator tile, while it is still in registers: per-channel parameters read per
column, single values, and residual inputs of the output's own shape read at its offsets. Shared by
every template whose tile is [output positions, channels]."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kernelevo.agent.builtin import codegen
from kernelevo.agent.builtin.lower import lower
from kernelevo.agent.builtin.program import CannotCover, Node, Program


def chain_after(gm: torch.fx.GraphModule, conv: torch.fx.Node, output: Any) -> list[torch.fx.Node]:
    """The nodes after the convolution, in order, up to the output."""
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    chain = nodes[nodes.index(conv) + 1:]
    if (chain[-1] if chain else conv) is not output:
        raise CannotCover("the reference's output is not the convolution's result or what follows it")
    return chain


def epilogue_program(gm: torch.fx.GraphModule, conv: torch.fx.Node, nodes: list[torch.fx.Node], inputs: list[Any],
                     placeholders: list[torch.fx.Node], what: str) -> Program | None:
    """The ops after ``conv`` (a convolution or a pooling, ``what``) as a pointwise program over its
    result (``acc``): parameters per channel or single values, and inputs of the output's shape (a
    residual)."""
    if not nodes:
        return None
    shape = tuple(conv.meta["tensor_meta"].shape)
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {conv: graph.placeholder("acc")}
    example = [torch.zeros(shape, dtype=conv.meta["tensor_meta"].dtype)]

    def mapped(n: torch.fx.Node) -> torch.fx.Node:
        if n in env:
            return env[n]
        if n.op == "get_attr":
            env[n] = graph.get_attr(str(n.target))
        elif n in placeholders and isinstance(inputs[placeholders.index(n)], torch.Tensor) and \
                tuple(inputs[placeholders.index(n)].shape) == shape:
            env[n] = graph.placeholder(n.name)
            example.append(inputs[placeholders.index(n)])
        else:
            raise CannotCover(f"the ops after the {what} use `{n.name}`, which is not its result, a "
                              "parameter or an input of the output's shape")
        return env[n]

    for node in nodes:
        env[node] = graph.node_copy(node, mapped)
    graph.output(env[nodes[-1]])
    for node in reversed([n for n in graph.nodes if n.op == "placeholder" and n.target != "acc"]):
        next(iter(graph.nodes)).append(node)  # placeholders first, the accumulator's first of all
    program = lower(torch.fx.GraphModule(gm, graph), example)
    if program.kind != "pointwise":
        raise CannotCover(f"a reduction after a {what} is not covered")
    rank = len(shape)
    if any(o.kind == "value" for o in program.operands):
        raise CannotCover(f"a number passed to forward after the {what} (covered: in pointwise and row kernels)")
    if program.position_rank:
        raise CannotCover(f"positions made with arange after the {what} (covered: in pointwise and row kernels)")
    for operand in program.operands[1:]:
        if operand.kind == "view":
            raise CannotCover(f"a tensor after the {what} that broadcasts along several dimensions")
        if operand.kind == "per_row":
            raise CannotCover(f"an input with one value per row after the {what} is not covered")
        if operand.kind == "channel" and operand.channel_from is not None:
            raise CannotCover(f"a tensor after the {what} with one value per sample and channel")
        if operand.kind == "channel" and operand.channel_dim != 1 - rank:
            raise CannotCover(f"a parameter after the {what} that varies along a spatial dimension")
        if operand.kind == "col" and rank == 2:
            operand.kind = "channel"  # [batch, channels]: the last dimension is the channel
        elif operand.kind == "col":
            raise CannotCover(f"a parameter after the {what} with one value per position of its last dimension")
    return program


class _Emitter(codegen.Emitter):
    """Epilogue statements on the [pixels, channels] accumulator tile: per-channel parameters are
    read per column (``kout``), residual inputs at the output's own offsets."""

    def load(self, node: Node) -> str:
        operand = self.operands[node.args[0]]
        if operand.kind == "channel":
            return f"tl.load({operand.name}_ptr + kout, mask=col_ok, other=0.0).to(tl.float32)[None, :]"
        if operand.kind == "row":
            return f"tl.load({operand.name}_ptr + out_offsets, mask=mask, other=0.0).to(tl.float32)"
        return super().load(node)


def epilogue_lines(program: Program | None, out_dtype: str) -> tuple[str, list[str], str]:
    """(extra kernel parameters, epilogue statements, the result's name)."""
    if program is None:
        return "", [], "round_to_bf16(acc)" if out_dtype == "bfloat16" else "acc"
    params = "".join(f"{o.name}_ptr, " for o in program.operands[1:])
    return params, _Emitter(program).epilogue_statements(), program.output


def epilogue_arguments(program: Program | None) -> tuple[list[str], str]:
    """(forward lines that make residual inputs contiguous, the epilogue's launch arguments)."""
    if program is None:
        return [], ""
    lines = [f"{o.source} = {o.source}.contiguous()" for o in program.operands[1:] if o.kind == "row"]
    return lines, "".join(o.source + ", " for o in program.operands[1:])
