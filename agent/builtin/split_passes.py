"""``split_passes``: a row program over few, long rows (a LayerNorm over a whole image, a norm over
millions of values) with every pass over the row spread across programs.

The ``looped`` strategy gives each row one program, which walks the row once per dependent reduction
(the mean, then the variance around it, then the output): with 16 rows, 16 programs on a GPU of more
than a hundred SMs. Here each pass is a kernel of its own over a ``(rows, SPLIT)`` grid: program
``(r, s)`` walks chunk ``s`` of row ``r``. A statistics pass stores each chunk's partial sums (or
maxima, minima) in a workspace of ``rows x SPLIT`` values per reduction; the next pass combines a row's
partials, in a fixed order, before its own walk. The last pass writes the output. Every value of the
row is read once per pass, as in ``looped``, by ``SPLIT`` times as many programs; a workspace holds a
few floats per row.
"""

from __future__ import annotations

from dataclasses import replace

from kernelevo.agent.builtin import codegen
from kernelevo.agent.builtin.codegen import Emitter, indent
from kernelevo.agent.builtin.expressions import NEG_INF, POS_INF, rounded
from kernelevo.agent.builtin.program import READ_ONCE, REDUCTIONS, Node, Program

COMBINE = {"sum": ("tl.sum", "0.0"), "max": ("tl.max", NEG_INF), "min": ("tl.min", POS_INF)}
CHUNK = ("tl.program_id(1) * chunk", "tl.minimum(tl.program_id(1) * chunk + chunk, n_cols)")
"""The columns program ``(r, s)`` walks: chunk ``s`` of its row."""


def batches(program: Program) -> list[list[Node]] | None:
    """The program's reductions in passes (each needs only the passes before it), if every one is a
    sum, max or min and the output is one value per element; else None (another strategy covers it)."""
    if program.out_level != "elem":
        return None
    em = Emitter(program)
    needed = em.deps(program.output)
    pending = [n for n in program.reductions if n.name in needed]
    if not pending or any(r.op not in COMBINE for r in pending):
        return None
    known = _row_loads(program, em)
    passes = []
    while pending:
        batch = [r for r in pending if em.row_deps(r.args[0]) <= known]
        if not batch:
            return None
        passes.append(batch)
        known |= {r.name for r in batch}
        pending = [r for r in pending if r not in batch]
        for node in program.nodes:  # per-row values that follow (the mean from a sum)
            if node.level == "row" and node.op not in REDUCTIONS and em.row_deps(node.name) <= known:
                known.add(node.name)
    return passes


def kernels(program: Program, static: bool) -> str:
    """One ``@triton.jit`` kernel per statistics pass (``pass0_kernel``, ...) and ``final_kernel``."""
    found = batches(program)
    assert found is not None, "split_passes: sums, maxima and minima per row, and an output per element"
    em = Emitter(program)
    reductions = [r for batch in found for r in batch]
    signature = codegen._signature(program, "split", static).replace(
        "ws_ptr", ", ".join([*(f"ws_{r.name}" for r in reductions), "out_ptr"]))
    head = codegen._tile_rows("looped", program.strided) + codegen._row_positions(program.view_rank)
    out = []
    for k, batch in enumerate(found):
        em.evict = "evict_last"  # the next pass reads the row again
        earlier = [r for b in found[:k] for r in b]
        body = head + _prologue(program, em, earlier, batch)
        partials = [replace(r, round_to=None) for r in batch]  # rounded once, after the chunks are combined
        for p in partials:
            em.by_name[p.name] = p
        body += codegen._pass(program, em, partials, {}, {r.name for r in earlier} | _row_loads(program, em), *CHUNK)
        for r in batch:
            em.by_name[r.name] = r
            body.append(f"tl.store(ws_{r.name} + rows[:, None] * SPLIT + tl.program_id(1), {r.name}, "
                        "mask=row_ok[:, None])")
        out.append(_jit(f"pass{k}_kernel", signature, body, f"statistics pass {k + 1}: "
                        + ", ".join(f"{r.op} {r.name}" for r in batch)))
    em.evict = "evict_first"
    body = head + _prologue(program, em, reductions, [])
    body += codegen._loop_head(*CHUNK)
    needed = em.deps(program.output, within_row=True)
    body += indent([em.statement(n) for n in program.nodes if n.name in needed and n.level != "row"]
                   + codegen._store(program), 1)
    out.append(_jit("final_kernel", signature, body, "the output of each chunk"))
    return "\n\n".join(out) + "\n"


def _row_loads(program: Program, em: Emitter) -> set[str]:
    return {n.name for n in program.nodes if n.op in READ_ONCE and n.level == "row"}


def _prologue(program: Program, em: Emitter, combined: list[Node], batch: list[Node]) -> list[str]:
    """Per-row values before a pass: inputs read once per row, the earlier passes' reductions combined
    from their partials, and what follows from them."""
    lines = ["# A row's values read once, and the statistics of the passes before this one."]
    needed = em.deps(program.output) if not batch else set().union(*(em.deps(r.args[0]) for r in batch))
    for node in program.nodes:
        if node.op in READ_ONCE and node.level == "row" and node.name in needed:
            lines.append(em.statement(node))
    known = _row_loads(program, em) | {r.name for r in combined}
    for r in combined:
        combine, fill = COMBINE[r.op]
        lines += [f"{r.name}_parts = tl.load(ws_{r.name} + rows[:, None] * SPLIT + tl.arange(0, SPLIT)[None, :], "
                  f"mask=row_ok[:, None], other={fill})",
                  f"{r.name} = {rounded(r, f'{combine}({r.name}_parts, axis=1)[:, None]')}"]
    for node in program.nodes:
        if node.level == "row" and node.op not in REDUCTIONS and node.op not in READ_ONCE and node.name not in known \
                and node.name in needed and em.row_deps(node.name) <= known:
            lines.append(em.statement(node))
            known.add(node.name)
    return lines


def _jit(name: str, signature: str, body: list[str], what: str) -> str:
    return "\n".join(["@triton.jit", f"def {name}({signature}):", f"    # Program (row, s): {what}.",
                      "    pid = tl.program_id(0)", *indent(body, 1)])


def launch_lines(program: Program, args: list[str], main: str, params: dict, sizes: str) -> list[str]:
    """The forward's workspaces and launches (after ``n_rows``, ``n_cols`` and ``out`` are set)."""
    found = batches(program) or []
    reductions = [r for batch in found for r in batch]
    extra = program.sizes_after(main)
    call = (f"{', '.join(args)}, {', '.join(f'ws_{r.name}' for r in reductions)}, out, n_rows, n_cols, chunk, "
            f"{extra}BLOCK_R=1, BLOCK_C=BLOCK_C, EVEN_R=True, EVEN_C=n_cols % BLOCK_C == 0, "
            f"WIDE=max({sizes}) >= 2**31, VEC=1, SPLIT=SPLIT, num_warps={params['num_warps']}")
    lines = [f"BLOCK_C, SPLIT = {params['BLOCK_C']}, {params['SPLIT']}",
             "# Few, long rows: every pass over a row is spread over SPLIT programs, each walking a chunk of",
             "# whole column blocks; a statistics pass leaves each chunk's partial result per row.",
             "chunk = ceil_div(ceil_div(n_cols, BLOCK_C), SPLIT) * BLOCK_C"]
    lines += [f"ws_{r.name} = torch.empty((n_rows, SPLIT), dtype=torch.float32, device={main}.device)"
              for r in reductions]
    lines += [f"pass{k}_kernel[(n_rows, SPLIT)]({call})" for k in range(len(found))]
    return [*lines, f"final_kernel[(n_rows, SPLIT)]({call})", "return out"]
