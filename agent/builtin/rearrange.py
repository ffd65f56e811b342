"""Rearranging values without computing them: ``torch.cat`` and ``torch.stack`` of inputs (a stack is
a cat of the inputs each given a new dim of size 1), constant ``F.pad``, ``flip``,
``roll``, ``repeat``, ``tril`` and ``triu``, and ``diff`` (a value less its neighbour), with the pointwise
ops after them fused into the epilogue.

Every output value is one input value (or the pad's fill) at coordinates that follow from its own:
shifted by the pad, mirrored by a flip, wrapped around by a roll or a repeat, or taken from the input
a concatenation's range holds. Each program computes BLOCK output positions in memory order, so the
output is written once in whole lines, and the input lines it reads run along the same last dimension
(a flip reads them backwards): every input value is read about once. The index arithmetic is written
for the op and the rank at hand; the sizes are read from the inputs at run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.shape_reads import same_call_at_full_size
from kernelevo.agent.builtin.tile_epilogue import chain_after, epilogue_arguments, epilogue_lines, epilogue_program
from kernelevo.agent.builtin.vocabulary import attribute_at, graph_calls, reads_metadata

CATS = (torch.cat, torch.concat, torch.concatenate)
MAX_RANK = 6
MAX_PARTS = 32
"""The most tensors one concatenation joins (each output position tests each part's range)."""


@dataclass
class Rearrange:
    op: str
    """cat, pad, flip, roll, repeat, tril, triu or diff."""
    rank: int
    sources: list[str]
    """The inputs read (several for a concatenation)."""
    inputs: list[str]
    epilogue: Program | None
    out_dtype: str
    dim: int = 0
    """cat: the dim the inputs are joined along."""
    amounts: list[int] = field(default_factory=list)
    """pad: (before, after) per dim from the first, as pairs flattened; roll: the shift per dim;
    repeat: the count per dim; flip: 1 for a flipped dim, else 0; tril and triu: the diagonal."""
    fill: float = 0.0
    mode: str = "constant"
    """pad: ``constant`` (``fill`` outside the input), ``reflect`` (mirrored about the edge, the edge
    once), ``replicate`` (the nearest edge) or ``circular`` (wrapped around)."""
    stacked: bool = False
    """cat: the inputs are stacked (each seen with a new dim of size 1 at ``dim`` first)."""
    attributes: dict[str, str] = field(default_factory=dict)
    """cat: sources that are the module's tensors (a class token), by name: the attribute read
    (``self.cls_token``). Each is read broadcast along the dims where it has one value (a parameter
    expanded to the batch first is the parameter, read so: no copy is made)."""


def _call_name(node: torch.fx.Node) -> str | None:
    if node.op == "call_method":
        return str(node.target) if node.target in ("flip", "roll", "repeat", "tril", "triu", "diff") else None
    if node.op != "call_function":
        return None
    if node.target in CATS:
        return "cat"
    if node.target is torch.stack:
        return "stack"
    return {F.pad: "pad", torch.flip: "flip", torch.roll: "roll", torch.tril: "tril", torch.triu: "triu",
            torch.diff: "diff"}.get(node.target)


def _dims(value: Any, rank: int) -> list[int]:
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if not all(isinstance(d, int) and -rank <= d < rank for d in values):
        raise CannotCover(f"dims {value!r} that are not dims of a {rank}-D input")
    return [d % rank for d in values]


def _settings(node: torch.fx.Node, name: str, rank: int) -> dict[str, Any]:
    args, kwargs = node.args, node.kwargs
    if name == "cat":
        return {"dim": _dims(kwargs.get("dim", args[1] if len(args) > 1 else 0), rank)[0]}
    if name == "pad":
        pad = kwargs.get("pad", args[1] if len(args) > 1 else None)
        mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
        value = kwargs.get("value", args[3] if len(args) > 3 else None)
        if mode not in PAD_MODES or not isinstance(pad, (tuple, list)) or len(pad) % 2 or len(pad) // 2 > rank or \
                not all(isinstance(p, int) and p >= 0 for p in pad):
            raise CannotCover(f"F.pad with mode {mode!r} and pad {pad!r} (covered: {', '.join(PAD_MODES)}; "
                              "amounts of 0 or more)")
        amounts = [0] * (2 * rank)
        for k in range(len(pad) // 2):  # pad lists the last dim first
            d = rank - 1 - k
            amounts[2 * d], amounts[2 * d + 1] = pad[2 * k], pad[2 * k + 1]
        return {"amounts": amounts, "fill": float(value or 0.0), "mode": mode}
    if name == "flip":
        dims = _dims(kwargs.get("dims", args[1] if len(args) == 2 else list(args[1:])), rank)
        return {"amounts": [int(d in dims) for d in range(rank)]}
    if name == "roll":
        shifts = kwargs.get("shifts", args[1] if len(args) > 1 else None)
        dims = kwargs.get("dims", args[2] if len(args) > 2 else None)
        if dims is None:
            raise CannotCover("roll of the flattened input (covered: roll along dims)")
        shifts = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
        dims = _dims(dims, rank)
        if len(shifts) != len(dims) or not all(isinstance(s, int) for s in shifts):
            raise CannotCover(f"roll by {shifts!r} along {dims!r}")
        amounts = [0] * rank
        for s, d in zip(shifts, dims, strict=True):
            amounts[d] += s
        return {"amounts": amounts}
    if name in ("tril", "triu"):
        diagonal = kwargs.get("diagonal", args[1] if len(args) > 1 else 0)
        if rank < 2 or not isinstance(diagonal, int):
            raise CannotCover(f"{name} of a {rank}-D input, diagonal {diagonal!r}")
        return {"amounts": [diagonal]}
    if name == "diff":
        n, dim = kwargs.get("n", args[1] if len(args) > 1 else 1), kwargs.get("dim", args[2] if len(args) > 2 else -1)
        if n != 1 or kwargs.get("prepend") is not None or kwargs.get("append") is not None or len(args) > 3:
            raise CannotCover("diff with n other than 1, or prepend/append (covered: one step)")
        return {"dim": _dims(dim, rank)[0]}
    counts = list(args[1]) if len(args) == 2 and isinstance(args[1], (tuple, list)) else list(args[1:])
    if len(counts) != rank or not all(isinstance(c, int) and c >= 1 for c in counts):
        raise CannotCover(f"repeat by {counts!r} (covered: one count of 1 or more per dim)")
    return {"amounts": counts}


PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _module_tensor(gm: torch.fx.GraphModule, node: Any) -> tuple[str, torch.Tensor] | None:
    """(attribute path, value) of a parameter or buffer ``node`` reads, expanded or not (``p.expand(b, -1,
    -1)``, its sizes read from an input); None for anything else."""
    if isinstance(node, torch.fx.Node) and node.op == "call_method" and node.target in ("expand", "expand_as") \
            and node.args and len(node.users) == 1:
        node = node.args[0]
    if not (isinstance(node, torch.fx.Node) and node.op == "get_attr"):
        return None
    value = attribute_at(gm, str(node.target))
    return (str(node.target), value) if isinstance(value, torch.Tensor) else None


def _glue(calls: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """The calls the op reads rather than computes: size reads, arithmetic on them alone, and a
    parameter's expansion (``self.cls_token.expand(x.shape[0], -1, -1)``)."""
    sizes: set[torch.fx.Node] = set()
    expansions: set[torch.fx.Node] = set()
    for n in calls:
        if reads_metadata(n) or (n.op == "call_function" and n.all_input_nodes and
                                 all(a in sizes for a in n.all_input_nodes)):
            sizes.add(n)
        elif n.op == "call_method" and n.target in ("expand", "expand_as") and n.args and \
                isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "get_attr":
            expansions.add(n)
    return sizes | expansions


def _sources(gm: torch.fx.GraphModule, node: torch.fx.Node, name: str, inputs: list[Any],
             placeholders: list[torch.fx.Node]) -> tuple[list[str], list[Any], dict[str, str], dict[str, Any]]:
    """The op's sources: (names, values, the module's tensors among them by name -> attribute read, and
    by name the shape each has where the cat reads it, expanded or not)."""
    first = node.args[0] if node.args else node.kwargs.get("tensors", node.kwargs.get("input"))
    joins = name in ("cat", "stack")
    sources = list(first) if joins and isinstance(first, (tuple, list)) else [first]
    names, values, attributes, read = [], [], {}, {}
    for s in sources:
        held = _module_tensor(gm, s) if name == "cat" else None
        if s in placeholders:
            names.append(s.name)
            values.append(inputs[placeholders.index(s)])
        elif held is not None:
            local = f"attr_{len(attributes)}_" + held[0].replace(".", "_")
            names.append(local)
            values.append(held[1])
            attributes[local] = f"self.{held[0]}"
            read[local] = tuple(getattr(s.meta.get("tensor_meta"), "shape", held[1].shape))
        else:
            names = []
            break
    if len(names) > MAX_PARTS:
        raise CannotCover(f"`{name}` of {len(names)} tensors (covered: up to {MAX_PARTS})")
    if not names or len(attributes) == len(names):
        raise CannotCover(f"`{name}` of computed tensors (covered: of inputs passed to forward, and a cat's "
                          "parameters)")
    return names, values, attributes, read


def recognise(gm: torch.fx.GraphModule, inputs: list[Any], full: torch.nn.Module | None = None) -> Rearrange | None:
    """The plan if the graph starts with one of the rearrangements of inputs, else None (``full``: the
    model at the size being optimised, to check the call's constant arguments)."""
    calls, placeholders = graph_calls(gm)
    glue = _glue(calls)
    computed = [n for n in calls if n not in glue]
    if computed and computed[0] is not (calls[0] if calls else None) and _call_name(computed[0]) == "cat":
        calls = computed  # a cat after the size reads and expansions it takes as they are
    name = _call_name(calls[0]) if calls else None
    if name is None:
        return None
    node = calls[0]
    sources, values, attributes, read = _sources(gm, node, name, inputs, placeholders)
    stacked = name == "stack"
    if stacked:  # a cat of the inputs each seen with a new dim of size 1 where the stack puts it
        if not all(isinstance(v, torch.Tensor) for v in values):
            raise CannotCover("`stack` of values that are not tensors")
        dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
        dim = _dims(dim, values[0].dim() + 1)[0]
        values, name = [v.unsqueeze(dim) for v in values], "cat"
    rank = values[0].dim() if isinstance(values[0], torch.Tensor) else 0
    dtypes = {v.dtype for v in values if isinstance(v, torch.Tensor)}
    if not 1 <= rank <= MAX_RANK or len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point or \
            any(not isinstance(v, torch.Tensor) or v.dim() != rank for v in values):
        low, high = (0, MAX_RANK - 1) if stacked else (1, MAX_RANK)
        raise CannotCover(f"`{'stack' if stacked else name}` of inputs of other ranks or dtypes (covered: inputs "
                          f"of one floating dtype and {low}-{high} dims)")
    same_call_at_full_size(node, full, name)
    settings = {"dim": dim} if stacked else _settings(node, name, rank)
    if attributes and not _broadcast_fits(values, sources, attributes, read, settings["dim"]):
        raise CannotCover("a cat of a parameter whose sizes neither match the inputs' nor are one, or that is "
                          "expanded along the joined dim")
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    chain = chain_after(gm, node, output)
    try:
        epilogue = epilogue_program(gm, node, chain, inputs, placeholders, name)
    except CannotCover:
        # not pointwise after it: a flip or a cat is also how scans are written (a reversed cumsum), so
        # the scan template, or a split into kernels, has its turn
        return None
    if epilogue is not None and any(o.kind in ("channel", "col", "per_row") for o in epilogue.operands[1:]):
        raise CannotCover(f"a tensor after the {name} that varies along some of its dims (covered: numbers, "
                          "single values and inputs of the output's shape)")
    last = chain[-1] if chain else node
    if tuple(last.meta["tensor_meta"].shape) != tuple(node.meta["tensor_meta"].shape):
        raise CannotCover(f"the ops after the {name} change its shape (covered: pointwise ops)")
    return Rearrange(op=name, rank=rank, sources=sources, inputs=[p.name for p in placeholders],
                     epilogue=epilogue, out_dtype=str(last.meta["tensor_meta"].dtype).removeprefix("torch."),
                     attributes=attributes, stacked=stacked, **settings)


def _broadcast_fits(values: list[Any], sources: list[str], attributes: dict[str, str], read: dict[str, Any],
                    dim: int) -> bool:
    """Does each module tensor of a cat have, outside the joined dim, one value or the inputs' size, and
    along it its own size (an expansion along the joined dim would add rows the kernel does not read)?"""
    shape = next(v.shape for v, s in zip(values, sources, strict=True) if s not in attributes)
    held = [(v, s) for v, s in zip(values, sources, strict=True) if s in attributes]
    return all(read[s][dim] == v.shape[dim] for v, s in held) and \
        all(v.shape[d] in (1, shape[d]) for v, s in held for d in range(len(shape)) if d != dim)


def _coordinates(rank: int) -> list[str]:
    """Each output position's coordinates o0..o{rank-1}, from the last dim (O{d}: the output's sizes)."""
    lines = ["rest = offs"]
    for d in range(rank - 1, 0, -1):
        lines += [f"o{d} = rest % O{d}", f"rest = rest // O{d}"]
    return lines + ["o0 = rest"]


def _at(name: str, rank: int, coords: list[str]) -> str:
    """The flat offset of coordinates in contiguous input ``name`` (its sizes: {name}_s{d})."""
    at = coords[0]
    for d in range(1, rank):
        at = f"({at}) * {name}_s{d} + {coords[d]}"
    return at


def _gather(plan: Rearrange) -> list[str]:
    """Kernel lines that set ``value``: the input value (or the fill) each output position takes."""
    rank, src = plan.rank, plan.sources[0]
    if plan.op == "cat":
        lines, start = ["value = tl.zeros((BLOCK,), dtype=tl.float32)"], "0"
        for k, name in enumerate(plan.sources):
            # a module tensor of one value along a dim is read at 0 there (size 1: o % 1)
            held = name in plan.attributes
            coords = [f"(o{d} - start{k})" if d == plan.dim else (f"(o{d} % {name}_s{d})" if held else f"o{d}")
                      for d in range(rank)]
            lines += [f"start{k} = {start}",
                      f"inside = ok & (o{plan.dim} >= start{k}) & (o{plan.dim} < start{k} + {name}_s{plan.dim})",
                      f"value = tl.where(inside, tl.load({name}_ptr + {_at(name, rank, coords)}, mask=inside, "
                      "other=0.0).to(tl.float32), value)"]
            start = f"start{k} + {name}_s{plan.dim}"
        return lines
    if plan.op == "pad" and plan.mode != "constant":
        return _edge_pad_lines(plan, src)
    if plan.op == "pad":
        coords = [f"(o{d} - {plan.amounts[2 * d]})" for d in range(rank)]
        inside = " & ".join(f"({c} >= 0) & ({c} < {src}_s{d})" for d, c in enumerate(coords)
                            if plan.amounts[2 * d] or plan.amounts[2 * d + 1])
        return [f"inside = ok & {inside or 'ok'}",
                f"value = tl.load({src}_ptr + {_at(src, rank, coords)}, mask=inside, other=0.0).to(tl.float32)",
                f"value = tl.where(inside, value, {_number(plan.fill)})"]
    if plan.op in ("tril", "triu"):
        # the lower (upper) triangle of the last two dims kept, the rest zeros: masked loads read nothing
        compare = "<=" if plan.op == "tril" else ">="
        coords = [f"o{d}" for d in range(rank)]
        return [f"keep = ok & ((o{rank - 1} - o{rank - 2}) {compare} {plan.amounts[0]})",
                f"value = tl.load({src}_ptr + {_at(src, rank, coords)}, mask=keep, other=0.0).to(tl.float32)"]
    if plan.op == "diff":
        ahead = [f"(o{d} + 1)" if d == plan.dim else f"o{d}" for d in range(rank)]
        here = [f"o{d}" for d in range(rank)]
        return [f"later = tl.load({src}_ptr + {_at(src, rank, ahead)}, mask=ok, other=0.0).to(tl.float32)",
                f"value = later - tl.load({src}_ptr + {_at(src, rank, here)}, mask=ok, other=0.0).to(tl.float32)"]
    if plan.op == "flip":
        coords = [f"({src}_s{d} - 1 - o{d})" if plan.amounts[d] else f"o{d}" for d in range(rank)]
    elif plan.op == "roll":
        # (o - shift) mod size, kept non-negative: the shift reduced mod size first
        coords = [f"((o{d} + {src}_s{d} - ({plan.amounts[d]} % {src}_s{d})) % {src}_s{d})" if plan.amounts[d]
                  else f"o{d}" for d in range(rank)]
    else:  # repeat: the input tiled, so each coordinate wraps around the input's size
        coords = [f"(o{d} % {src}_s{d})" if plan.amounts[d] > 1 else f"o{d}" for d in range(rank)]
    return [f"value = tl.load({src}_ptr + {_at(src, rank, coords)}, mask=ok, other=0.0).to(tl.float32)"]


def _number(value: float) -> str:
    return repr(value) if math.isfinite(value) else f'float("{value}")'


def kernel(plan: Rearrange) -> str:
    params, lines, result = epilogue_lines(plan.epilogue, plan.out_dtype)
    unique = list(dict.fromkeys(plan.sources))  # an input joined twice is one pointer
    sizes = [f"{name}_s{d}" for name in unique for d in range(plan.rank)]
    outs = [f"O{d}" for d in range(plan.rank)]
    body = [*_coordinates(plan.rank), *_gather(plan), "acc = value[:, None]",
            "out_offsets = offs[:, None]", "mask = ok[:, None]", *lines,
            f"tl.store(out_ptr + out_offsets, {result}.to(out_ptr.dtype.element_ty), mask=mask)"]
    signature = ", ".join([*(f"{n}_ptr" for n in unique)]) + f", {params}out_ptr, N, " + \
        ", ".join(sizes + outs) + ", BLOCK: tl.constexpr"
    head = ['@triton.jit',
            f"def rearrange_kernel({signature}):",
            f"    # Program p: output positions [p * BLOCK, (p + 1) * BLOCK) in memory order, each the {plan.op}'s",
            "    # input value at the coordinates its own map to; the epilogue applied in registers.",
            "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "    ok = offs < N"]
    return "\n".join(head + ["    " + line for line in body]) + "\n"


def _edge_pad_lines(plan: Rearrange, src: str) -> list[str]:
    """Every output element is an input element: along a padded dim the position ``c`` past the edge is
    mirrored (reflect: -c, then 2 (size - 1) - c), clamped (replicate) or wrapped (circular). Amounts
    are within the sizes (the forward checks, as torch does), so one reflection or wrap suffices."""
    lines, coords = [], []
    for d in range(plan.rank):
        if not (plan.amounts[2 * d] or plan.amounts[2 * d + 1]):
            coords.append(f"o{d}")
            continue
        c, size = f"c{d}", f"{src}_s{d}"
        lines.append(f"{c} = o{d} - {plan.amounts[2 * d]}")
        if plan.mode == "reflect":
            lines += [f"{c} = tl.where({c} < 0, -{c}, {c})",
                      f"{c} = tl.where({c} >= {size}, 2 * ({size} - 1) - {c}, {c})"]
        elif plan.mode == "replicate":
            lines.append(f"{c} = tl.minimum(tl.maximum({c}, 0), {size} - 1)")
        else:
            lines.append(f"{c} = ({c} + {size}) % {size}")
        coords.append(c)
    return lines + [f"value = tl.load({src}_ptr + {_at(src, plan.rank, coords)}, mask=ok, other=0.0).to(tl.float32)"]


def _output_shape(plan: Rearrange) -> str:
    src, rank = plan.sources[0], plan.rank
    if plan.op == "cat":
        src = next(s for s in plan.sources if s not in plan.attributes)
        joined = " + ".join(f"{s}.shape[{plan.dim}]" for s in plan.sources)
        return "(" + ", ".join(joined if d == plan.dim else f"{src}.shape[{d}]" for d in range(rank)) + ",)"
    if plan.op == "pad":
        return "(" + ", ".join(f"{src}.shape[{d}] + {plan.amounts[2 * d] + plan.amounts[2 * d + 1]}"
                               for d in range(rank)) + ",)"
    if plan.op == "repeat":
        return "(" + ", ".join(f"{src}.shape[{d}] * {plan.amounts[d]}" for d in range(rank)) + ",)"
    if plan.op == "diff":
        return "(" + ", ".join(f"max({src}.shape[{d}] - 1, 0)" if d == plan.dim else f"{src}.shape[{d}]"
                               for d in range(rank)) + ",)"
    return f"{src}.shape"


def forward(plan: Rearrange, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the inputs contiguous, the output's shape, the sizes, one launch."""
    unique = list(dict.fromkeys(plan.sources))
    new_dim = f".unsqueeze({plan.dim})" if plan.stacked else ""
    body = [f"{s} = {plan.attributes.get(s, s)}{new_dim}.contiguous()" for s in unique]
    if plan.op == "cat" and len(plan.sources) > 1:
        other = [d for d in range(plan.rank) if d != plan.dim]
        first = next(s for s in plan.sources if s not in plan.attributes)
        rest = ", ".join(s for s in plan.sources if s != first and s not in plan.attributes)
        held = ", ".join(s for s in plan.sources if s in plan.attributes)
        if rest:
            body += [f"if any(t.shape[d] != {first}.shape[d] for t in ({rest},) for d in {other}):",
                     "    raise ValueError('cat: inputs of other sizes outside the joined dim')"]
        if held:  # a parameter is read broadcast where it has one value, as its expansion did
            body += [f"if any(t.shape[d] not in (1, {first}.shape[d]) for t in ({held},) for d in {other}):",
                     "    raise ValueError('cat: a parameter of other sizes outside the joined dim')"]
    if plan.op == "pad" and plan.mode in ("reflect", "circular"):
        body += _pad_within_sizes(plan)
    device = f"{next(s for s in plan.sources if s not in plan.attributes)}.device"
    body.append(f"out = torch.empty({_output_shape(plan)}, dtype=torch.{plan.out_dtype}, device={device})")
    lines, extra = epilogue_arguments(plan.epilogue)
    body += lines
    sizes = ", ".join(f"*{s}.shape" for s in unique)
    pointers = ", ".join(unique)
    body += ["if out.numel():",
             f"    rearrange_kernel[(ceil_div(out.numel(), {params['BLOCK']}),)](",
             f"        {pointers}, {extra}out, out.numel(), {sizes}, *out.shape,",
             f"        BLOCK={params['BLOCK']}, num_warps={params['num_warps']})",
             "return out"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "\n".join("    " + line for line in body) + "\n"


def _pad_within_sizes(plan: Rearrange) -> list[str]:
    """The forward's check that a reflection or a wrap stays inside the input (torch refuses the rest
    too): a reflected amount below the dim's size, a wrapped one at most the size."""
    src, reach = plan.sources[0], ">=" if plan.mode == "reflect" else ">"
    past = " or ".join(f"{max(plan.amounts[2 * d:2 * d + 2])} {reach} {src}.shape[{d}]" for d in range(plan.rank)
                       if plan.amounts[2 * d] or plan.amounts[2 * d + 1])
    return [f"if {past}:", f"    raise ValueError('{plan.mode} padding {plan.amounts} reaches past the input "
            "(torch refuses it too)')"]


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK": block, "num_warps": warps}, f"seed: {block} output positions per program")
            for block, warps in ((1024, 4), (2048, 8), (512, 4))]


def describe(plan: Rearrange) -> str:
    epilogue = f" + {', '.join(plan.epilogue.ops)}" if plan.epilogue is not None else ""
    parts = f"{len(plan.sources)} inputs" if not plan.attributes else \
        f"{len(plan.sources) - len(plan.attributes)} inputs and {len(plan.attributes)} parameters"
    joined = "stack" if plan.stacked else "cat"
    what = {"cat": f"{joined} of {parts} along dim {plan.dim}", "pad": f"{plan.mode} pad {plan.amounts}",
            "flip": "flip", "roll": f"roll by {plan.amounts}", "repeat": f"repeat {plan.amounts}",
            "tril": f"tril (diagonal {plan.amounts[:1]})", "triu": f"triu (diagonal {plan.amounts[:1]})",
            "diff": f"diff along dim {plan.dim}"}[plan.op]
    return what + epilogue

