"""A chain of views of one input, copied into a new tensor: channel shuffles, transposes and permutes
made contiguous, crops by slicing, broadcasts by ``expand``, with the pointwise ops after them fused.

``x.view(b, g, c // g, h, w).transpose(1, 2).contiguous().view(b, c, h, w)`` computes nothing: every
output value is one input value. The generated ``forward`` replays the reference's own view calls on
the real input (they only compute sizes and strides, in torch, at any size), and where the reference
copies (``contiguous``, ``clone``, a ``reshape`` or ``flatten`` that cannot be a view) a kernel copies
the view instead. The kernel walks the output in memory order and reads each value through the
view's strides, with neighbouring dims merged where the view is contiguous across them: a shuffle of
channels reads whole planes, so the input is read once in whole lines and the output written once.
Views that keep the copy's memory order (``view``, ``reshape``, ``flatten``, ``unsqueeze`` ...) after the
last copy are replayed on the kernel's output, so the last copy is the only one in most graphs.
"""

from __future__ import annotations

import builtins
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import TensorMetadata

from kernelevo.agent.builtin.program import CannotCover, Program
from kernelevo.agent.builtin.tile_epilogue import chain_after, epilogue_arguments, epilogue_lines, epilogue_program
from kernelevo.agent.builtin.vocabulary import graph_calls

MAX_RANK = 8
"""Dims the kernel walks (after merging): a view of more is not covered."""

STRIDE_METHODS = {"transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "t", "expand", "narrow",
                  "select", "unfold", "diagonal", "unsqueeze", "squeeze", "unflatten", "view", "expand_as",
                  "view_as"}
"""Methods that always give a view (or fail, as they would in the reference)."""
STRIDE_FUNCTIONS = {torch.transpose: "transpose", torch.permute: "permute", torch.movedim: "movedim",
                    torch.moveaxis: "moveaxis", torch.swapaxes: "swapaxes", torch.swapdims: "swapdims",
                    torch.t: "t", torch.narrow: "narrow", torch.select: "select", torch.diagonal: "diagonal",
                    torch.unsqueeze: "unsqueeze", torch.squeeze: "squeeze", torch.unflatten: "unflatten"}
STRIDE_ATTRIBUTES = {"T", "mT"}
COPY_METHODS = {"contiguous", "clone"}
RESHAPE_METHODS = {"reshape", "flatten", "reshape_as"}
RESHAPE_FUNCTIONS = {torch.reshape: "reshape", torch.flatten: "flatten"}
KEEPS_ORDER = {"view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "view_as", "reshape_as",
               "contiguous", "clone"}
"""On a contiguous tensor these give a contiguous tensor of the same memory order, at any size: a copy
followed only by them is the graph's last copy."""
REORDERS = {"transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "t", "expand", "narrow",
            "select", "unfold", "diagonal", "expand_as", "getitem", "T", "mT"}
"""The views that change which values sit where; a graph of none of them is a pointwise chain."""
NUMBER_OPS = {operator.getitem: "[]", operator.add: "+", operator.sub: "-", operator.mul: "*",
              operator.floordiv: "//", operator.mod: "%", operator.neg: "-"}
SIZE_METHODS = {"size", "dim", "numel"}


@dataclass
class ViewCopy:
    source: str
    """The input whose views are copied."""
    inputs: list[str]
    statements: list[str]
    """``forward``'s lines up to the result: the reference's size reads and views replayed, its copies
    made by the kernel (``_copied``, ``_reshaped``) and the last one with the epilogue (``_materialized``)."""
    result: str
    """The name ``forward`` returns."""
    epilogue: Program | None
    out_dtype: str
    views: list[str]
    """The views and copies, in order, by name."""
    replayed: list[str]
    """The names of the graph's calls the generated code replays (whose numbers it holds)."""
    resized: list[str]
    """Those written with a number of the size being optimised (the code then holds at that size)."""


def is_tensor(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and isinstance(node.meta.get("tensor_meta"), TensorMetadata)


def view_name(node: torch.fx.Node) -> str | None:
    """The name of the view or copy ``node`` is, as a method of a tensor; else None."""
    if node.op == "call_method" and node.target in STRIDE_METHODS | COPY_METHODS | RESHAPE_METHODS:
        return str(node.target)
    if node.op != "call_function":
        return None
    if node.target is operator.getitem and (is_tensor(node.args[0]) or split_name(node.args[0]) is not None):
        return "getitem"
    if node.target is builtins.getattr and node.args[1] in STRIDE_ATTRIBUTES:
        return str(node.args[1])
    if node.target is torch.clone:
        return "clone"
    return STRIDE_FUNCTIONS.get(node.target) or RESHAPE_FUNCTIONS.get(node.target)


SPLIT_METHODS = {"unbind", "chunk", "split"}
SPLIT_FUNCTIONS = {torch.unbind: "unbind", torch.chunk: "chunk", torch.split: "split"}


def split_name(node: Any) -> str | None:
    """``unbind``, ``chunk`` or ``split`` if ``node`` splits a tensor into views (a tuple of them); else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_method" and node.target in SPLIT_METHODS:
        return str(node.target)
    return SPLIT_FUNCTIONS.get(node.target) if node.op == "call_function" else None


def is_size_read(node: torch.fx.Node) -> bool:
    if is_tensor(node):
        return False
    if node.op == "call_method":
        return node.target in SIZE_METHODS
    if node.op == "call_function" and node.target is builtins.getattr:
        return node.args[1] == "shape"
    return node.op == "call_function" and node.target in NUMBER_OPS


class Writer:
    """Python text for the replayed nodes: each node's value under a name of its own (``<node>_view``,
    a suffix no input keeps), numbers and index expressions written out."""

    def __init__(self, placeholders: list[torch.fx.Node], there: dict[str, torch.fx.Node] | None = None) -> None:
        self.names = {p: p.name for p in placeholders}
        self.there = there or {}
        """Each node's counterpart at the size being optimised, by name (see :func:`args`)."""
        self.resized: list[str] = []
        """The nodes written with a number of the size being optimised."""

    def args(self, node: torch.fx.Node) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``node``'s arguments as the generated code writes them: each number as it is at the size
        being optimised (the counterpart's, where the small trace held another: a module constant
        shrunk with the size); sizes read from tensors stay reads, done again at run time."""
        other = self.there.get(node.name)
        if other is None:
            return tuple(node.args), dict(node.kwargs)
        changed: list[bool] = []

        def merge(a: Any, b: Any) -> Any:
            if isinstance(a, (tuple, list)) and type(a) is type(b) and len(a) == len(b):
                return type(a)(merge(x, y) for x, y in zip(a, b, strict=True))
            if isinstance(a, slice) and isinstance(b, slice):
                return slice(merge(a.start, b.start), merge(a.stop, b.stop), merge(a.step, b.step))
            number = isinstance(b, (int, float)) and not isinstance(b, bool)
            if number and (a is None or (isinstance(a, (int, float)) and not isinstance(a, bool) and a != b)):
                changed.append(True)  # another number there (or a bound there where the small size had none)
                return b
            return a

        args = merge(tuple(node.args), tuple(other.args)) if len(node.args) == len(other.args) else tuple(node.args)
        kwargs = {k: merge(v, other.kwargs.get(k, v)) for k, v in node.kwargs.items()}
        if changed and node.name not in self.resized:
            self.resized.append(node.name)
        return args, kwargs

    def name(self, node: torch.fx.Node) -> str:
        return self.names.setdefault(node, f"{node.name}_view")

    def text(self, a: Any) -> str:
        if isinstance(a, torch.fx.Node):
            if a not in self.names:
                raise CannotCover(f"`{a.name}` is used before the views that read it")
            return self.names[a]
        if isinstance(a, tuple):
            return "(" + "".join(f"{self.text(v)}, " for v in a) + ")"
        if isinstance(a, list):
            return "[" + ", ".join(self.text(v) for v in a) + "]"
        if isinstance(a, slice):
            return f"slice({self.text(a.start)}, {self.text(a.stop)}, {self.text(a.step)})"
        if a is Ellipsis:
            return "..."
        if a is None or isinstance(a, (bool, int, str)):
            return repr(a)
        raise CannotCover(f"an argument {a!r} of a view (covered: sizes, dims, slices)")

    def call(self, node: torch.fx.Node, method: str) -> str:
        """``node`` as a method call on its first argument."""
        given, kwargs = self.args(node)
        args = [self.text(a) for a in given[1:]] + [f"{k}={self.text(v)}" for k, v in kwargs.items()]
        return f"{self.text(given[0])}.{method}({', '.join(args)})"

    def replayed(self, node: torch.fx.Node) -> str:
        """The expression that gives ``node``, a read of a size, a view or a split into views, its value
        as the reference computes it."""
        view = view_name(node) if is_tensor(node) else split_name(node)
        if view is None:
            return self.number(node)
        given, _ = self.args(node)
        source = self.text(given[0])
        if view == "getitem":
            if not _index_is_basic(given[1]):
                raise CannotCover("indexing by a tensor or a list (covered: ints, slices, None and ...)")
            return f"{source}[{self.text(given[1])}]"
        if view in STRIDE_ATTRIBUTES:
            return f"{source}.{view}"
        return self.call(node, view)

    def number(self, node: torch.fx.Node) -> str:
        if node.op == "call_method":
            return self.call(node, str(node.target))
        given, _ = self.args(node)
        if node.target is builtins.getattr:
            return f"{self.text(given[0])}.shape"
        symbol = NUMBER_OPS[node.target]
        if symbol == "[]":
            return f"{self.text(given[0])}[{self.text(given[1])}]"
        if node.target is operator.neg:
            return f"-({self.text(given[0])})"
        return f"({self.text(given[0])} {symbol} {self.text(given[1])})"


def _index_is_basic(index: Any) -> bool:
    """Basic indexing (ints, slices, None, ...): the result is a view."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, slice) or (isinstance(p, int) and not isinstance(p, bool))
               or (isinstance(p, torch.fx.Node) and not is_tensor(p)) for p in parts)


def _flatten_dims(node: torch.fx.Node, w: Writer) -> tuple[Any, Any]:
    given, kwargs = w.args(node)
    args = list(given[1:])
    start = kwargs.get("start_dim", args[0] if args else 0)
    end = kwargs.get("end_dim", args[1] if len(args) > 1 else -1)
    return start, end


def _statement(node: torch.fx.Node, view: str, w: Writer, last_copy: bool, epilogue: str) -> str:
    """The line that gives ``node`` (a view or a copy) its value in ``forward``."""
    given, kwargs = w.args(node)
    source = w.text(given[0])
    target = w.name(node)
    if view in COPY_METHODS:
        if kwargs or len(given) > 1:
            raise CannotCover(f"`{view}` with a memory format (covered: the default)")
        return f"{target} = _materialized({source}{epilogue})" if last_copy else f"{target} = _copied({source})"
    if view in RESHAPE_METHODS:
        if view == "flatten":
            start, end = _flatten_dims(node, w)
            shape = f"*_flat_shape({source}, {w.text(start)}, {w.text(end)})"
        elif view == "reshape_as":
            shape = f"{w.text(given[1])}.shape"
        else:
            shape = ", ".join(w.text(a) for a in [*given[1:], *kwargs.values()])
        if last_copy:
            return f"{target} = _materialized({source}{epilogue}).view({shape})"
        return f"{target} = _reshaped({source}, {shape})"
    return f"{target} = {w.replayed(node)}"


def _last_copy(chain: list[tuple[torch.fx.Node, str]]) -> torch.fx.Node | None:
    """The copy after which every view keeps memory order (see KEEPS_ORDER): the kernel with the
    epilogue runs there, and the views after it are replayed on its output. None: the last view
    is copied at the end."""
    for k in range(len(chain) - 1, -1, -1):
        node, view = chain[k]
        if view not in KEEPS_ORDER:
            return None
        if view in COPY_METHODS | RESHAPE_METHODS:
            return node
    return None


def _chain(gm: torch.fx.GraphModule, placeholders: list[torch.fx.Node]
           ) -> tuple[list[tuple[torch.fx.Node, str]], list[torch.fx.Node], torch.fx.Node] | None:
    """(the views and copies in order, the size reads, the source input) if the graph starts with a
    chain of views of one input, else None."""
    calls, _ = graph_calls(gm)
    chain: list[tuple[torch.fx.Node, str]] = []
    reads: list[torch.fx.Node] = []
    source: torch.fx.Node | None = None
    for node in calls:
        view = view_name(node)
        if view is not None and is_tensor(node):
            first = node.args[0]
            if source is None and first in placeholders and is_tensor(first):
                source = first
            if first is not source and first not in [n for n, _ in chain]:
                return None
            chain.append((node, view))
        elif is_size_read(node):
            reads.append(node)
        else:
            break
    if source is None or not chain or not any(v in REORDERS for _, v in chain):
        return None
    return chain, reads, source


def recognise(gm: torch.fx.GraphModule, inputs: list[Any], there: dict[str, torch.fx.Node] | None = None
              ) -> ViewCopy | None:
    """The plan if the graph is a chain of views of one input (copied where the reference copies), with
    pointwise ops after it where the input is floating, else None (``there``: each node's counterpart at the size
    being optimised, whose numbers the generated code takes; see :meth:`Writer.args`)."""
    calls, placeholders = graph_calls(gm)
    found = _chain(gm, placeholders)
    if found is None:
        return None
    chain, reads, source = found
    last = chain[-1][0]
    output = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if not isinstance(output, torch.fx.Node):
        return None
    replayed = {n for n, _ in chain} | set(reads)
    after = chain_after(gm, max(replayed, key=calls.index), output) if output not in replayed else []
    if any(n in replayed for n in after):
        return None
    if not after and output is not last:
        return None
    for node, _ in chain[:-1]:  # every view feeds the next one (or a size read), never the ops after
        if any(user in after for user in node.users):
            return None
    value = inputs[placeholders.index(source)]
    if any(n.meta["tensor_meta"].dtype != value.dtype for n, _ in chain) or \
            any(len(n.meta["tensor_meta"].shape) > MAX_RANK for n, _ in chain):
        raise CannotCover(f"views that change the dtype, or of more than {MAX_RANK} dims (covered: the dtype kept)")
    if not value.is_floating_point() and after:
        # a copy moves any dtype as it is; the ops after the views compute in fp32
        raise CannotCover(f"ops after views of a {value.dtype} tensor (covered: after views of floating tensors)")
    if not value.is_floating_point() and _last_copy(chain) is None:
        return None  # a view of ids or a mask the reference never copies: forward takes it, the reader reads it
    try:
        epilogue = epilogue_program(gm, last, after, inputs, placeholders, "views")
    except CannotCover:
        return None  # not pointwise after the views: a split into kernels has its turn
    if epilogue is not None and any(o.kind in ("channel", "col", "per_row") for o in epilogue.operands[1:]):
        raise CannotCover("a tensor after the views that varies along some of their dims (covered: numbers, "
                          "single values and inputs of the output's shape)")
    final = after[-1] if after else last
    if tuple(final.meta["tensor_meta"].shape) != tuple(last.meta["tensor_meta"].shape):
        raise CannotCover("the ops after the views change their shape (covered: pointwise ops)")
    w = Writer(placeholders, there)
    lines, extra = epilogue_arguments(epilogue)
    operands = f", {extra.rstrip(', ')}" if extra else ""
    copy_at = _last_copy(chain)
    statements = []
    for node in [n for n in calls if n in replayed]:
        view = next((v for n, v in chain if n is node), None)
        if view is None:
            statements.append(f"{w.name(node)} = {w.number(node)}")
            continue
        if node is copy_at:
            statements += lines
        statements.append(_statement(node, view, w, node is copy_at, operands))
    result = w.name(last)
    if copy_at is None:
        statements += [*lines, f"out = _materialized({result}{operands})"]
        result = "out"
    return ViewCopy(source=source.name, inputs=[p.name for p in placeholders], statements=statements, result=result,
                    epilogue=epilogue, out_dtype=str(final.meta["tensor_meta"].dtype).removeprefix("torch."),
                    views=[v for _, v in chain], replayed=[n.name for n in calls if n in replayed],
                    resized=w.resized)


KERNEL = '''@triton.jit
def {name}(src_ptr, {params}out_ptr, N, S1, S2, S3, S4, S5, S6, S7, T0, T1, T2, T3, T4, T5, T6, T7,
{indent}BLOCK: tl.constexpr, WIDE: tl.constexpr):
    # Program p writes output positions [p * BLOCK, (p + 1) * BLOCK) in memory order. Position i is the
    # view's element at the coordinates whose digits in the view's sizes (S0 .. S7, the last the
    # fastest) make i; its address is their dot product with the view's strides (T0 .. T7). Sizes of 1
    # (the padding of views of fewer dims) are compile-time constants, so their steps fold away.
    if WIDE:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    rest = offs
    at = (rest % S7) * T7
    rest = rest // S7
{digits}    at += rest * T0
    value = tl.load(src_ptr + at, mask=ok)
'''
"""The walk's head; ``digits`` takes each coordinate from S6 down to S1 apart (see :func:`kernel`)."""

DIGITS = "".join(f"    at += (rest % S{d}) * T{d}\n    rest = rest // S{d}\n" for d in range(MAX_RANK - 2, 0, -1))

HELPERS = '''def _merged(t):
    # t's sizes and strides with its dims of size 1 dropped and neighbours merged where t is contiguous
    # across them (a shuffle of channels keeps whole planes), padded in front to {rank} dims: the
    # fewest digits the kernel must take apart.
    sizes = []
    strides = []
    for size, stride in zip(t.shape, t.stride()):
        if size == 1:
            continue
        if sizes and strides[-1] == stride * size:
            sizes[-1] *= size
            strides[-1] = stride
        else:
            sizes.append(size)
            strides.append(stride)
    if len(sizes) > {rank}:
        raise ValueError(f"a view of {{len(sizes)}} dims that cannot be merged (at most {rank})")
    return [1] * ({rank} - len(sizes)) + sizes, [0] * ({rank} - len(sizes)) + strides


def _geometry(t, out):
    # The launch's grid, the view's merged sizes (the first is implied) and strides, and whether an
    # offset can pass 2**31 (then the kernel counts in 64 bits).
    sizes, strides = _merged(t)
    last = sum((size - 1) * stride for size, stride in zip(sizes, strides))
    return (ceil_div(out.numel(), {BLOCK}),), [out.numel(), *sizes[1:], *strides], \\
        max(out.numel(), last + 1) >= 2 ** 31


def _copied(t):
    # Where the reference copies a view into new memory, the kernel does.
    if t.is_contiguous():
        return t
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    if out.numel():
        grid, walk, wide = _geometry(t, out)
        view_copy_kernel[grid](t, out, *walk, BLOCK={BLOCK}, WIDE=wide, num_warps={num_warps})
    return out


def _materialized(t, *operands):
    # The last copy, with the ops after the views applied on the way.
    out = torch.empty(t.shape, dtype=torch.{out_dtype}, device=t.device)
    if out.numel():
        grid, walk, wide = _geometry(t, out)
        {last_kernel}[grid](t, *operands, out, *walk, BLOCK={BLOCK}, WIDE=wide, num_warps={num_warps})
    return out


def _reshaped(t, *shape):
    try:
        return t.view(*shape)
    except RuntimeError:  # no view of t has this shape: the reference's reshape copies, so does the kernel
        return _copied(t).view(*shape)


def _flat_shape(t, start, end):
    start, end = start % max(t.dim(), 1), end % max(t.dim(), 1)
    return (*t.shape[:start], math.prod(t.shape[start:end + 1]), *t.shape[end + 1:])
'''


def kernel(plan: ViewCopy) -> str:
    """The plain copy kernel, and the last copy's with the epilogue where there is one."""
    plain = KERNEL.format(name="view_copy_kernel", params="", indent=" " * 21, digits=DIGITS) + \
        "    tl.store(out_ptr + offs, value, mask=ok)\n"
    if plan.epilogue is None:
        return plain
    params, lines, result = epilogue_lines(plan.epilogue, plan.out_dtype)
    body = ["acc = value.to(tl.float32)[:, None]", "out_offsets = offs[:, None]", "mask = ok[:, None]", *lines,
            f"tl.store(out_ptr + out_offsets, {result}.to(out_ptr.dtype.element_ty), mask=mask)"]
    last = KERNEL.format(name="view_copy_epilogue_kernel", params=params, indent=" " * 30, digits=DIGITS)
    return plain + "\n\n" + last + "".join(f"    {line}\n" for line in body)


def helpers(plan: ViewCopy, params: dict[str, Any]) -> str:
    last = "view_copy_epilogue_kernel" if plan.epilogue is not None else "view_copy_kernel"
    return HELPERS.format(rank=MAX_RANK, out_dtype=plan.out_dtype, last_kernel=last, **params)


def forward(plan: ViewCopy) -> str:
    """``ModelNew.forward``: the reference's views replayed, its copies made by the kernel."""
    body = [*plan.statements, f"return {plan.result}"]
    return f"def forward(self, {', '.join(plan.inputs)}):\n" + "".join(f"    {line}\n" for line in body)


def seeds() -> list[tuple[dict[str, Any], str]]:
    return [({"BLOCK": block, "num_warps": warps}, f"seed: {block} output positions per program")
            for block, warps in ((1024, 4), (2048, 8), (512, 4))]


def describe(plan: ViewCopy) -> str:
    views = ", ".join(dict.fromkeys(plan.views))
    epilogue = f" + {', '.join(plan.epilogue.ops)}" if plan.epilogue is not None else ""
    return f"views copied ({views}){epilogue}"
