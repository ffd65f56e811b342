"""Triton source for a row program (see :mod:`lower`), in one of four strategies.

- ``tiled``: pointwise programs only; each program owns a ``BLOCK_R x BLOCK_C`` tile (a flat run of
  ``BLOCK_C`` elements when nothing broadcasts per column): one read and one write per element.
- ``registers``: one program owns ``BLOCK_R`` whole rows, held in registers, so every reduction reads
  the row once from memory: one read of each input and one write of the output per element.
- ``looped``: for rows too long for registers, one loop over column blocks per dependent reduction,
  reloading the row (mostly from L2); with ``online`` a max and the sum of ``exp(x - max)`` share
  one loop (online softmax), rescaling the running sum whenever the running max grows.
- ``split``: for a few long rows reduced to one value each (a single sum, max or min): several
  programs per row each reduce a chunk, and ``finish_kernel`` combines the chunks.

The first three also come with a persistent grid (a few programs per SM looping over the tiles).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernelevo.agent.builtin.program import REDUCTIONS, Node, Program

NEG_INF = 'float("-inf")'
POS_INF = 'float("inf")'


def _c(value: float) -> str:
    if value == float("inf"):
        return POS_INF
    if value == float("-inf"):
        return NEG_INF
    return repr(float(value))


def _a(arg: Any) -> str:
    return arg if isinstance(arg, str) else _c(arg)


def _nan_max(a: str, b: str, which: str = "maximum") -> str:
    # torch's max, min, relu and clamp pass a NaN on; the GPU's plain max/min instructions drop it
    return f"tl.{which}({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"


def elementwise(op: str, args: list[Any]) -> str:
    """The Triton expression of primitive ``op`` on fp32 values ``args`` (names or numbers)."""
    a = [_a(x) for x in args]
    x = a[0]
    binary = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    if op in binary:
        return f"({a[0]} {binary[op]} {a[1]})"
    softplus = f"tl.where({x} > 20.0, {x}, tl.log(1.0 + tl.exp({x})))"
    table = {
        "identity": x, "cast": x, "neg": f"(-{x})", "relu": _nan_max(x, "0.0"),
        "sigmoid": f"(1.0 / (1.0 + tl.exp(-{x})))", "silu": f"({x} / (1.0 + tl.exp(-{x})))",
        "tanh": f"(2.0 / (1.0 + tl.exp(-2.0 * {x})) - 1.0)", "exp": f"tl.exp({x})", "log": f"tl.log({x})",
        "abs": f"tl.abs({x})", "sqrt": f"tl.sqrt({x})", "rsqrt": f"tl.rsqrt({x})", "erf": f"tl.math.erf({x})",
        "square": f"({x} * {x})", "cube": f"({x} * {x} * {x})", "reciprocal": f"(1.0 / {x})",
        "gelu": f"(0.5 * {x} * (1.0 + tl.math.erf({x} * 0.7071067811865476)))",
        "gelu_tanh": f"(0.5 * {x} * (2.0 / (1.0 + tl.exp(-2.0 * (0.7978845608028654 * ({x} + 0.044715 * {x} * {x} "
                     f"* {x}))))))",
        "softplus": softplus,
        "mish": f"({x} * (2.0 / (1.0 + tl.exp(-2.0 * {softplus})) - 1.0))",
        "hardswish": f"({x} * tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0)",
        "hardsigmoid": _nan_max(_nan_max(f"{x} / 6.0 + 0.5", "0.0"), "1.0", "minimum"),
        "relu6": _nan_max(_nan_max(x, "0.0"), "6.0", "minimum"),
        "inf_to_zero": f"tl.where(tl.abs({x}) == float(\"inf\"), 0.0, {x})",
        "elu": f"tl.where({x} > 0.0, {x}, tl.exp({x}) - 1.0)",
        "selu": f"(1.0507009873554805 * tl.where({x} > 0.0, {x}, 1.6732632423543772 * (tl.exp({x}) - 1.0)))",
    }
    if op in table:
        return table[op]
    if op in ("maximum", "minimum"):
        return _nan_max(a[0], a[1], op)
    if op == "leaky_relu":
        return f"tl.where({x} >= 0.0, {x}, {x} * {a[1]})"
    if op == "clamp":
        out = x
        if args[1] != float("-inf"):
            out = _nan_max(out, a[1])
        if args[2] != float("inf"):
            out = _nan_max(out, a[2], "minimum")
        return out
    raise KeyError(op)


ROUND_TO_BF16 = '''@triton.jit
def round_to_bf16(x):
    # fp32 -> nearest bf16 (ties to even), kept in fp32: eager rounds after every bf16 op, and so do we.
    # On a GPU, one conversion instruction each way. Under Triton's CPU interpreter, integer
    # arithmetic, so that it rounds there the same way.
    if CAST_ROUNDS:
        y = x.to(tl.bfloat16).to(tl.float32)
    else:
        bits = x.to(tl.uint32, bitcast=True)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        y = bits.to(tl.float32, bitcast=True)
    return y


CAST_ROUNDS = tl.constexpr(not isinstance(round_to_bf16, InterpretedFunction))  # see INTERPRETER_IMPORT
'''


INTERPRETER_IMPORT = "from triton.runtime.interpreter import InterpretedFunction\n"
INTERPRETED = '''

# Triton's CPU interpreter multiplies bf16 and fp16 tiles wrongly (triton 3.9), so there the tiles
# are widened to fp32 before tl.dot. On a GPU this is False: the dots run on the tensor cores.
INTERPRETED = isinstance({kernel}, InterpretedFunction)
'''


def rounded(node: Node, expr: str) -> str:
    """``expr`` rounded as eager rounds ``node``'s result (bf16 or fp16), kept in fp32."""
    if node.round_to == "bfloat16":
        return f"round_to_bf16({expr})"
    if node.round_to == "float16":
        return f"({expr}).to(tl.float16).to(tl.float32)"
    return expr


class Emitter:
    """Writes a row program's statements: loads, elementwise ops and reductions over a tile."""

    def __init__(self, program: Program) -> None:
        self.p = program
        self.by_name = {n.name: n for n in program.nodes}
        self.operands = {o.name: o for o in program.operands}
        self.evict = ""
        """Eviction hint for row loads: evict_last where a later pass reads the row again (keep it in
        L2), evict_first on a row's last read (streaming: leave L2 to data that is reused)."""

    def deps(self, name: str, within_row: bool = False) -> set[str]:
        """``name`` and every node it depends on; with ``within_row``, not looking past per-row values
        (a loop over the row reads those, it does not recompute them)."""
        seen: set[str] = set()
        stack = [name]
        while stack:
            cur = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            if within_row and cur != name and self.by_name[cur].level == "row":
                continue
            stack.extend(a for a in self.by_name[cur].args if isinstance(a, str) and a in self.by_name)
        return seen

    def load(self, node: Node) -> str:
        operand = self.operands[node.args[0]]
        if operand.kind == "channel":
            n = operand.name
            return (f"tl.load({n}_ptr + (rows // {n}_div) % {n}_mod, mask=row_ok, other=0.0).to(tl.float32)"
                    "[:, None]")
        if operand.kind == "scalar":
            return f"tl.load({operand.name}_ptr).to(tl.float32)"
        if operand.kind == "value":
            return f"{operand.name}_value"
        if operand.kind == "col":
            # Every row reads the same parameters: keep them in L2.
            return (f"tl.load({operand.name}_ptr + cols, mask=col_ok, other=0.0, eviction_policy=\"evict_last\")"
                    ".to(tl.float32)[None, :]")
        offset = f"{node.args[1]} * n_cols + " if node.args[1] else ""
        hint = f", eviction_policy=\"{self.evict}\"" if self.evict else ""
        return (f"tl.load({operand.name}_ptr + (rows64 * {operand.name}_stride)[:, None] + ({offset}cols)[None, :], "
                f"mask=mask, other=0.0{hint}).to(tl.float32)")

    def statement(self, node: Node) -> str:
        if node.op == "load":
            return f"{node.name} = {self.load(node)}"
        return f"{node.name} = {rounded(node, elementwise(node.op, node.args))}"

    def reduce_registers(self, node: Node) -> str:
        src = node.args[0]
        if node.op == "sum":
            return f"{node.name} = {rounded(node, f'tl.sum(tl.where(mask, {src}, 0.0), axis=1)[:, None]')}"
        if node.op in ("max", "min"):
            fill = NEG_INF if node.op == "max" else POS_INF
            return f"{node.name} = {rounded(node, f'tl.{node.op}(tl.where(mask, {src}, {fill}), axis=1)[:, None]')}"
        fill = NEG_INF if node.op == "argmax" else POS_INF
        return (f"{node.name} = tl.{node.op}(tl.where(mask, {src}, {fill}), axis=1, tie_break_left=True)"
                f"[:, None].to(tl.int64)")


HEADER = '''"""{title}

Strategy: {strategy} ({params}). Generated by kernelevo's built-in policy.
{why}

Bytes moved: {bytes_note}
"""

{imports}
'''


def _indent(lines: list[str], depth: int) -> list[str]:
    return [("    " * depth + line) if line else "" for line in lines]


def kernel(program: Program, strategy: str, online: bool = False, persistent: bool = False,
           static: bool = False) -> str:
    """The ``@triton.jit`` function for ``program`` with ``strategy``; ``persistent``: a fixed grid
    (a few programs per SM) whose programs loop over the tiles, instead of one program per tile."""
    em = Emitter(program)
    # static: the row length and strides are compile-time constants, as in torch.compile's kernels
    # (loop trip counts and alignment known exactly; one compile per distinct shape).
    const = ": tl.constexpr" if static else ""
    params = []
    for o in program.operands:
        params.append(f"{o.name}_value" if o.kind == "value" else f"{o.name}_ptr")
        if o.kind == "row":
            params.append(f"{o.name}_stride{const}")
        elif o.kind == "channel":
            params += [f"{o.name}_div", f"{o.name}_mod"]
    target = ["ws_ptr", "n_rows", f"n_cols{const}", "chunk"] if strategy == "split" else \
        ["out_ptr", "n_rows", f"n_cols{const}"]
    signature = ", ".join([*params, *target, "BLOCK_R: tl.constexpr", "BLOCK_C: tl.constexpr",
                           "EVEN_R: tl.constexpr", "EVEN_C: tl.constexpr", "WIDE: tl.constexpr",
                           "VEC: tl.constexpr"])
    if strategy == "split":
        signature += ", SPLIT: tl.constexpr"
    body: list[str] = []
    if strategy == "tiled":
        body += ["# One tile per program: BLOCK_R rows by BLOCK_C columns.",
                 "rows = (pid // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)",
                 "cols = (pid % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)"]
    else:
        body += ["# BLOCK_R whole rows per program.",
                 "rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)"]
    body += ["# Shapes that divide into whole tiles need no bounds checks: constant-true masks fold away.",
             "if EVEN_R:", "    row_ok = tl.full([BLOCK_R], 1, tl.int1)", "else:", "    row_ok = rows < n_rows",
             "# 32-bit offsets while every tensor has fewer than 2**31 elements: fewer instructions per address.",
             "if WIDE:", "    rows64 = rows.to(tl.int64)", "else:", "    rows64 = rows"]
    out = program.output
    row_nodes = [n for n in program.nodes if n.level == "row"]
    if strategy in ("tiled", "registers"):
        if strategy == "registers":
            body += ["cols = tl.arange(0, BLOCK_C)"]
            em.evict = "evict_first"  # the row is read once
        body += [*_col_ok(), "mask = row_ok[:, None] & col_ok[None, :]"]
        needed = em.deps(out)
        for node in program.nodes:
            if node.name not in needed:
                continue
            if node.op in REDUCTIONS:
                body.append(em.reduce_registers(node))
            else:
                body.append(em.statement(node))
        body += _store(program)
    elif strategy == "split":
        reduction = splittable(program)
        assert reduction is not None, "split: one sum, max or min per row only"
        em.evict = "evict_first"
        # Program (row, s) reduces the s-th chunk of the row; finish_kernel combines the chunks.
        partial = replace(reduction, round_to=None)  # rounded once, after the chunks are combined
        em.by_name[partial.name] = partial
        body += _pass(program, em, [partial], {}, set(), lo="tl.program_id(1) * chunk",
                      hi="tl.minimum(tl.program_id(1) * chunk + chunk, n_cols)")
        em.by_name[partial.name] = reduction
        body.append(f"tl.store(ws_ptr + rows[:, None] * SPLIT + tl.program_id(1), {partial.name}, "
                    "mask=row_ok[:, None])")
    else:
        body += _looped(program, em, row_nodes, online)
    strides = [f"{o.name}_stride" for o in program.operands if o.kind == "row"]
    head = [] if static else [  # static sizes: the compiler knows their alignment exactly
        "# VEC > 1: the host checked that row lengths, strides and pointers are multiples of VEC",
        "# elements. Triton learns that by itself only for multiples of 16; otherwise it reads one",
        "# element per instruction. Rounding down to a multiple of VEC (a no-op here) tells it, where",
        "# tl.multiple_of on a scalar does not, and it then reads VEC * itemsize bytes at a time.",
        "if VEC > 1:",
        *[f"    {n} = {n} // VEC * VEC" for n in ["n_cols", *strides]]]
    head += ["tiles_c = tl.cdiv(n_cols, BLOCK_C)"] if strategy == "tiled" else []
    if persistent:
        # A fixed grid of a few programs per SM, each looping over tiles: no tail wave of
        # half-empty SMs, and launch and scheduling costs paid once per program, not per tile.
        tiles = "tl.cdiv(n_rows, BLOCK_R)" + (" * tiles_c" if strategy == "tiled" else "")
        head += [f"n_tiles = {tiles}",
                 "for pid in range(tl.program_id(0), n_tiles, tl.num_programs(0)):", *_indent(body, 1)]
    else:
        head += ["pid = tl.program_id(0)", *body]
    lines = ["@triton.jit", f"def fused_kernel({signature}):", *_indent(head, 1)]
    finish = "\n\n" + _finish_kernel(program, em, reduction) if strategy == "split" else ""
    return "\n".join(lines) + "\n" + finish



def splittable(program: Program) -> Node | None:
    """The one reduction of a program whose rows can be split across programs (None if it has
    another shape): one value per row from a single sum, max or min of values that need no other
    per-row value, and per-row ops after it."""
    em = Emitter(program)
    needed = em.deps(program.output)
    reductions = [n for n in program.reductions if n.name in needed]
    if program.out_level != "row" or len(reductions) != 1 or reductions[0].op not in ("sum", "max", "min"):
        return None
    r = reductions[0]
    if not isinstance(r.args[0], str) or any(em.by_name[d].level == "row" for d in em.deps(r.args[0])):
        return None
    return r


def _finish_kernel(program: Program, em: Emitter, r: Node) -> str:
    combine = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}[r.op]
    fill = {"sum": "0.0", "max": NEG_INF, "min": POS_INF}[r.op]
    needed = em.deps(program.output)
    after = [em.statement(n) for n in program.nodes
             if n.name in needed and n.name != r.name and n.level in ("row", "const")]
    body = ["# Combines each row's SPLIT partial results in a fixed order, then the per-row ops after them.",
            "rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)",
            "row_ok = rows < n_rows",
            "parts = tl.load(ws_ptr + rows[:, None] * SPLIT + tl.arange(0, SPLIT)[None, :], mask=row_ok[:, None], "
            f"other={fill})",
            f"{r.name} = {rounded(r, f'{combine}(parts, axis=1)[:, None]')}",
            *after, *_store(program)]
    return "\n".join(["@triton.jit",
                      "def finish_kernel(ws_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, SPLIT: tl.constexpr):",
                      *_indent(body, 1)]) + "\n"


def _store(program: Program) -> list[str]:
    out = program.output
    if program.out_level == "row":
        return [f"tl.store(out_ptr + rows[:, None], {out}.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])"]
    return [f"tl.store(out_ptr + (rows64 * n_cols)[:, None] + cols[None, :], {out}.to(out_ptr.dtype.element_ty), "
            "mask=mask)"]


def _col_ok() -> list[str]:
    return ["if EVEN_C:", "    col_ok = tl.full([BLOCK_C], 1, tl.int1)", "else:", "    col_ok = cols < n_cols"]


def _loop_head(lo: str = "0", hi: str = "n_cols") -> list[str]:
    return [f"for start in range({lo}, {hi}, BLOCK_C):",
            "    cols = start + tl.arange(0, BLOCK_C)",
            *_indent(_col_ok(), 1),
            "    mask = row_ok[:, None] & col_ok[None, :]"]


def online_pairs(program: Program) -> dict[str, str]:
    """Sums of ``exp(a - max(a))`` in ``program`` that can share a loop with their max: {sum: max}."""
    return _online_pairs(program, Emitter(program))


def _online_pairs(program: Program, em: Emitter) -> dict[str, str]:
    """sum reductions of ``exp(a - max(a))`` that can share a loop with their max: {sum: max}."""
    pairs: dict[str, str] = {}
    for s in program.nodes:
        if s.op != "sum":
            continue
        e = em.by_name.get(s.args[0]) if isinstance(s.args[0], str) else None
        if not e or e.op != "exp" or e.round_to:
            continue
        z = em.by_name.get(e.args[0]) if isinstance(e.args[0], str) else None
        if not z or z.op != "sub" or z.round_to or not isinstance(z.args[1], str):
            continue
        m = em.by_name.get(z.args[1])
        if m and m.op == "max" and not m.round_to and m.args[0] == z.args[0]:
            pairs[s.name] = m.name
    return pairs


def _looped(program: Program, em: Emitter, row_nodes: list[Node], online: bool) -> list[str]:
    """Passes over the row: each computes the reductions whose inputs are known, then the output."""
    reductions = program.reductions
    pairs = _online_pairs(program, em) if online else {}
    known: set[str] = set()  # row values computed so far
    lines: list[str] = []
    needed_all = em.deps(program.output)
    pending = [r for r in reductions if r.name in needed_all]

    def row_deps(name: str) -> set[str]:
        return {d for d in em.deps(name) if em.by_name[d].level == "row" and d != name}

    while pending:
        batch = [r for r in pending if r.name not in pairs and row_deps(r.args[0]) <= known]
        # An online sum joins the pass of its max.
        maxes = {r.name for r in batch}
        batch += [r for r in pending if r.name in pairs and pairs[r.name] in maxes
                  and row_deps(r.args[0]) - {pairs[r.name]} <= known]
        if not batch:
            raise ValueError("the row program has a cycle")  # impossible for a traced graph
        last_read = program.out_level == "row" and len(batch) == len(pending)
        em.evict = "evict_first" if last_read else "evict_last"
        lines += _pass(program, em, batch, pairs, known)
        known |= {r.name for r in batch}
        pending = [r for r in pending if r not in batch]
        # row values that became computable (e.g. mean = sum / n, rsqrt(var + eps))
        for node in row_nodes:
            if node.name not in known and node.op not in REDUCTIONS and node.op != "load" and \
                    row_deps(node.name) - {node.name} <= known and node.name in needed_all:
                lines.append(em.statement(node))
                known.add(node.name)
    if program.out_level == "row":
        lines += _store(program)
        return lines
    lines += _loop_head()
    em.evict = "evict_first"
    needed = em.deps(program.output, within_row=True)
    body = [em.statement(n) for n in program.nodes if n.name in needed and n.level != "row"]
    lines += _indent(body + _store(program), 1)
    return lines


def _pass(program: Program, em: Emitter, batch: list[Node], pairs: dict[str, str], known: set[str],
          lo: str = "0", hi: str = "n_cols") -> list[str]:
    lines: list[str] = []
    paired_max = {pairs[r.name] for r in batch if r.name in pairs}
    lines.append(f"# pass: {', '.join(f'{r.op} {r.name}' for r in batch)}")
    for r in batch:
        if r.op == "sum":
            lines.append(f"{r.name}_acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)")
        elif r.op in ("max", "argmax"):
            lines.append(f"{r.name}_acc = tl.full([BLOCK_R, BLOCK_C], {NEG_INF}, dtype=tl.float32)")
        else:
            lines.append(f"{r.name}_acc = tl.full([BLOCK_R, BLOCK_C], {POS_INF}, dtype=tl.float32)")
        if r.op in ("argmax", "argmin"):
            lines.append(f"{r.name}_idx = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.int64)")
    needed: set[str] = set()
    for r in batch:
        src = r.args[0]
        if r.name in pairs:  # online: the loop needs a, not exp(a - max)
            src = em.by_name[em.by_name[src].args[0]].args[0]
        needed |= {d for d in em.deps(src, within_row=True) if d not in known and em.by_name[d].level != "row"}
    body = [em.statement(n) for n in program.nodes if n.name in needed]
    for r in batch:
        src = r.args[0]
        acc = f"{r.name}_acc"
        if r.name in pairs:
            m = pairs[r.name]
            a = em.by_name[em.by_name[src].args[0]].args[0]
            body += [f"{m}_new = tl.maximum({m}_acc, tl.where(mask, {a}, {NEG_INF}))",
                     f"{acc} = {acc} * tl.where({m}_new == {NEG_INF}, 0.0, tl.exp({m}_acc - {m}_new)) + "
                     f"tl.where(mask, tl.exp({a} - {m}_new), 0.0)",
                     f"{m}_acc = {m}_new"]
        elif r.name in paired_max:
            continue  # updated with its sum
        elif r.op == "sum":
            body.append(f"{acc} += tl.where(mask, {src}, 0.0)")
        elif r.op in ("max", "min"):
            fill = NEG_INF if r.op == "max" else POS_INF
            body.append(f"{acc} = tl.{'maximum' if r.op == 'max' else 'minimum'}({acc}, tl.where(mask, {src}, {fill}))")
        else:
            fill, cmp = (NEG_INF, ">") if r.op == "argmax" else (POS_INF, "<")
            body += [f"{r.name}_x = tl.where(mask, {src}, {fill})",
                     f"{r.name}_take = {r.name}_x {cmp} {acc}",
                     f"{r.name}_idx = tl.where({r.name}_take, (cols[None, :] + tl.zeros([BLOCK_R, BLOCK_C], "
                     f"dtype=tl.int64)), {r.name}_idx)",
                     f"{acc} = tl.where({r.name}_take, {r.name}_x, {acc})"]
    lines += _loop_head(lo, hi)
    lines += _indent(body, 1)
    for r in batch:
        acc = f"{r.name}_acc"
        if r.name in paired_max:
            lines.append(f"{r.name} = {rounded(r, f'tl.max({acc}, axis=1)[:, None]')}")
    for r in batch:
        acc = f"{r.name}_acc"
        if r.name in pairs:
            m = pairs[r.name]
            lines.append(f"{r.name} = tl.sum({acc} * tl.where({m}_acc == {NEG_INF}, 0.0, tl.exp({m}_acc - {m})), "
                         "axis=1)[:, None]")
        elif r.name in paired_max:
            continue
        elif r.op == "sum":
            lines.append(f"{r.name} = {rounded(r, f'tl.sum({acc}, axis=1)[:, None]')}")
        elif r.op in ("max", "min"):
            lines.append(f"{r.name} = {rounded(r, f'tl.{r.op}({acc}, axis=1)[:, None]')}")
        else:
            best = "tl.max" if r.op == "argmax" else "tl.min"
            lines += [f"{r.name}_best = {best}({acc}, axis=1)[:, None]",
                      f"{r.name} = tl.min(tl.where({acc} == {r.name}_best, {r.name}_idx, 9223372036854775807), "
                      "axis=1)[:, None]"]
    return lines


def forward(program: Program, strategy: str, params: dict[str, Any], max_block: int) -> str:
    """``ModelNew.forward``: views, allocation and the launch."""
    main = program.main
    row_operands = [o for o in program.operands if o.kind == "row"]
    flat = strategy == "tiled" and program.flat
    lines = [f"def forward(self, {', '.join(program.inputs)}):"]
    body = [f"{name} = {expression}  # left in torch (the task allows partial replacement)"
            for name, expression in program.torch_prefix]
    body += [f"{o.source} = {o.source}.contiguous()" for o in program.operands
             if o.kind == "row" or (o.kind in ("col", "scalar") and o.source in program.inputs)]
    if flat:
        body += ["# Nothing broadcasts per column: treat the tensor as one long row.",
                 f"n_rows, n_cols = 1, {main}.numel()"]
    else:
        cols = f"{main}.shape[-1]" if program.main_chunks == 1 else f"{main}.shape[-1] // {program.main_chunks}"
        body += [f"n_cols = {cols}", f"n_rows = {main}.numel() // max({main}.shape[-1], 1)"]
    shape = {("elem", True): f"(*{main}.shape[:-1], n_cols)", ("row", True): f"(*{main}.shape[:-1], 1)",
             ("row", False): f"{main}.shape[:-1]", ("elem", False): f"(*{main}.shape[:-1], n_cols)"}
    out_shape = f"{main}.shape" if flat else shape[(program.out_level, program.out_keepdim)]
    body.append(f"out = torch.empty({out_shape}, dtype=torch.{program.out_dtype}, device={main}.device)")
    args = []
    for o in program.operands:
        args.append(f"float({o.source})" if o.kind == "value" else o.source)
        if o.kind == "row":
            args.append("n_cols" if flat else f"{o.source}.shape[-1]")
        elif o.kind == "channel":
            d = o.channel_dim
            args += [f"{main}.shape[{d + 1}:-1].numel()", f"{main}.shape[{d}]"]
    vec = _vec_check(params, row_operands, args)
    body += vec
    if strategy == "registers":
        body += ["block_c = max(triton.next_power_of_2(n_cols), 16)",
                 f"if block_c > {max_block}:",
                 f"    raise ValueError(f'rows of {{n_cols}} do not fit in registers (at most {max_block})')"]
        block_c = "block_c"
        grid = "(triton.cdiv(n_rows, BLOCK_R),)"
    elif strategy == "looped":
        block_c = str(params["BLOCK_C"])
        grid = "(triton.cdiv(n_rows, BLOCK_R),)"
    elif strategy == "split":
        sizes = ", ".join([f"{o.source}.numel()" for o in row_operands] + ["out.numel()"])
        split, block_c = params["SPLIT"], params["BLOCK_C"]
        body += [f"BLOCK_C, SPLIT = {block_c}, {split}",
                 "# Few, long rows: SPLIT programs per row, each reducing a chunk of whole column blocks.",
                 f"ws = torch.empty((n_rows, SPLIT), dtype=torch.float32, device={main}.device)",
                 "chunk = triton.cdiv(triton.cdiv(n_cols, BLOCK_C), SPLIT) * BLOCK_C",
                 "fused_kernel[(n_rows, SPLIT)](",
                 f"    {', '.join(args)}, ws, n_rows, n_cols, chunk, BLOCK_R=1, BLOCK_C=BLOCK_C,",
                 f"    EVEN_R=True, EVEN_C=n_cols % BLOCK_C == 0, WIDE=max({sizes}) >= 2**31, SPLIT=SPLIT,",
                 f"    VEC={'vec' if vec else 1},",
                 f"    num_warps={params['num_warps']})",
                 "finish_kernel[(triton.cdiv(n_rows, 16),)](ws, out, n_rows, n_cols, BLOCK_R=16, SPLIT=SPLIT, "
                 "num_warps=1)",
                 "return out"]
        return "\n".join(lines + _indent(body, 1)) + "\n"
    else:
        block_c = str(params["BLOCK_C"])
        grid = "(triton.cdiv(n_rows, BLOCK_R) * triton.cdiv(n_cols, BLOCK_C),)"
    block_r = 1 if flat else params.get("BLOCK_R", 1)
    if params.get("PROGRAMS_PER_SM"):
        body += ["# Persistent: a few programs per SM loop over the tiles (4 'SMs' under the CPU interpreter).",
                 f"sms = torch.cuda.get_device_properties({main}.device).multi_processor_count "
                 f"if {main}.is_cuda else 4"]
        grid = f"(max(1, min({grid[1:-2]}, sms * {params['PROGRAMS_PER_SM']})),)"
    sizes = ", ".join([f"{o.source}.numel()" for o in row_operands] + ["out.numel()"])
    body += [f"BLOCK_R, BLOCK_C = {block_r}, {block_c}",
             f"fused_kernel[{grid}](",
             f"    {', '.join(args)}, out, n_rows, n_cols, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C,",
             "    EVEN_R=n_rows % BLOCK_R == 0, EVEN_C=n_cols % BLOCK_C == 0,",
             f"    WIDE=max({sizes}) >= 2**31, VEC={'vec' if vec else 1},",
             f"    num_warps={params['num_warps']}{_stages(params)})",
             "return out"]
    return "\n".join(lines + _indent(body, 1)) + "\n"


ALIGNED = '''def aligned(vec, sizes, tensors):
    """vec if every size and every tensor's address is a multiple of vec elements, else 1."""
    if all(n % vec == 0 for n in sizes) and all(t.data_ptr() % (vec * t.element_size()) == 0 for t in tensors):
        return vec
    return 1


'''


def _vec_check(params: dict[str, Any], row_operands: list[Any], args: list[str]) -> list[str]:
    """The line that sets ``vec`` to the requested vector width where the promise holds for these
    tensors (see :data:`ALIGNED`); none without VEC."""
    if params.get("VEC", 1) <= 1:
        return []
    strides = [args[args.index(o.source) + 1] for o in row_operands]
    tensors = [o.source for o in row_operands] + ["out"]
    return [f"vec = aligned({params['VEC']}, (n_cols, {', '.join(strides)}), ({', '.join(tensors)},))"]


def _stages(params: dict[str, Any]) -> str:
    return f", num_stages={params['num_stages']}" if "num_stages" in params else ""


def bytes_note(program: Program) -> str:
    rows = sum(o.chunks for o in program.operands if o.kind == "row") if program.operands else 0
    cols = [o for o in program.operands if o.kind == "col"]
    out = "one value per element" if program.out_level == "elem" else "one value per row"
    read = f"{rows} read{'s' if rows != 1 else ''} per element of the input rows"
    extra = f", {len(cols)} per-column parameter{'s' if len(cols) != 1 else ''} (cached)" if cols else ""
    return f"{read}{extra}, and {out} written."
