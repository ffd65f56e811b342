"""The built-in policy (no LLM): a search over Triton templates generated from the reference's structure.

Generation 0 tries seeds chosen by heuristics from the shapes and dtype; later generations mutate
the archive's elites one parameter at a time (block sizes, rows per program, warps), or switch
strategy, never repeating a parameter set. An empty proposal means the neighbourhood of every elite
has been tried: the search has converged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kernelevo.agent.archive import best, select_parents
from kernelevo.agent.builtin import (
    attention,
    conv,
    conv_taps,
    cross_entropy,
    dimreduce,
    embedding,
    groupnorm,
    matmul_kernels,
    pool,
    rearrange,
    resample,
    rotary,
    scan,
    sort,
    split_passes,
    take_along,
    unfold,
    view_copy,
)
from kernelevo.agent.builtin.codegen import online_pairs, splittable
from kernelevo.agent.builtin.gpu_target import target
from kernelevo.agent.builtin.recognize import Plan, recognise
from kernelevo.agent.builtin.sequence import searched
from kernelevo.agent.builtin.templates import MAX_REGISTER_BLOCK, STRATEGIES, WHY_STRATEGY, render
from kernelevo.agent.policy import Proposal, SearchView
from kernelevo.tasks.task import Task

STEPS: dict[str, list[int]] = {
    "BLOCK_R": [1, 2, 4, 8, 16, 32, 64],
    "BLOCK_C": [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "BLOCK_M": [32, 64, 128, 256, 512, 1024],
    "BLOCK_N": [16, 32, 64, 128, 256],
    "BLOCK_K": [16, 32, 64, 128],
    "GROUP_M": [1, 4, 8, 16],
    "num_stages": [2, 3, 4, 5],
    "PROGRAMS_PER_SM": [1, 2, 4, 8, 16],
    "SPLIT_K": [1, 2, 4, 8, 16, 32, 64],
    "SPLIT": [2, 4, 8, 16, 32, 64, 128, 256, 512],
    "BLOCK_I": [1, 32, 64, 128, 256, 512, 1024],
    "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
}
KIND_STEPS: dict[str, dict[str, list[int]]] = {
    # a strided reduction with nothing inside the reduced dims walks long contiguous columns
    "dim_reduce": {"BLOCK_R": [1, 2, 4, 8, 16, 32, 64, 256, 1024, 2048, 4096, 8192],
                   "SPLIT": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]},
    "scan": {"BLOCK_R": [4, 8, 16, 32, 64, 256, 1024, 2048, 4096, 8192]},
    # few classes: many rows a tile, the classes padded to a small power of two
    "cross_entropy": {"BLOCK_R": [1, 2, 4, 8, 16, 32, 64, 128, 256],
                      "BLOCK_C": [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]},
}
"""Steps that differ for one kind of plan from :data:`STEPS`."""
MUTATION_ORDER: dict[str, tuple[str, ...]] = {
    # Tensor-core kernels: the tile shape and the pipeline depth decide the speed (the warps mostly
    # follow from the tile), so those are stepped first.
    "matmul": ("BLOCK_N", "BLOCK_M", "num_stages", "BLOCK_K", "num_warps", "GROUP_M", "SPLIT_K"),
    "attention": ("BLOCK_N", "BLOCK_M", "num_stages", "num_warps"),
    "dim_reduce": ("BLOCK_I", "BLOCK_R", "SPLIT", "num_warps"),
    "scan": ("BLOCK_R", "BLOCK_I", "num_warps"),
    "conv": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"),
}
"""The order in which parameters are stepped, per kind; other kinds follow :data:`STEPS`."""
ELEMENTS_PER_THREAD = 8
"""Registers strategy: aim for this many elements of a tile per thread (fp32 registers stay below spills)."""


def key(strategy: str, params: dict[str, Any]) -> str:
    return strategy + json.dumps(params, sort_keys=True)


def next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def prev_pow2(n: int) -> int:
    """The largest power of two not above ``n`` (1 for anything below 2)."""
    return 1 << max(int(n).bit_length() - 1, 0)


# Below these sizes the split seeds (split-K, row splitting) go last rather than first: their second
# launch costs host time comparable to the GPU work (measured on the H200; see the seeds).
SPLIT_FIRST_FLOPS = 16e9
SPLIT_FIRST_BYTES = 256 << 20
SPLIT_FIRST_ROW_BYTES = 256 << 10


def _clamp(value: int, name: str) -> int:
    values = STEPS[name]
    return min(values, key=lambda v: abs(v - value))


def _has_tensor_descriptors() -> bool:
    """Whether TMA templates can run: the installed Triton builds descriptors in kernels
    (``tl.make_tensor_descriptor``) and the GPU has the copy engine for them."""
    import triton.language as tl

    return hasattr(tl, "make_tensor_descriptor") and target().tma


def vector_width(plan: Plan) -> int:
    """The ``VEC`` worth promising the compiler for a row or pointwise plan (1: none). Triton proves
    16-element alignment of a row length by itself; for others (1000, 4104) it reads one element per
    instruction unless told that rows start on a boundary of VEC elements, VEC * itemsize <= 16 bytes."""
    if plan.kind not in ("pointwise", "row") or plan.program is None:
        return 1
    n = plan.rows * plan.cols if plan.kind == "pointwise" and plan.program.flat else plan.cols
    if n % 16 == 0:
        return 1
    vec = 16 // plan.itemsize
    while vec > 1 and n % vec:
        vec //= 2
    return vec


def shared_bytes(plan: Plan, params: dict[str, Any]) -> int:
    """A lower bound on the shared memory a GEMM or attention tile pipeline takes: one buffer per
    stage for the streamed operands (A and W; K and V) and, for attention, the resident Q block."""
    stages, item = params.get("num_stages", 1), plan.itemsize
    if plan.kind == "matmul" or (plan.kind == "conv" and "BLOCK_K" in params):
        return stages * (params["BLOCK_M"] + params["BLOCK_N"]) * params["BLOCK_K"] * item
    if plan.kind == "attention":
        d = attention.block_d(plan.extra["head_dim"])
        return (params["BLOCK_M"] * d + stages * 2 * params["BLOCK_N"] * d) * item
    return 0


def seeds(plan: Plan) -> list[tuple[str, dict[str, Any], str]]:
    """Starting points from the shapes: (strategy, params, why). For kernels in sequence, those of
    the segment the search tunes."""
    plan = searched(plan)
    out = _seeds(plan)
    vec = vector_width(plan)
    if vec > 1 and plan.itemsize < 4:
        # On the H200, bf16 rows of 4100 took 0.319 ms with VEC=4 against 0.442 ms without: 16-bit
        # scalar loads are twice the instructions per byte of 32-bit ones.
        note = f"; rows promised to start on {vec}-element boundaries (vector loads)"
        out = [(s, dict(p, VEC=vec), w + note) for s, p, w in out]
    elif vec > 1:  # fp32 rows of 4100: 0.393 ms without, 0.403 ms with; left to the search (a mutation)
        out = [(s, dict(p, VEC=1), w) for s, p, w in out]
    if plan.kind in ("pointwise", "row"):
        # Sizes as compile-time constants, as torch.compile's kernels have them. On the H200, bf16
        # rms norm rows of 4100 in blocks of 2048: 0.184 -> 0.158 ms (torch.compile 0.163); rmsnorm
        # at 8192, swiglu, elementwise_chain and row_sum: within 2.1% either way. Turning it off is a mutation.
        out = [(s, dict(p, STATIC=True), w) for s, p, w in out]
    return out


Seeds = list[tuple[str, dict[str, Any], str]]


def _seeds(plan: Plan) -> Seeds:
    by_kind = {
        "pointwise": _pointwise_seeds,
        "matmul": _matmul_seeds,
        "attention": _attention_seeds,
        "conv": lambda p: conv.seeds(p.extra["conv"], p.dtype, target().shared_bytes),
        "pool": lambda p: [("window", params, why) for params, why in pool.seeds()],
        "resample": lambda p: [("gather", params, why) for params, why in resample.seeds()],
        "rearrange": lambda p: [("moved", params, why) for params, why in rearrange.seeds()],
        "view_copy": lambda p: [("through_strides", params, why) for params, why in view_copy.seeds()],
        "rotary": lambda p: [("halves", params, why) for params, why in rotary.seeds()],
        "embedding": lambda p: [("rows", params, why) for params, why in embedding.seeds(p.cols)],
        "take_along": lambda p: [("flat", params, why) for params, why in take_along.seeds()],
        "unfold": lambda p: [("columns", params, why) for params, why in unfold.seeds()],
        "group_norm": lambda p: [("three_pass", params, why) for params, why in groupnorm.seeds()],
        "dim_reduce": lambda p: [("strided", params, why) for params, why in dimreduce.seeds(
            p.extra["reduction"], p.extra["inner"], p.rows, p.cols, target().sms,
            element_bytes=p.itemsize)],
        "scan": lambda p: [("carried", params, why) for params, why in scan.seeds(p.extra["inner"])],
        "sort": lambda p: [("bitonic", params, why) for params, why in (
            sort.seeds(p.cols) if p.extra["sort"].dim == -1 else sort.strided_seeds(p.cols, p.extra["inner"]))],
        "cross_entropy": _cross_entropy_seeds,
    }
    return by_kind.get(plan.kind, _row_seeds)(plan)


def _pointwise_seeds(plan: Plan) -> Seeds:
    out: Seeds = []
    if plan.program is not None and plan.program.flat:
        # Small blocks first: on the H200 1024 elements and 4 warps (8 per thread) beat larger blocks.
        for block, warps in ((1024, 4), (512, 4), (2048, 8), (4096, 8)):
            out.append(("tiled", {"BLOCK_C": block, "num_warps": warps},
                        f"seed: flat tiles of {block} elements ({block // (warps * 32)} per thread)"))
    else:
        block_c = min(next_pow2(plan.cols), 1024)
        for rows, warps in ((1, 4), (2, 4), (4, 8)):
            block_r = _clamp(max(1, rows * 1024 // block_c), "BLOCK_R")
            out.append(("tiled", {"BLOCK_R": block_r, "BLOCK_C": block_c, "num_warps": warps},
                        f"seed: {block_r} x {block_c} tiles, {block_r * block_c // (warps * 32)} elements "
                        "per thread"))
    return out


def _matmul_seeds(plan: Plan) -> Seeds:
    out: Seeds = []
    # Tensor-core tiles known to suit Hopper; fp32 tasks emulate fp32 products with six bf16 ones
    # (eager's accuracy or better; see expressions.DOT_PRECISION).
    precision = {"precision": "bf16x6"} if plan.dtype == "float32" else {}
    # Ordered by the Triton compile gate's report for sm_90a (triton 3.9): the first two fit in
    # registers with a gelu epilogue; the wider tiles spill.
    element_bytes = 4 if plan.dtype == "float32" else 2
    k_major = matmul_kernels.k_major_seed(plan.extra["stages"], plan.rows, plan.dtype)
    copied = {"K_MAJOR": k_major == "first"} if k_major else {}
    # K steps no longer than the shortest K (a K of 32 read in steps of 64 loads as much padding)
    bk = max(16, min(64, next_pow2(min(st.k for st in plan.extra["stages"]))))
    for bm, bn, warps, wanted in ((128, 128, 8, 3), (64, 128, 4, 4), (128, 256, 8, 3), (256, 128, 8, 3)):
        # fewer stages where the operand buffers would not fit (fp32 tiles are twice bf16's)
        stages = conv_taps.fitting_stages(bm, bn, bk, wanted, element_bytes, target().shared_bytes) or 1
        out.append(("gemm", {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_warps": warps,
                             "num_stages": stages, **precision, **copied},
                    f"seed: {bm} x {bn} tiles, K steps of {bk}, {stages} stages in flight"
                    + (", operands copied along K" if copied.get("K_MAJOR") else "")))
    if matmul_kernels.tma_ready(plan.extra["stages"], plan.dtype) is None and _has_tensor_descriptors():
        # The TMA template second and fourth of these tiles (each moves down one for every seed put in
        # front of it below), so that a short search measures both kinds.
        # A K of at most 64 makes the GEMM a write of its output (a few products per value stored):
        # the TMA template's stores go first there. On an H100, [32768, 32] @ [32, 32768] fp32 took
        # 1.82 ms through TMA, 2.69-2.79 ms in plain 128 x 128 tiles, 3.49 ms with K steps of 64;
        # eager 2.57 ms.
        store_bound = max(st.k for st in plan.extra["stages"]) <= 64
        for at, (bm, bn, warps, wanted) in ((0 if store_bound else 1, (128, 128, 8, 4)), (3, (128, 256, 8, 3))):
            stages = conv_taps.fitting_stages(bm, bn, bk, wanted, element_bytes, target().shared_bytes)
            if stages is None:
                continue
            out.insert(at, ("gemm_tma", {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                                         "num_warps": warps, "num_stages": stages, **precision},
                            f"seed: TMA tiles of {bm} x {bn}, K steps of {bk}, {stages} stages, one program per SM"))
    if precision:
        # Three bf16 products per fp32 one: 1.6x as fast again as six on the H200, with a few times
        # eager's error (within the judge's precision rule): second, so that a short search measures it.
        first = dict(out[0][1], precision="bf16x3")
        out.insert(1, (out[0][0], first, out[0][2] + ", three bf16 products per fp32 one"))
    if copied:
        # the other choice third, so that a short search measures the copy along K
        plain = next(seed for seed in out if seed[0] == "gemm")
        other = dict(plain[1], K_MAJOR=not plain[1]["K_MAJOR"])
        why = plain[2].replace(", operands copied along K", "")
        out.insert(2, ("gemm", other, why + (", operands copied along K" if other["K_MAJOR"] else "")))
    # Few output tiles and a long K (a narrow projection, a small batch): split K so that every
    # SM has work; the partial sums are added in a second, deterministic pass.
    stages_ = plan.extra["stages"]
    tiles = min(-(-plan.rows // 64) * -(-st.n // 128) for st in stages_)
    k = min(st.k for st in stages_)
    sms = target().sms
    if tiles < sms and k >= 512 and not any(st.batched for st in stages_):
        # Two programs per SM in one wave: the most splits whose programs fit twice over the SMs, with
        # the stages that let two share an SM's shared memory. On the H200, K = 524288 for 256 x 256
        # outputs: 1.149 ms split 32 ways with 2 stages (two programs an SM), 1.508 ms split 16 with 4
        # stages (one), 1.848 ms split 16 with 2.
        split = max(2, min(prev_pow2(2 * sms // tiles), k // 256, STEPS["SPLIT_K"][-1]))
        per_sm = -(-tiles * split // sms)
        stages = conv_taps.fitting_stages(64, 128, 64, 4, element_bytes, target().shared_bytes // per_sm) or 2
        seed = ("gemm", {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4,
                         "num_stages": stages, "SPLIT_K": _clamp(split, "SPLIT_K"), **precision},
                f"seed: {tiles} output tiles for {sms} SMs: K split {split} ways ({per_sm} programs an SM, "
                f"{stages} stages), partial sums added after")
        # First only where the work is large. On the H200, for 256 x 1024 outputs: K = 65536,
        # 0.076 ms split 8 ways against 0.325 ms unsplit; K = 8192 (4 GFLOP), 0.103 against 0.060
        # ms, presumably the second launch's host cost (cuBLAS took 0.030 ms).
        flops = sum(2 * plan.rows * st.n * st.k for st in stages_)
        first = flops >= SPLIT_FIRST_FLOPS
        out.insert(0 if first else len(out), seed)
        if first and precision:  # its three-product twin second (0.772 ms on the K = 524288 GEMM above)
            out.insert(1, ("gemm", dict(seed[1], precision="bf16x3"), seed[2] + ", three bf16 products per fp32 one"))
    return out


def _attention_seeds(plan: Plan) -> Seeds:
    return attention.seeds(plan, _has_tensor_descriptors())


def _cross_entropy_seeds(plan: Plan) -> Seeds:
    """Long rows: one a program, the log-sum-exp online over blocks of columns. Few classes (a row fits
    in 2048 values): many rows a program, each tile a block of neighbouring rows by all the classes."""
    out: Seeds = []
    if plan.cols <= 2048:
        block_c = max(next_pow2(plan.cols), 16)
        for values, warps in ((4096, 4), (8192, 8), (2048, 4)):
            rows = min(max(1, values // block_c), 256)
            out.append(("looped", {"BLOCK_R": rows, "BLOCK_C": block_c, "num_warps": warps},
                        f"seed: {rows} rows of {block_c} columns a program"))
        return out
    for block, warps in ((2048, 8), (4096, 8), (8192, 16)):
        out.append(("looped", {"BLOCK_R": 1, "BLOCK_C": block, "num_warps": warps},
                    f"seed: online log-sum-exp in blocks of {block} columns"))
    return out


def _row_seeds(plan: Plan) -> Seeds:
    """Row programs: registers where a row fits, column loops, and a split for few long rows."""
    out: Seeds = []
    block_c = max(next_pow2(plan.cols), 16)
    sms = target().sms
    split_seed, split_first = None, False
    strided = plan.program is not None and plan.program.strided
    if plan.program is not None and splittable(plan.program) and plan.rows < 2 * sms and plan.cols >= 4096 \
            and not strided:
        # Fewer rows than programs the GPU can run at once: split each row across programs, about four
        # programs an SM in all, each at least one block of columns.
        split = max(2, min(next_pow2(-(-4 * sms // max(plan.rows, 1))), 512, plan.cols // 2048))
        split = _clamp(split, "SPLIT")
        split_seed = ("split", {"BLOCK_C": 2048, "SPLIT": split, "num_warps": 8},
                      f"seed: {plan.rows} rows for {sms} SMs: each row split {split} ways, "
                      "partial results combined after")
        # First only for large inputs. On the H200: 32 rows x 8M fp32 (1 GiB), 0.266 ms split against
        # 0.488 ms for the best unsplit seed; 64 x 262144 (64 MiB), 0.077 against 0.033 ms, presumably
        # the second launch's host cost.
        # And wherever a handful of rows would leave most SMs idle on long ones (a whole tensor reduced to one
        # value is one row): a program per row reads at what one SM can pull, a small part of the GPU's bandwidth.
        split_first = plan.rows * plan.cols * plan.itemsize >= SPLIT_FIRST_BYTES or (
            4 * plan.rows <= sms and plan.cols * plan.itemsize >= SPLIT_FIRST_ROW_BYTES)
        if split_first:
            out.append(split_seed)
    fits = block_c <= MAX_REGISTER_BLOCK.get(plan.dtype, 16384)
    online = bool(plan.program and online_pairs(plan.program))
    if fits:
        block_r = _clamp(max(1, 2048 // block_c), "BLOCK_R")
        warps = _clamp(max(1, block_r * block_c // (32 * ELEMENTS_PER_THREAD)), "num_warps")
        out.append(("registers", {"BLOCK_R": block_r, "num_warps": warps},
                    f"seed: {block_r} row(s) of {block_c} per program, {block_r * block_c // (warps * 32)} "
                    "elements per thread"))
        out.append(("registers", {"BLOCK_R": _clamp(block_r * 2, "BLOCK_R"), "num_warps": warps},
                    "seed: twice the rows per program, twice the elements per thread"))
        out.append(("registers", {"BLOCK_R": block_r, "num_warps": _clamp(max(warps // 2, 1), "num_warps")},
                    "seed: the same tile with half the warps (more independent loads per thread)"))
    looped: dict[str, Any] = {"BLOCK_R": 1, "BLOCK_C": min(block_c, 4096), "num_warps": 8}
    if strided:
        # A row's values lie far apart, its neighbours next to them: a tile of 32 rows reads 128-byte
        # runs at each column, where one row per program would read one value per line.
        looped.update(BLOCK_R=32, BLOCK_C=min(block_c, 64), num_warps=4)
    if online:
        looped["online"] = True
    out.append(("looped", looped, "seed: column blocks of " + str(looped["BLOCK_C"]) +
                (", online max and sum" if online else "")))
    if block_c >= 4096 and not strided:
        # Long rows: blocks of 2048 with 16 warps keep more loads in flight per SM (the shape
        # torch.compile's reduction heuristic picks for such rows).
        out.append(("looped", dict(looped, BLOCK_C=2048, num_warps=16),
                    "seed: column blocks of 2048, 16 warps (4 elements per thread per block)"))
    if split_seed and not split_first:
        out.append(split_seed)
    if plan.program is not None and not fits and plan.rows < 2 * sms and not strided \
            and split_passes.batches(plan.program):
        # Few rows too long for registers, normalised after their statistics: each pass over a row
        # spread across SPLIT programs, so that every SM has work (a LayerNorm over 16 images).
        split = _clamp(max(2, min(next_pow2(-(-4 * sms // max(plan.rows, 1))), 512, plan.cols // 4096)), "SPLIT")
        out.insert(0, ("split_passes", {"BLOCK_C": 2048, "SPLIT": split, "num_warps": 8},
                       f"seed: {plan.rows} rows for {sms} SMs: every pass over a row split {split} ways, each "
                       "pass's partial statistics combined by the next"))
    return out


def tile_name(params: dict[str, Any]) -> str:
    """The archive's cell name for a tile: its block sizes along M and N (or its rows per program) and
    its warps; a template without a block along N (a direct convolution) has none in its name."""
    if "BLOCK_M" in params:
        n = f"n{params['BLOCK_N']}" if "BLOCK_N" in params else ""
        return f"m{params['BLOCK_M']}{n}w{params.get('num_warps')}"
    return f"r{params.get('BLOCK_R', 1)}w{params.get('num_warps')}"


class BuiltinPolicy:
    """Template search over the plans :func:`recognise` makes."""

    name = "builtin"

    def __init__(self) -> None:
        self.plan: Plan | None = None

    def prepare(self, task: Task) -> None:
        self.plan = recognise(task)

    def describe(self) -> str:
        assert self.plan is not None
        return self.plan.describe()

    def _proposal(self, strategy: str, params: dict[str, Any], parent: str | None, why: str) -> Proposal:
        assert self.plan is not None
        return Proposal(source=render(self.plan, strategy, params, why), strategy=strategy,
                        descriptor=tile_name(params), params=params, parent=parent, why=why)

    def propose(self, view: SearchView, count: int) -> list[Proposal]:
        assert self.plan is not None, "prepare() first"
        proposals: list[Proposal] = []
        seen = set(view.tried)

        def add(strategy: str, params: dict[str, Any], parent: str | None, why: str) -> None:
            k = key(strategy, params)
            if k not in seen and len(proposals) < count:
                seen.add(k)
                proposals.append(self._proposal(strategy, params, parent, why))

        offered = seeds(self.plan)
        if view.generation == 0 or not view.archive:
            for strategy, params, why in offered:
                add(strategy, dict(params), None, why)
        # Seeds that did not fit in the first generation are different starting points (another
        # template, another tile shape), not small steps: one of them per generation, after the best
        # elite's first mutation, so that a short search still measures each kind once.
        pending = next(((s, dict(p), w.replace("seed:", "seed (not yet measured):", 1)) for s, p, w in offered
                        if key(s, p) not in seen), None)
        # The best elite first (exploit), then parents drawn with exploration; one neighbour each,
        # round robin, so that no single parent takes the whole generation ...
        parents: list[str] = []
        top = best(view.archive)
        # ... and every other elite, fastest first, before the search may be called converged.
        others = sorted(view.archive.values(), key=lambda e: e["runtime_ms"] or float("inf"))
        for parent in ([top] if top else []) + select_parents(view.archive, count * 2, view.rng) + others:
            if parent["id"] not in parents and parent["id"] in view.params:
                parents.append(parent["id"])
        queues = [(pid, iter(self._neighbours(view.archive_strategy(pid), view.params[pid]))) for pid in parents]
        limit = target().shared_bytes
        while queues and len(proposals) < count:
            for pid, queue in list(queues):
                if pending and proposals:
                    add(pending[0], pending[1], None, pending[2])
                    pending = None
                    if len(proposals) >= count:
                        break
                for strategy, params, why in queue:
                    if key(strategy, params) not in seen and shared_bytes(searched(self.plan), params) <= limit:
                        add(strategy, params, pid, why)
                        break
                else:
                    queues.remove((pid, queue))
                if len(proposals) >= count:
                    break
        if pending:  # every elite's neighbourhood is spent: not converged while a seed is untried
            add(pending[0], pending[1], None, pending[2])
        return proposals

    def _k_steps(self, params: dict[str, Any]) -> int:
        """K steps of the shortest of the plan's matmuls at ``params``' BLOCK_K."""
        assert self.plan is not None
        stages = self.plan.extra.get("stages") or []
        return min((-(-st.k // params.get("BLOCK_K", 64)) for st in stages), default=1)

    def _neighbours(self, strategy: str, params: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
        """Parameter sets one step away from ``params``, most promising first."""
        assert self.plan is not None
        kind = searched(self.plan).kind
        for name in MUTATION_ORDER.get(kind, tuple(STEPS)):
            values = KIND_STEPS.get(kind, {}).get(name, STEPS[name])
            if name not in params:
                continue
            i = values.index(params[name]) if params[name] in values else 0
            for j in (i + 1, i - 1):
                if 0 <= j < len(values):
                    if name == "SPLIT_K" and values[j] > self._k_steps(params):
                        continue  # a share with no K step would only add zeros
                    changed = dict(params, **{name: values[j]})
                    if kind == "cross_entropy" and changed["BLOCK_R"] * changed["BLOCK_C"] > cross_entropy.MAX_TILE:
                        continue  # a tile past the registers a program holds
                    direction = "more" if j > i else "fewer" if name != "BLOCK_C" else "smaller"
                    if name == "BLOCK_C" and j > i:
                        direction = "larger"
                    why = f"mutation: {name} {params[name]} -> {values[j]} ({direction}) from the elite"
                    yield strategy, changed, why
        if searched(self.plan).kind in ("pointwise", "row") and strategy not in ("split", "split_passes") \
                and "PROGRAMS_PER_SM" not in params:
            # As many programs per SM as fill half its 64 warp slots: with 2 programs of 4 warps the
            # H200 ran swiglu at 1.639 ms against 0.755 ms for the plain grid (too few loads in flight).
            # With 8 or 16 it still lost (0.80 against 0.74 ms), as did rmsnorm; a mutation only.
            per_sm = _clamp(next_pow2(max(1, 32 // params["num_warps"])), "PROGRAMS_PER_SM")
            yield strategy, dict(params, PROGRAMS_PER_SM=per_sm), (
                f"mutation: persistent grid ({per_sm} programs per SM looping over the tiles): no tail wave, "
                "per-program costs paid once")
        if searched(self.plan).kind in ("pointwise", "row"):
            if params.get("STATIC"):
                yield strategy, {k: v for k, v in params.items() if k != "STATIC"}, (
                    "mutation: STATIC off: sizes as arguments, one compiled kernel for every shape")
            else:
                yield strategy, dict(params, STATIC=True), (
                    "mutation: STATIC: row length and strides as compile-time constants (as torch.compile "
                    "does): loop trip counts and alignment known exactly")
        if "VEC" in params:
            vec = vector_width(searched(self.plan)) if params["VEC"] == 1 else 1
            yield strategy, dict(params, VEC=vec), (
                f"mutation: VEC {params['VEC']} -> {vec}: " + ("vector loads of the aligned rows" if vec > 1
                                                             else "one element per load, as the compiler chooses"))
        if "TMA" in params:
            yield strategy, dict(params, TMA=not params["TMA"]), (
                f"mutation: TMA {'off' if params['TMA'] else 'on'}: "
                + ("the copy engine moves whole tiles, no address arithmetic" if not params["TMA"]
                   else "pointer loads, which the compiler pipelines its own way"))
        if "K_MAJOR" in params:
            yield strategy, dict(params, K_MAJOR=not params["K_MAJOR"]), (
                f"mutation: copy along K {'off' if params['K_MAJOR'] else 'on'}: "
                + ("both operands copied into rows along K, 16 values apart: wide tile loads"
                   if not params["K_MAJOR"] else "the operands read as they come, no copy"))
        if "CHANNELS_LAST" in params:
            yield strategy, dict(params, CHANNELS_LAST=not params["CHANNELS_LAST"]), (
                f"mutation: channels-last {'off' if params['CHANNELS_LAST'] else 'on'}: "
                + ("a copy of the input per call, then one vector load per pixel's channels"
                   if not params["CHANNELS_LAST"] else "the input read as it comes, no copy"))
        if "online" in params:
            yield strategy, dict(params, online=not params["online"]), (
                f"mutation: online {'off' if params['online'] else 'on'}: "
                + ("one pass fewer over the row" if not params["online"] else "fewer exponentials per element"))
        assert self.plan is not None
        for other in STRATEGIES[searched(self.plan).kind]:
            if other != strategy:
                for s, seed, _ in seeds(self.plan):
                    if s == other:
                        yield other, dict(seed), f"switch strategy to {other}: {WHY_STRATEGY[other]}"
                        break
