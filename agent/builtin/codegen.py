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

from kernelevo.agent.builtin.expressions import NEG_INF, POS_INF, elementwise, rounded
from kernelevo.agent.builtin.program import READ_ONCE, REDUCTIONS, Node, Program


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
        if operand.kind == "per_row":
            return f"tl.load({operand.name}_ptr + rows, mask=row_ok, other=0.0).to(tl.float32)[:, None]"
        if operand.kind == "view":
            n, rank = operand.name, operand.view_rank or 2
            at_row = " + ".join(f"i{d} * {n}_s{d}" for d in range(rank - 1))
            return (f"tl.load({n}_ptr + ({at_row})[:, None] + cols[None, :] * {n}_s{rank - 1}, mask=mask, "
                    "other=0.0).to(tl.float32)")
        if operand.kind == "scalar":
            return f"tl.load({operand.name}_ptr).to(tl.float32)"
        if operand.kind == "value":
            return f"{operand.name}_value"
        if operand.kind == "col":
            # Every row reads the same parameters: keep them in L2.
            return (f"tl.load({operand.name}_ptr + cols, mask=col_ok, other=0.0, eviction_policy=\"evict_last\")"
                    ".to(tl.float32)[None, :]")
        hint = f", eviction_policy=\"{self.evict}\"" if self.evict else ""
        if self.p.strided:
            return (f"tl.load({operand.name}_ptr + starts[:, None] + cols[None, :].to(starts.dtype) * inner, "
                    f"mask=mask, other=0.0{hint}).to(tl.float32)")
        if operand.chunks > 1 and self.p.chunk_dim is not None:
            # chunk k of a dimension before the last: whole rows of the input, chunk_rows at a time
            k, n = node.args[1], operand.chunks
            row = f"((rows64 // chunk_rows) * {n} * chunk_rows + {k} * chunk_rows + rows64 % chunk_rows)"
            return (f"tl.load({operand.name}_ptr + ({row} * {operand.name}_stride)[:, None] + cols[None, :], "
                    f"mask=mask, other=0.0{hint}).to(tl.float32)")
        offset = f"{node.args[1]} * n_cols + " if node.args[1] else ""
        return (f"tl.load({operand.name}_ptr + (rows64 * {operand.name}_stride)[:, None] + ({offset}cols)[None, :], "
                f"mask=mask, other=0.0{hint}).to(tl.float32)")

    def row_deps(self, name: str) -> set[str]:
        """The per-row values ``name`` needs (reductions, inputs read per row, what follows from them)."""
        return {d for d in self.deps(name) if self.by_name[d].level == "row" and d != name}

    def epilogue_statements(self) -> list[str]:
        """The statements of an epilogue on a kernel's fp32 accumulator (``acc``, the program's first
        operand, read as the accumulator), each node the output needs, in order."""
        needed, accumulator = self.deps(self.p.output), self.p.operands[0].name
        return [f"{n.name} = {rounded(n, 'acc')}" if n.op == "load" and n.args[0] == accumulator
                else self.statement(n) for n in self.p.nodes if n.name in needed]

    def statement(self, node: Node) -> str:
        if node.op == "load":
            return f"{node.name} = {self.load(node)}"
        if node.op == "position":
            return f"{node.name} = {rounded(node, position(*node.args))}"
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


def indent(lines: list[str], depth: int) -> list[str]:
    return [("    " * depth + line) if line else "" for line in lines]


def kernel(program: Program, strategy: str, online: bool = False, persistent: bool = False,
           static: bool = False) -> str:
    """The ``@triton.jit`` function for ``program`` with ``strategy``; ``persistent``: a fixed grid
    (a few programs per SM) whose programs loop over the tiles, instead of one program per tile."""
    if strategy == "split_passes":
        from kernelevo.agent.builtin import split_passes  # it builds on this module

        return split_passes.kernels(program, static)
    em = Emitter(program)
    body = _tile_rows(strategy, program.strided) + _row_positions(program.view_rank)
    reduction = None
    if strategy in ("tiled", "registers"):
        body += _in_registers(program, em, strategy)
    elif strategy == "split":
        reduction = splittable(program)
        assert reduction is not None, "split: sums, maxima and minima of per-element values per row only"
        body += _split_chunk(program, em, reduction)
    else:
        body += _looped(program, em, [n for n in program.nodes if n.level == "row"], online)
    head = [] if static else _vector_hint(program)  # static sizes: the compiler knows their alignment exactly
    head += ["tiles_c = tl.cdiv(n_cols, BLOCK_C)"] if strategy == "tiled" else []
    if persistent:
        # A fixed grid of a few programs per SM, each looping over tiles: no tail wave of
        # half-empty SMs, and launch and scheduling costs paid once per program, not per tile.
        tiles = "tl.cdiv(n_rows, BLOCK_R)" + (" * tiles_c" if strategy == "tiled" else "")
        head += [f"n_tiles = {tiles}",
                 "for pid in range(tl.program_id(0), n_tiles, tl.num_programs(0)):", *indent(body, 1)]
    else:
        head += ["pid = tl.program_id(0)", *body]
    lines = ["@triton.jit", f"def fused_kernel({_signature(program, strategy, static)}):", *indent(head, 1)]
    finish = "\n\n" + _finish_kernel(program, em, reduction) if reduction is not None else ""
    return "\n".join(lines) + "\n" + finish


def _signature(program: Program, strategy: str, static: bool) -> str:
    """The kernel's parameters: each operand's pointer (or value) and strides, the output's (or, for
    ``split``, the workspace's), the sizes, and the meta-parameters."""
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
        elif o.kind == "view":
            params += [f"{o.name}_s{d}" for d in range(o.view_rank or 2)]
    target = ["ws_ptr", "n_rows", f"n_cols{const}", "chunk"] if strategy == "split" else \
        ["out_ptr", "n_rows", f"n_cols{const}"]
    if program.strided:
        target.append(f"inner{const}")
    target += [f"D{d}" for d in range(max(program.view_rank - 1, 0))]
    target += ["chunk_rows"] if program.chunk_dim is not None else []
    signature = ", ".join([*params, *target, "BLOCK_R: tl.constexpr", "BLOCK_C: tl.constexpr",
                           "EVEN_R: tl.constexpr", "EVEN_C: tl.constexpr", "WIDE: tl.constexpr",
                           "VEC: tl.constexpr"])
    return signature + (", SPLIT: tl.constexpr" if strategy == "split" else "")


def _tile_rows(strategy: str, strided: bool = False) -> list[str]:
    """The rows (and, for ``tiled``, the columns) program ``pid`` owns, and their bounds checks; where
    a row's values lie ``inner`` apart (``Program.strided``), where each row starts."""
    if strategy == "tiled":
        lines = ["# One tile per program: BLOCK_R rows by BLOCK_C columns.",
                 "rows = (pid // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)",
                 "cols = (pid % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)"]
    else:
        lines = ["# BLOCK_R whole rows per program.",
                 "rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)"]
    return lines + [
        "# Shapes that divide into whole tiles need no bounds checks: constant-true masks fold away.",
        "if EVEN_R:", "    row_ok = tl.full([BLOCK_R], 1, tl.int1)", "else:", "    row_ok = rows < n_rows",
        "# 32-bit offsets while every tensor has fewer than 2**31 elements: fewer instructions per address.",
        "if WIDE:", "    rows64 = rows.to(tl.int64)", "else:", "    rows64 = rows",
        *(["# The reduced dimensions are not the last ones: a row's values lie `inner` apart, and row r",
           "# starts at (r // inner) * n_cols * inner + r % inner. Neighbouring rows are neighbouring",
           "# in memory, so a tile of BLOCK_R rows reads whole runs of memory at each column.",
           "starts = (rows64 // inner) * n_cols * inner + rows64 % inner"] if strided else [])]


def position(dim: int, rank: int) -> str:
    """An element's index along ``dim`` of the program's rank-``rank`` shape, as fp32: its column
    offset, or its row's index in a dimension before the last (``_row_positions``)."""
    if dim == rank - 1:
        return "cols[None, :].to(tl.float32)"
    return f"i{dim}.to(tl.float32)[:, None]"


def _row_positions(rank: int) -> list[str]:
    """Each row's index in the dimensions before the last, for inputs read through their own strides
    (``view`` operands: broadcast dimensions have stride 0); none where there are none."""
    if rank < 2:
        return []
    lines = ["# Where each row lies in the dimensions before the last: inputs that broadcast are read",
             "# through their strides (0 along a broadcast dimension), with no copy made.", "rest = rows64"]
    for d in range(rank - 2, 0, -1):
        lines += [f"i{d} = rest % D{d}", f"rest = rest // D{d}"]
    return lines + ["i0 = rest"]


def _in_registers(program: Program, em: Emitter, strategy: str) -> list[str]:
    """``tiled`` or ``registers``: the tile (or the whole rows) loaded once, every value the output
    needs computed from it, and the output stored."""
    lines = []
    if strategy == "registers":
        lines += ["cols = tl.arange(0, BLOCK_C)"]
        em.evict = "evict_first"  # the row is read once
    lines += [*_col_ok(), "mask = row_ok[:, None] & col_ok[None, :]"]
    needed = em.deps(program.output)
    for node in program.nodes:
        if node.name not in needed:
            continue
        if node.op in REDUCTIONS:
            lines.append(em.reduce_registers(node))
        else:
            lines.append(em.statement(node))
    return lines + _store(program)


def _split_chunk(program: Program, em: Emitter, reductions: list[Node]) -> list[str]:
    """``split``: program (row, s) reduces the s-th chunk of the row into the workspace, each reduction's
    partial at ``ws[row, k, s]``; ``finish_kernel`` combines the chunks."""
    em.evict = "evict_first"
    partials = [replace(r, round_to=None) for r in reductions]  # rounded once, after the chunks are combined
    em.by_name.update({p.name: p for p in partials})
    lines = _pass(program, em, partials, {}, set(), lo="tl.program_id(1) * chunk",
                  hi="tl.minimum(tl.program_id(1) * chunk + chunk, n_cols)")
    em.by_name.update({r.name: r for r in reductions})
    for k, p in enumerate(partials):
        lines.append(f"tl.store(ws_ptr + (rows[:, None] * {len(partials)} + {k}) * SPLIT + tl.program_id(1), "
                     f"{p.name}, mask=row_ok[:, None])")
    return lines


def _vector_hint(program: Program) -> list[str]:
    """Rounds the row length and strides down to a multiple of VEC, so that Triton reads VEC elements at a time."""
    strides = [f"{o.name}_stride" for o in program.operands if o.kind == "row"]
    return [
        "# VEC > 1: the host checked that row lengths, strides and pointers are multiples of VEC",
        "# elements. Triton learns that by itself only for multiples of 16; otherwise it reads one",
        "# element per instruction. Rounding down to a multiple of VEC (a no-op here) tells it, where",
        "# tl.multiple_of on a scalar does not, and it then reads VEC * itemsize bytes at a time.",
        "if VEC > 1:",
        *[f"    {n} = {n} // VEC * VEC" for n in ["n_cols", *strides]]]


def splittable(program: Program) -> list[Node] | None:
    """The reductions of a program whose rows can be split across programs (None if it has another
    shape): one value per row from sums, maxima and minima of values that need no per-row value (a
    loss and a second loss added to it), and per-row ops after them."""
    em = Emitter(program)
    needed = em.deps(program.output)
    reductions = [n for n in program.reductions if n.name in needed]
    if program.out_level != "row" or not reductions or any(r.op not in ("sum", "max", "min") for r in reductions):
        return None
    for r in reductions:
        if not isinstance(r.args[0], str) or any(em.by_name[d].level == "row" for d in em.deps(r.args[0])):
            return None
    if any(em.by_name[d].level == "row" and em.by_name[d].op in READ_ONCE for d in needed):
        return None  # the finish kernel reads only the partial results
    return reductions


def _finish_kernel(program: Program, em: Emitter, reductions: list[Node]) -> str:
    needed, done = em.deps(program.output), {r.name for r in reductions}
    after = [em.statement(n) for n in program.nodes
             if n.name in needed and n.name not in done and n.level in ("row", "const")]
    body = ["# Combines each row's SPLIT partial results in a fixed order, then the per-row ops after them.",
            "rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)",
            "row_ok = rows < n_rows"]
    for k, r in enumerate(reductions):
        combine = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}[r.op]
        fill = {"sum": "0.0", "max": NEG_INF, "min": POS_INF}[r.op]
        body += [f"parts = tl.load(ws_ptr + (rows[:, None] * {len(reductions)} + {k}) * SPLIT + "
                 f"tl.arange(0, SPLIT)[None, :], mask=row_ok[:, None], other={fill})",
                 f"{r.name} = {rounded(r, f'{combine}(parts, axis=1)[:, None]')}"]
    body += [*after, *_store(program)]
    return "\n".join(["@triton.jit",
                      "def finish_kernel(ws_ptr, out_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, SPLIT: tl.constexpr):",
                      *indent(body, 1)]) + "\n"


def _store(program: Program) -> list[str]:
    out = program.output
    if program.out_level == "row":
        return [f"tl.store(out_ptr + rows[:, None], {out}.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])"]
    if program.strided:
        return [f"tl.store(out_ptr + starts[:, None] + cols[None, :].to(starts.dtype) * inner, "
                f"{out}.to(out_ptr.dtype.element_ty), mask=mask)"]
    return [f"tl.store(out_ptr + (rows64 * n_cols)[:, None] + cols[None, :], {out}.to(out_ptr.dtype.element_ty), "
            "mask=mask)"]


def _col_ok() -> list[str]:
    return ["if EVEN_C:", "    col_ok = tl.full([BLOCK_C], 1, tl.int1)", "else:", "    col_ok = cols < n_cols"]


def _loop_head(lo: str = "0", hi: str = "n_cols") -> list[str]:
    return [f"for start in range({lo}, {hi}, BLOCK_C):",
            "    cols = start + tl.arange(0, BLOCK_C)",
            *indent(_col_ok(), 1),
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

    # values read once per row (an input with one value per row, a per-channel parameter): before the passes
    for node in row_nodes:
        if node.op in READ_ONCE and node.name in needed_all:
            lines.append(em.statement(node))
            known.add(node.name)
    lines += _row_values_known(em, row_nodes, known, needed_all)  # what follows from them alone (p + 1)
    while pending:
        batch = [r for r in pending if r.name not in pairs and em.row_deps(r.args[0]) <= known]
        # An online sum joins the pass of its max.
        maxes = {r.name for r in batch}
        batch += [r for r in pending if r.name in pairs and pairs[r.name] in maxes
                  and em.row_deps(r.args[0]) - {pairs[r.name]} <= known]
        if not batch:
            raise ValueError("the row program has a cycle")  # impossible for a traced graph
        last_read = program.out_level == "row" and len(batch) == len(pending)
        em.evict = "evict_first" if last_read else "evict_last"
        lines += _pass(program, em, batch, pairs, known)
        known |= {r.name for r in batch}
        pending = [r for r in pending if r not in batch]
        # row values that became computable (e.g. mean = sum / n, rsqrt(var + eps))
        lines += _row_values_known(em, row_nodes, known, needed_all)
    if program.out_level == "row":
        lines += _store(program)
        return lines
    lines += _loop_head()
    em.evict = "evict_first"
    needed = em.deps(program.output, within_row=True)
    body = [em.statement(n) for n in program.nodes if n.name in needed and n.level != "row"]
    lines += indent(body + _store(program), 1)
    return lines


def _row_values_known(em: Emitter, row_nodes: list[Node], known: set[str], needed: set[str]) -> list[str]:
    """The statements of the per-row values whose per-row inputs are all ``known`` (added to it), in
    program order (each one's inputs come before it)."""
    lines = []
    for node in row_nodes:
        if node.name not in known and node.op not in REDUCTIONS and node.op not in READ_ONCE and \
                em.row_deps(node.name) - {node.name} <= known and node.name in needed:
            lines.append(em.statement(node))
            known.add(node.name)
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
            # a lane that has seen only -inf (masked-out values) keeps max -inf and adds nothing: exp(-inf - -inf)
            # would be NaN
            body += [f"{m}_new = tl.maximum({m}_acc, tl.where(mask, {a}, {NEG_INF}))",
                     f"{acc} = {acc} * tl.where({m}_new == {NEG_INF}, 0.0, tl.exp({m}_acc - {m}_new)) + "
                     f"tl.where(mask & ({m}_new != {NEG_INF}), tl.exp({a} - {m}_new), 0.0)",
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
    lines += indent(body, 1)
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
