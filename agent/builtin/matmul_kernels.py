"""The Triton text of a matmul chain (:mod:`matmul` recognises the chain): one GEMM kernel per
stage, with its bias and epilogue fused on the fp32 accumulator while it is in registers; variants
for split-K (few output tiles, a long K), triangular results (tiles a ``triu``/``tril`` zeroes skip
their loads) and Hopper's tensor-memory copies (TMA descriptors, a persistent grid); and the
``forward`` that launches them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import torch

from kernelevo.agent.builtin import codegen, expressions
from kernelevo.agent.builtin.matmul import Stage

MATMUL_KERNEL = '''@triton.jit
def {name}(a_ptr, w_ptr, {operands}out_ptr, M, N, K, stride_am, stride_ak, stride_wn, stride_wk,{batch_args}
{pad}BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
{pad}EVEN_K: tl.constexpr, WIDE: tl.constexpr, WIDEN: tl.constexpr{split_arg}):
    # Grouped ordering: GROUP_M row-blocks share each column-block of W while it is in L2.
    pid = tl.program_id(0){batch_start}
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

K_MAJOR_HELPER = '''def k_major(x, kp):
    """``x`` ([rows, K], any strides) with its rows running along K, a multiple of 16 values apart and
    ``kp`` long: ``x`` itself where it already is, else a copy with K zero-padded to ``kp``.

    Triton takes an integer argument for aligned only when it divides by 16 (in values, not bytes): a
    row stride that does not (K = 2949, or 200) leaves the GEMM's tile loads one value wide; copied,
    they are 16 bytes. The copy moves rows x kp values twice, small beside a large GEMM's rows x N x K
    products, and the zero columns add nothing."""
    aligned = x.stride(0) % 16 == 0 and x.data_ptr() % 16 == 0
    if x.stride(1) == 1 and x.shape[1] == kp and aligned:
        return x
    out = torch.empty((x.shape[0], kp), dtype=x.dtype, device=x.device)
    out[:, :x.shape[1]] = x
    out[:, x.shape[1]:] = 0  # only the padding is filled: the rest is written once, by the copy
    return out
'''

BATCH_ARGS = " stride_ab, stride_wb, INNER_B, stride_abi, stride_wbi,"
BATCH_START = """
    # A batched matmul: the batch is folded into the grid's one axis (the others stop at 65535), one
    # batch's output tiles after another. The batch is two levels, outer and inner (INNER_B matrices
    # each), so that an operand broadcast along either (stride 0) is read in place, never copied; A, W
    # and the output start at their matrices (64-bit offsets: a batch may pass 2**31 elements).
    batch_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    batch = (pid // batch_tiles).to(tl.int64)
    pid = pid % batch_tiles
    a_ptr += (batch // INNER_B) * stride_ab + (batch % INNER_B) * stride_abi
    w_ptr += (batch // INNER_B) * stride_wb + (batch % INNER_B) * stride_wbi
    out_ptr += batch * M * N"""

BATCH_HELPER = '''def batch_levels(a, w):
    """The batch of ``a @ w`` (their leading dims, broadcast) as two levels, outer and inner, each
    (count, a's stride, w's stride): an operand broadcast along a level has stride 0 there and is read
    in place. Neighbouring dims merge where both operands' strides allow (a contiguous [B, H] batch is
    one level); where more than two levels remain, the operands are reshaped into one (a copy).
    Returns (batch shape, a, w, outer, inner), a and w viewed at the batch shape."""
    batch = torch.broadcast_shapes(a.shape[:-2], w.shape[:-2])
    a = a.expand(*batch, *a.shape[-2:])
    w = w.expand(*batch, *w.shape[-2:])
    levels = []
    for d, size in enumerate(batch):
        if size == 1:
            continue
        sa, sw = a.stride(d), w.stride(d)
        if levels and levels[-1][1] == sa * size and levels[-1][2] == sw * size:
            levels[-1] = (levels[-1][0] * size, sa, sw)
        else:
            levels.append((size, sa, sw))
    if len(levels) > 2:
        a = a.reshape(-1, *a.shape[-2:])
        w = w.reshape(-1, *w.shape[-2:])
        levels = [(a.shape[0], a.stride(0), w.stride(0))]
    levels = [(1, 0, 0)] * (2 - len(levels)) + levels
    return batch, a, w, levels[0], levels[1]
'''
"""Emitted beside a batched matmul's ``forward`` (:data:`BATCH_START` reads its two levels)."""

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
    if any(st.batched for st in stages):
        return "a batched matmul (the tensor descriptors are 2-D)"
    if any(st.a_transposed for st in stages):
        return "the left operand is read transposed (its rows are not contiguous)"
    for st in stages:
        for what, count in (("K", st.k), ("N", st.n)):
            if count * itemsize % 16:
                return f"a row of {count} ({what}) is not a multiple of 16 bytes"
    return None


K_MAJOR_ROWS = 1024
"""Copies along K are offered where 1/M + 1/N < 1/K_MAJOR_ROWS. Derived, not measured: copying both
operands (rows x K and N x K values, read and written at about 3 TB/s) against an fp32-emulating GEMM at
70-130 TFLOP/s (six or three bf16 products per fp32 one on the H200) is then about a tenth of the GEMM's
time or less; a transposing copy runs below full bandwidth, so it may be more."""


def k_major_seed(stages: Sequence[Stage], rows: int, dtype: str) -> str | None:
    """Where the GEMM seeds copy their operands along K (``K_MAJOR``, :data:`K_MAJOR_HELPER`):
    ``"first"`` where K is not a multiple of 16 values (Triton's test of an aligned integer argument:
    compiled for sm_90a, K = 2949 gave 4-byte ``cp.async`` and spilled registers; copied, 16-byte and
    none); ``"later"`` where an operand runs the other way ([K, N] rows of N, or ``A.T``), whose loads
    compile to 16 bytes all the same, so the copy is only a search's option; None where it does not
    apply. fp32 only, and large GEMMs only (:data:`K_MAJOR_ROWS`): a bf16 or fp16 GEMM runs some six
    times faster, so a copy weighs six times more."""
    if dtype != "float32" or any(st.batched for st in stages):
        return None
    if not all(1 / max(rows, 1) + 1 / max(st.n, 1) < 1 / K_MAJOR_ROWS for st in stages):
        return None
    if any(st.k % 16 for st in stages):
        return "first"
    return "later" if any(not st.transposed or st.a_transposed for st in stages) else None


def kernel(stage: Stage, index: int, precision: str | None, split_k: int = 1, tma: bool = False) -> str:
    """The fused GEMM kernel of one stage; with ``split_k`` > 1, a kernel that writes partial sums
    and a ``_reduce`` kernel that adds them and applies the epilogue; with ``tma``, the persistent
    TMA kernel."""
    name = f"stage{index}_kernel"
    program = stage.epilogue
    lines: list[str] = []
    operands = ""
    # No epilogue: round the accumulator to the output dtype ourselves (see expressions.ROUND_TO_BF16).
    result = "round_to_bf16(acc)" if stage.out_dtype == "bfloat16" else "acc"
    if program is not None:
        em = codegen.Emitter(program)
        extra = program.operands[1:]  # the first operand is the accumulator
        operands = "".join(f"{o.name}_ptr, {o.name}_stride, " if o.kind == "row" else f"{o.name}_ptr, "
                           for o in extra)
        lines = em.epilogue_statements()
        result = program.output
    triangle, k_loop = "", K_LOOP
    if stage.triangle is not None:
        kind, d = stage.triangle
        triangle = f"\n    kept = tl.where({TRIANGLE_KEEP[kind].format(d=d)}, {result}, 0.0)"
        result = "kept"
        k_loop = TRIANGLE_K_LOOP.format(kind=kind, live=TRIANGLE_LIVE[kind].format(d=d))
    epilogue = EPILOGUE.format(epilogue="\n".join("    " + line for line in lines) or "    pass", result=result,
                               triangle=triangle)
    precision = f", input_precision={expressions.dot_name(precision)}" if precision else ""
    if tma:
        return TMA_KERNEL.format(name=name, operands=operands, pad=" " * (len(name) + 5), precision=precision,
                                 finish=textwrap.indent(epilogue, "    "))
    if split_k <= 1:
        return MATMUL_KERNEL.format(name=name, operands=operands, pad=" " * (len(name) + 5), precision=precision,
                                    split_arg="", k_loop=k_loop, finish=epilogue,
                                    batch_args=BATCH_ARGS if stage.batched else "",
                                    batch_start=BATCH_START if stage.batched else "")
    assert not stage.batched, "split-K is not offered for a batched matmul"
    main = MATMUL_KERNEL.format(name=name, operands="", pad=" " * (len(name) + 5), precision=precision,
                                batch_args="", batch_start="",
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
    if stages[0].batched:
        return batched_forward(stages[0], input_name, params, inputs)
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
            body += [f"tiles = ceil_div(h.shape[0], BLOCK_M) * ceil_div({n}, BLOCK_N)",
                     f"stage{i}_kernel[(min(tiles, sms),)](",
                     f"    h, {w}, {epilogue_args}out, h.shape[0], {n}, h.shape[1], h.stride(0), {w}.stride(0), sms,",
                     "    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,",
                     f"    W_NK={stage.transposed}, {wide}, WIDEN=INTERPRETED,",
                     f"    num_warps={params['num_warps']}, num_stages={params['num_stages']})",
                     "h = out"]
            continue
        tiles = f"ceil_div(h.shape[0], BLOCK_M) * ceil_div({n}, BLOCK_N)"
        if split > 1:
            body += [f"ws = torch.empty(({split}, h.shape[0], {n}), dtype=torch.float32, device=h.device)",
                     f"grid = ({tiles}, {split})"]
        else:
            body.append(f"grid = ({tiles},)")
        copy, (a, b, k, strides) = _operands(w, stage.transposed, strides, bool(params.get("K_MAJOR")))
        body += copy
        wide = f"WIDE=max(h.shape[0], {n}) * max({k}, {n}) >= 2**31"
        body += [f"stage{i}_kernel[grid](",
                 f"    {a}, {b}, {'ws, ' if split > 1 else epilogue_args + 'out, '}h.shape[0], {n}, {k}, {strides},",
                 "    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,",
                 f"    EVEN_K={k} % BLOCK_K == 0, {wide},",
                 "    WIDEN=INTERPRETED," + (f" SPLIT_K={split}," if split > 1 else ""),
                 f"    num_warps={params['num_warps']}, num_stages={params['num_stages']})"]
        if split > 1:
            # 64 x 64 tiles for the reduction: 32 fp32 values per thread, whatever the GEMM's tiles
            body += [f"stage{i}_kernel_reduce[(ceil_div(h.shape[0], 64), ceil_div({n}, 64))](",
                     f"    ws, {epilogue_args}out, h.shape[0], {n}, BLOCK_M=64, BLOCK_N=64, SPLIT_K={split}, {wide},",
                     "    num_warps=4)"]
        body.append("h = out")
    result = "h" if stages[0].a_transposed else f"h.reshape(*{input_name}.shape[:-1], h.shape[-1])"
    body.append(f"return self._kernelevo_tail({result})" if stages[-1].tail is not None else f"return {result}")
    args = ", ".join(inputs or [input_name])
    return f"def forward(self, {args}):\n" + "\n".join("    " + line for line in body) + "\n"


def _operands(w: str, transposed: bool, w_strides: str, k_major: bool) -> tuple[list[str], tuple[str, ...]]:
    """The lines that prepare a stage's operands, and what its launch passes: A, W, K and the four
    strides. With ``k_major``, both as rows along K (``k_major``), a K that is not a multiple of 16
    padded to whole steps."""
    if not k_major:
        return [], ("h", w, "h.shape[1]", f"h.stride(0), h.stride(1), {w_strides}")
    lines = ["kp = h.shape[1] if h.shape[1] % 16 == 0 else ceil_div(h.shape[1], BLOCK_K) * BLOCK_K",
             "a_k = k_major(h, kp)", f"w_k = k_major({w if transposed else w + '.t()'}, kp)"]
    return lines, ("a_k", "w_k", "kp", "a_k.stride(0), 1, w_k.stride(0), 1")


def batched_forward(stage: Stage, input_name: str, params: dict[str, Any], inputs: Sequence[str] = ()) -> str:
    """``ModelNew.forward`` of one batched matmul: the operands' batches broadcast and read through
    their strides (:data:`BATCH_HELPER`), one launch over every batch's output tiles, the output shaped
    as the broadcast batch."""
    w = stage.weight
    # W is [K, N] per batch, or [N, K] when read transposed: the kernel takes its strides along N and K
    n_k = "wb.stride(-2), wb.stride(-1)" if stage.transposed else "wb.stride(-1), wb.stride(-2)"
    n = "wb.shape[-2]" if stage.transposed else "wb.shape[-1]"
    cols = [o.source for o in stage.epilogue.operands[1:]] if stage.epilogue else []
    body = [f"batch, ab, wb, outer, inner = batch_levels({input_name}, {w})",
            "m, k = ab.shape[-2:]",
            f"n = {n}",
            "count = outer[0] * inner[0]",
            f"out = torch.empty((count, m, n), dtype=torch.{stage.out_dtype}, device=ab.device)",
            f"BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = {params['BLOCK_M']}, {params['BLOCK_N']}, {params['BLOCK_K']}, "
            f"{params['GROUP_M']}",
            "grid = (ceil_div(m, BLOCK_M) * ceil_div(n, BLOCK_N) * count,)",
            "# 64-bit offsets when one matrix's farthest element (through its strides) or the output passes 2**31",
            "span = max((t.shape[-2] - 1) * abs(t.stride(-2)) + (t.shape[-1] - 1) * abs(t.stride(-1))",
            "           for t in (ab, wb))",
            "stage0_kernel[grid](",
            f"    ab, wb, {''.join(c + ', ' for c in cols)}out, m, n, k, ab.stride(-2), ab.stride(-1), {n_k}, "
            "outer[1], outer[2], inner[0], inner[1], inner[2],",
            "    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,",
            "    EVEN_K=k % BLOCK_K == 0, WIDE=max(span, m * n) >= 2**31, WIDEN=INTERPRETED,",
            f"    num_warps={params['num_warps']}, num_stages={params['num_stages']})",
            "h = out.reshape(*batch, m, n)"]
    body.append("return self._kernelevo_tail(h)" if stage.tail is not None else "return h")
    args = ", ".join(inputs or [input_name])
    return f"def forward(self, {args}):\n" + "\n".join("    " + line for line in body) + "\n"
