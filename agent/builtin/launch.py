"""``ModelNew.forward`` for a row program (see :mod:`codegen` for its kernel): the views, the output's
allocation and the launch, with the grid, block sizes and vector width a strategy chose."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernelevo.agent.builtin import split_passes
from kernelevo.agent.builtin.codegen import indent, splittable
from kernelevo.agent.builtin.program import Program


def forward(program: Program, strategy: str, params: dict[str, Any], max_block: int) -> str:
    """``ModelNew.forward``: views, allocation and the launch."""
    program, taken = _views_taken_once(program)
    main = program.main
    row_operands = [o for o in program.operands if o.kind == "row"]
    flat = strategy == "tiled" and program.flat
    lines = [f"def forward(self, {', '.join(program.inputs)}):"]
    body = [f"{name} = {expression}  # left in torch (the task allows partial replacement)"
            for name, expression in program.torch_prefix] + taken
    if program.broadcast_from:
        shapes = ", ".join(f"{source}.shape" for source in program.broadcast_from)
        first = program.broadcast_from[0]
        main = "full"  # holds the output's shape and device; no kernel reads it
        body.append(f"full = torch.empty((), device={first}.device).expand(torch.broadcast_shapes({shapes}))")
    body += [f"{o.source} = {o.source}.contiguous()" for o in program.operands
             if o.kind in ("row", "per_row") or (o.kind in ("col", "scalar", "channel") and o.source in program.inputs)]
    body += _sizes(program, main, flat)
    args = _arguments(program, main, flat, body, len(program.torch_prefix) + len(taken) + bool(program.broadcast_from))
    vec = [] if program.strided else _vec_check(params, row_operands, args)  # a row's values are not adjacent
    body += vec
    if strategy == "registers":
        body += ["block_c = max(next_power_of_2(n_cols), 16)",
                 f"if block_c > {max_block}:",
                 f"    raise ValueError(f'rows of {{n_cols}} do not fit in registers (at most {max_block})')"]
        block_c = "block_c"
        grid = "(ceil_div(n_rows, BLOCK_R),)"
    elif strategy == "looped":
        block_c = str(params["BLOCK_C"])
        grid = "(ceil_div(n_rows, BLOCK_R),)"
    elif strategy == "split_passes":
        sizes = _counts(program)
        body += split_passes.launch_lines(program, args, main, params, sizes)
        return "\n".join(lines + indent(body, 1)) + "\n"
    elif strategy == "split":
        sizes = _counts(program)
        split, block_c = params["SPLIT"], params["BLOCK_C"]
        body += [f"BLOCK_C, SPLIT = {block_c}, {split}",
                 "# Few, long rows: SPLIT programs per row, each reducing a chunk of whole column blocks.",
                 f"ws = torch.empty((n_rows, {len(splittable(program) or ())}, SPLIT), dtype=torch.float32, "
                 f"device={main}.device)",
                 "chunk = ceil_div(ceil_div(n_cols, BLOCK_C), SPLIT) * BLOCK_C",
                 "fused_kernel[(n_rows, SPLIT)](",
                 f"    {', '.join(args)}, ws, n_rows, n_cols, chunk, {program.sizes_after(main)}"
                 "BLOCK_R=1, BLOCK_C=BLOCK_C,",
                 f"    EVEN_R=True, EVEN_C=n_cols % BLOCK_C == 0, WIDE=max({sizes}) >= 2**31, SPLIT=SPLIT,",
                 f"    VEC={'vec' if vec else 1},",
                 f"    num_warps={params['num_warps']})",
                 *_finish_launch(split),
                 "return out"]
        return "\n".join(lines + indent(body, 1)) + "\n"
    else:
        block_c = str(params["BLOCK_C"])
        grid = "(ceil_div(n_rows, BLOCK_R) * ceil_div(n_cols, BLOCK_C),)"
    block_r = 1 if flat else params.get("BLOCK_R", 1)
    if params.get("PROGRAMS_PER_SM"):
        body += ["# Persistent: a few programs per SM loop over the tiles (4 'SMs' under the CPU interpreter).",
                 f"sms = torch.cuda.get_device_properties({main}.device).multi_processor_count "
                 f"if {main}.is_cuda else 4"]
        grid = f"(max(1, min({grid[1:-2]}, sms * {params['PROGRAMS_PER_SM']})),)"
    sizes = _counts(program)
    body += [f"BLOCK_R, BLOCK_C = {block_r}, {block_c}",
             f"fused_kernel[{grid}](",
             f"    {', '.join(args)}, out, n_rows, n_cols, {program.sizes_after(main)}"
             "BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C,",
             "    EVEN_R=n_rows % BLOCK_R == 0, EVEN_C=n_cols > 0 and n_cols % BLOCK_C == 0,  # (no column: none read)",
             f"    WIDE=max({sizes}) >= 2**31, VEC={'vec' if vec else 1},",
             f"    num_warps={params['num_warps']}{_stages(params)})",
             "return out"]
    return "\n".join(lines + indent(body, 1)) + "\n"


def _sizes(program: Program, main: str, flat: bool) -> list[str]:
    """The lines that set ``n_cols``, ``n_rows`` (and ``inner``) and allocate ``out``."""
    if flat:
        lines = ["# Nothing broadcasts per column: treat the tensor as one long row.",
                 f"n_rows, n_cols = 1, {main}.numel()"]
    elif program.span is not None:
        first, count, _ = program.span
        lines = [f"# Rows: every position outside dims {first}-{first + count - 1}; columns: the positions in them.",
                 f"n_cols = {main}.shape[{first}:{first + count}].numel()",
                 f"n_rows = {main}.shape[:{first}].numel() * {main}.shape[{first + count}:].numel()"]
        if program.strided:
            lines.append(f"inner = {main}.shape[{first + count}:].numel()  # how far apart a row's values lie")
    else:
        d, n = program.chunk_dim, program.main_chunks
        cols = f"{main}.shape[-1] // {n}" if n > 1 and d is None else f"{main}.shape[-1]"
        per_chunk = f" // {n}" if d is not None else ""
        # (rows of no columns are rows too: each reduced to what a reduction of nothing gives)
        lines = [f"n_cols = {cols}", f"n_rows = {main}.shape[:-1].numel(){per_chunk}"]
        if d is not None:
            lines += [f"# chunk k of dim {d}: rows [k * chunk_rows, (k + 1) * chunk_rows) of each position before it",
                      f"chunk_rows = {main}.shape[{d}:-1].numel() // {n}"]
    rows, rows_shape = f"*{main}.shape[:-1]", f"{main}.shape[:-1]"
    if program.chunk_dim is not None:  # one chunk's shape
        d = program.chunk_dim
        rows = f"*{main}.shape[:{d}], {main}.shape[{d}] // {program.main_chunks}, *{main}.shape[{d} + 1:-1]"
        rows_shape = f"({rows},)"
    shape = {("elem", True): f"({rows}, n_cols)", ("row", True): f"({rows}, 1)",
             ("row", False): rows_shape, ("elem", False): f"({rows}, n_cols)"}
    if program.span is not None:
        first, count, _ = program.span
        before, after = f"*{main}.shape[:{first}]", f"*{main}.shape[{first + count}:]"
        shape.update({("elem", True): f"{main}.shape", ("elem", False): f"{main}.shape",
                      ("row", True): f"({before}, {'1, ' * count}{after})", ("row", False): f"({before}, {after})"})
    out_shape = f"{main}.shape" if flat else shape[(program.out_level, program.out_keepdim)]
    return [*lines, f"out = torch.empty({out_shape}, dtype=torch.{program.out_dtype}, device={main}.device)"]


def _arguments(program: Program, main: str, flat: bool, body: list[str], views_at: int) -> list[str]:
    """The kernel's arguments for the operands (each with its strides or sizes); a view's line goes into
    ``body`` at ``views_at`` (after the torch prefix, the views taken and the broadcast shape)."""
    args = []
    for o in program.operands:
        args.append(f"float({o.source})" if o.kind == "value" else o.source)
        if o.kind == "row":
            args.append("n_cols" if flat or program.span is not None else f"{o.source}.shape[-1]")
        elif o.kind == "view":
            args[-1] = f"{o.name}_view"
            args.append(f"*{o.name}_view.stride()")
            line = f"{o.name}_view = {o.source}.expand({main}.shape)  # broadcast dims get stride 0: no copy"
            body.insert(views_at, line)
        elif o.kind == "channel":
            d, d0 = o.channel_dim, o.channel_from
            across = f"{main}.shape[{d}]" if d0 is None else f"{main}.shape[{d0}:{d + 1}].numel()"
            args += [f"{main}.shape[{d + 1}:-1].numel()", across]
    return args


def _counts(program: Program) -> str:
    """The tuple of element counts whose largest decides 64-bit offsets: every tensor the kernel reads by
    rows or through strides, and the output."""
    read = [f"{o.source}.numel()" for o in program.operands if o.kind in ("row", "view")]
    return f"({', '.join([*read, 'out.numel()'])},)"


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


def _finish_launch(split: int) -> list[str]:
    """The combine's launch: rows of SPLIT partials, about a thousand values a program (one warp for up to
    64 partials a row, four beyond)."""
    rows = max(1, min(16, 1024 // split))
    return [f"finish_kernel[(ceil_div(n_rows, {rows}),)](ws, out, n_rows, n_cols, BLOCK_R={rows}, SPLIT=SPLIT, "
            f"num_warps={1 if split <= 64 else 4})"]


def _views_taken_once(program: Program) -> tuple[Program, list[str]]:
    """``program`` with each view of an input read through strides (``x[:, 1:]``) named once, and the lines
    that take them: the launch reads a view's shape, strides and size, and each indexing costs host time."""
    named = {o.source: f"{o.name}_of" for o in program.operands if o.kind == "view" and not o.source.isidentifier()}
    if not named:
        return program, []
    operands = [replace(o, source=named.get(o.source, o.source)) for o in program.operands]
    return (replace(program, operands=operands, broadcast_from=[named.get(s, s) for s in program.broadcast_from]),
            [f"{name} = {source}" for source, name in named.items()])
