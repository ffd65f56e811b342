"""Whole candidate files from a :class:`Plan`: the generated kernel, and ``ModelNew`` with the
reference's own ``__init__`` (so parameters match) and a ``forward`` that allocates and launches.

Each file reads like a Triton tutorial: its docstring says what the kernel does, why it is fast
and the bytes it moves.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from kernelevo.agent.builtin import (
    attention,
    attention_positions,
    attention_views,
    codegen,
    conv,
    conv_edges,
    conv_functional,
    cross_entropy,
    dimreduce,
    embedding,
    expressions,
    groupnorm,
    launch,
    matmul_kernels,
    pool,
    rearrange,
    resample,
    rotary,
    scan,
    sequence,
    sequence_render,
    sort,
    take_along,
    unfold,
    view_copy,
)
from kernelevo.agent.builtin.recognize import Plan

STRATEGIES = {
    "pointwise": ["tiled"],
    "row": ["registers", "looped", "split", "split_passes"],
    "dim_reduce": ["strided"],
    "scan": ["carried"],
    "sort": ["bitonic"],
    "conv": ["tap_major", "implicit_gemm", "direct"],
    "pool": ["window"],
    "resample": ["gather"],
    "rearrange": ["moved"],
    "view_copy": ["through_strides"],
    "rotary": ["halves"],
    "embedding": ["rows"],
    "take_along": ["flat"],
    "unfold": ["columns"],
    "group_norm": ["three_pass"],
    "cross_entropy": ["looped"],
    "matmul": ["gemm", "gemm_tma"],
    "attention": ["flash"],
}

WHY_STRATEGY = {
    "tiled": "every op of the chain fused into one pass: one read of each input and one write, with no "
             "intermediate tensors in memory",
    "registers": "whole rows held in registers: each input read once and the output written once, however many "
                 "reductions the row needs",
    "looped": "rows processed in column blocks, for rows too long for registers; the second and later passes "
              "mostly hit L2",
    "split": "each long row split across several programs, so that a few rows still fill every SM; a "
             "second, small kernel combines each row's partial results",
    "split_passes": "few rows too long for registers: every pass over a row (each statistic, then the output) "
                    "spread across several programs, each chunk's partial statistics combined by the next pass",
    "strided": "the reduced dimension walked in place: each load is a run of contiguous inner elements, so the "
               "input is read once in whole lines with no transposed copy, and partials stay per lane until one "
               "final tree reduction",
    "carried": "each tile scanned in registers and offset by the running total of the tiles before it: the "
               "input read once in whole lines and the output written once, with no second pass over memory",
    "bitonic": "each row loaded once into registers and sorted there by a bitonic network, only the kept "
               "values written",
    "implicit_gemm": "the convolution as a tensor-core GEMM (output pixels x output channels over input "
                     "channels x taps) whose input tiles are gathered from the image as the K loop goes, so the "
                     "unfolded matrix never exists; the bias and the ops after it are applied in registers",
    "tap_major": "the convolution as a tensor-core GEMM whose K loop walks the taps one at a time and the "
                 "input channels in blocks within a tap: a step's padding test is one per output pixel and an "
                 "address one add, so the tensor cores, not index arithmetic, set the pace; the epilogue fused",
    "direct": "one input channel per group: each program sums the unrolled taps for a block of output pixels "
              "of one channel in fp32 registers, reading its input lines from L1; the epilogue fused",
    "window": "each program pools a block of output positions of one plane with the window's taps unrolled; "
              "neighbouring windows share input lines in L1, so the input is read about once; the epilogue "
              "fused",
    "gather": "each program computes a block of output positions of one plane from the one to eight input "
              "values its coordinates pick; neighbouring outputs read neighbouring inputs, which stay in L1, so "
              "the input is read about once and the output written once; the epilogue fused",
    "rows": "each program copies a block of columns of a block of looked-up rows: every table row and output "
            "row is a contiguous run, so the indices, the rows looked up and the output each cross memory once",
    "flat": "each program writes a block of outputs in memory order, each the source element at its own "
            "coordinates with the one along the gathered dim taken from the index: the indices and the output "
            "cross memory once, one source element is read per output",
    "columns": "each program writes a block of the unfolded output in memory order: the output, the whole "
               "cost of an unfold, is written once in whole lines; each input value is read once per window "
               "that covers it, mostly from L1/L2, and the padding is masked, never read",
    "moved": "each program writes a block of output positions in memory order, each the input value its "
             "coordinates map to: the output written once in whole lines and each input value read about once; "
             "the epilogue fused",
    "through_strides": "each program writes a block of output positions in memory order, each read through "
                       "the view's strides, with neighbouring dims merged where the view is contiguous across them: "
                       "the output is written once and the input read once in runs as long as the view keeps "
                       "them; views that keep memory order cost nothing, the epilogue fused",
    "halves": "each program rotates a block of rows, both halves of each in fp32 registers: x read once, cos "
              "and sin through their broadcast strides (a table shared by every head stays in L2), the output "
              "written once; the rotated copy torch writes and reads back never exists",
    "three_pass": "one program per (image, group) run, contiguous in memory: the mean, the centred variance, "
                  "then the normalised, scaled and shifted values with the epilogue applied, written once; the "
                  "later passes re-read the run from L2",
    "gemm": "one tiled tensor-core GEMM per linear, with its bias and the ops after it applied to the fp32 "
            "accumulator in registers: the epilogue costs no extra pass over memory",
    "gemm_tma": "the GEMM on Hopper's tensor memory accelerator: whole tiles copied into shared memory by "
                "the copy engine, a persistent grid of one program per SM walking the output tiles, the "
                "epilogue fused as in gemm",
    "flash": "flash attention: each program keeps a block of queries and streams the keys and values through "
             "on-chip memory with an online softmax, so the seq x seq scores never reach memory",
    "online": "online softmax: the max and the sum of exp(x - max) in one pass, rescaling the running sum when "
              "the max grows",
}

MAX_REGISTER_BLOCK = {"float32": 16384, "bfloat16": 32768, "float16": 32768}

HEADER = '''"""{title}

Strategy: {strategy} ({params}). Generated by kernelevo's built-in policy from the reference's structure.
Why it is fast: {strategy_why}.
This variant: {why}.
Bytes moved: {bytes_note}
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
{imports}


def ceil_div(a, b):
    # Sizes in whole blocks, on the host at every launch: triton.cdiv and triton.next_power_of_2 are
    # Triton constexpr functions, a few microseconds a call from Python against a tenth of one here.
    return -(-a // b)


def next_power_of_2(n):
    return 1 << (n - 1).bit_length() if n > 0 else 0


'''

TMA_SCRATCH = '''def tma_scratch(size: int, alignment: int, stream):
    # Descriptors built on the device (tl.make_tensor_descriptor) live in a small scratch buffer
    # that Triton asks for at each launch.
    return torch.empty(size, dtype=torch.int8, device="cuda")


triton.set_allocator(tma_scratch)


'''


def _with_interpreter_import(head: str) -> str:
    """``head`` with the interpreter check imported after Triton's language (once)."""
    if expressions.INTERPRETER_IMPORT in head:
        return head
    language = "import triton.language as tl\n"
    return head.replace(language, language + expressions.INTERPRETER_IMPORT)


def _model(init: str, forward: str) -> str:
    return ("\n\nclass ModelNew(nn.Module):\n" + textwrap.indent(init.rstrip() + "\n", "    ") + "\n"
            + textwrap.indent(forward, "    "))


def _row_program(program: Any, strategy: str, params: dict[str, Any], dtype: str) -> tuple[str, str]:
    """A row program's kernel (with the aligned-pointer helper where it vectorises) and its forward."""
    body = codegen.kernel(program, strategy, online=bool(params.get("online")),
                          persistent=bool(params.get("PROGRAMS_PER_SM")), static=bool(params.get("STATIC")))
    forward = launch.forward(program, strategy, params, MAX_REGISTER_BLOCK.get(dtype, 16384))
    aligned = launch.ALIGNED if params.get("VEC", 1) > 1 else ""
    return aligned + body, forward


def _shown(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _with_tail(kernels: str, forward: str, tail: dict[str, Any]) -> tuple[str, str]:
    """The GEMM kernels and forward with the row kernel after them: its kernel appended, and its
    launch as a ``_kernelevo_tail`` method that the GEMM forward returns through."""
    strategy, params = tail["strategy"], tail["params"]
    body, launch = _row_program(tail["plan"].program, strategy, params, tail["plan"].dtype)
    note = (f"# The row operations after the last GEMM, in a second kernel over its stored output: "
            f"{strategy}, {_shown(params)}.\n# {tail['why']}\n")
    method = launch.replace("def forward(", "def _kernelevo_tail(", 1)  # no submodule of the reference has this name
    return kernels + "\n\n" + note + body, forward + "\n" + method


@dataclass
class Rendering:
    """One candidate being rendered: the plan, the strategy and parameters, and why they were chosen."""

    plan: Plan
    strategy: str
    params: dict[str, Any]
    why: str

    def head(self, title: str, bytes_note: str, strategy_why: str | None = None, imports: str | None = None) -> str:
        """The file's docstring (what, why this strategy, the bytes it moves) and its imports."""
        return HEADER.format(title=title, strategy=self.strategy, params=_shown(self.params), why=self.why,
                             strategy_why=strategy_why or WHY_STRATEGY[self.strategy],
                             imports="\n".join(self.plan.imports) if imports is None else imports,
                             bytes_note=bytes_note)


def _with_helpers(head: str, body: str) -> tuple[str, str]:
    """Kernels that call the expressions' jitted helpers (bf16 rounding as eager rounds, an exact fmod)
    get them, and the interpreter check the rounding needs."""
    helpers = expressions.helpers_for(body)
    if not helpers:
        return head, body
    return (_with_interpreter_import(head) if expressions.checks_interpreter(body) else head), helpers + body


def _render_cross_entropy(r: Rendering) -> str:
    head = r.head(f"Cross-entropy in two Triton kernels: {r.plan.describe()}.",
                  "the logits once, one value per row, and one per row again to reduce.", WHY_STRATEGY["online"])
    head, kernels = _with_helpers(head, cross_entropy.kernels(r.plan))
    return head + kernels + _model(r.plan.init, cross_entropy.forward(r.plan, r.params))


def _render_sequence(r: Rendering) -> str:
    lead = sequence.searched(r.plan)
    head = r.head(f"Triton kernels in sequence for {r.plan.describe()}.",
                  "each segment reads what the one before it wrote, once, and writes its own output once; the "
                  f"tuned segment is a {lead.kind} kernel.", imports="")
    head = head[:head.index('"""', 3) + 3] + "\n\n"
    return sequence_render.render(r.plan, r.strategy, r.params, r.why, render, head)


def _render_group_norm(r: Rendering) -> str:
    norm = r.plan.extra["norm"]
    head, body = _with_helpers(r.head(f"A fused Triton normalisation: {r.plan.describe()}.",
                                       "the input three times (the second and third mostly from L2) and the "
                                       "output once."), groupnorm.kernel(norm))
    return head + body + _model(r.plan.init, groupnorm.forward(norm, r.params))


def _render_pool(r: Rendering) -> str:
    pooling = r.plan.extra["pool"]
    head, body = _with_helpers(r.head(f"A fused Triton pooling: {r.plan.describe()}.",
                                       "the input about once (overlapping windows re-read from L1) and the "
                                       "output written once."), pool.GEOMETRY + pool.kernel(pooling))
    return head + body + _model(r.plan.init, pool.forward(pooling, r.params))


def _render_conv(r: Rendering) -> str:
    convolution = r.plan.extra["conv"]
    head, body = _with_helpers(r.head(f"A fused Triton convolution: {r.plan.describe()}.",
                                       "the input about once (taps re-read from L1/L2), the weights once per "
                                       "block of output pixels, and the output written once."),
                                conv.GEOMETRY + (conv_functional.OPTIONS if convolution.functional else "")
                                + (conv_edges.KERNEL if convolution.padding_mode != "zeros" else "")
                                + conv.kernel(convolution, r.strategy, r.params.get("precision")))
    return (_with_interpreter_import(head) + body + expressions.INTERPRETED.format(kernel="conv_kernel")
            + expressions.dot_precision(r.params.get("precision"))
            + _model(r.plan.init, conv.forward(convolution, r.strategy, r.params)))


def _render_resample(r: Rendering) -> str:
    plan = r.plan.extra["resample"]
    head, body = _with_helpers(r.head(f"A fused Triton resampling: {r.plan.describe()}.",
                                       "the input about once (neighbours re-read from L1) and the output "
                                       "written once."), resample.kernel(plan))
    return head + body + _model(r.plan.init, resample.forward(plan, r.params))


def _render_embedding(r: Rendering) -> str:
    head = r.head(f"A Triton embedding lookup: {r.plan.describe()}.",
                  "the indices and each looked-up row once, and the output written once.")
    model = _model(r.plan.init, embedding.forward(r.plan.extra["embedding"], r.params))
    return head + embedding.KERNEL + "\n\n" + model


def _render_take_along(r: Rendering) -> str:
    head = r.head(f"A Triton gather along a dim: {r.plan.describe()}.",
                  "the indices once, one source element per output, and the output written once.")
    model = _model(r.plan.init, take_along.forward(r.plan.extra["take_along"], r.params))
    return head + take_along.KERNEL + "\n\n" + model


def _render_unfold(r: Rendering) -> str:
    head = r.head(f"A Triton unfold (im2col): {r.plan.describe()}.",
                  "the output once and each input value once per window that covers it.")
    return head + unfold.KERNEL + "\n\n" + _model(r.plan.init, unfold.forward(r.plan.extra["unfold"], r.params))


def _render_rearrange(r: Rendering) -> str:
    plan = r.plan.extra["rearrange"]
    head, body = _with_helpers(r.head(f"A fused Triton rearrangement: {r.plan.describe()}.",
                                       "each input value about once and the output written once."),
                                rearrange.kernel(plan))
    return head + body + "\n\n" + _model(r.plan.init, rearrange.forward(plan, r.params))


def _render_rotary(r: Rendering) -> str:
    head = r.head(f"A Triton rotary embedding: {r.plan.describe()}.",
                  "x once, cos and sin once per row through their strides (mostly from L2), the output once.")
    return head + rotary.KERNEL + "\n\n" + _model(r.plan.init, rotary.forward(r.plan.extra["rotary"], r.params))


def _render_view_copy(r: Rendering) -> str:
    plan = r.plan.extra["view_copy"]
    head, body = _with_helpers(r.head(f"Views copied by a Triton kernel: {r.plan.describe()}.",
                                       "each input value once (through the view's strides) and the output "
                                       "written once."), view_copy.kernel(plan))
    head = head.replace("import torch\n", "import math\n\nimport torch\n", 1)
    return head + body + "\n\n" + view_copy.helpers(plan, r.params) + _model(r.plan.init, view_copy.forward(plan))


def _render_dim_reduce(r: Rendering) -> str:
    reduction = r.plan.extra["reduction"]
    head, body = _with_helpers(r.head(f"A Triton reduction: {r.plan.describe()}.",
                                       "the input once, and one value per output position written."),
                                dimreduce.kernel(reduction, r.params))
    return head + body + _model(r.plan.init, dimreduce.forward(reduction, r.plan.inputs[0], r.params))


def _render_scan(r: Rendering) -> str:
    scanned = r.plan.extra["scan"]
    head, body = _with_helpers(r.head(f"A Triton scan: {r.plan.describe()}.",
                                       "each input once and the output written once."), scan.kernel(scanned))
    return head + body + _model(r.plan.init, scan.forward(scanned, r.plan.inputs, r.params))


def _render_sort(r: Rendering) -> str:
    head = r.head(f"A Triton sort: {r.plan.describe()}.", "each row once and the kept values written once.")
    model = _model(r.plan.init, sort.forward(r.plan.extra["sort"], r.plan.inputs, r.params))
    kernel = sort.KERNEL if r.plan.extra["sort"].dim == -1 else sort.STRIDED_KERNEL
    return head + kernel + "\n\n" + model


def _render_attention(r: Rendering) -> str:
    head = r.head(f"Flash attention forward in Triton: {r.plan.describe()}.",
                  "q, k and v read once per block of queries (k and v again for every block, mostly from L2) "
                  "and the output written once.")
    head = _with_interpreter_import(head.replace("import torch\n", "import math\n\nimport torch\n", 1))
    scratch = TMA_SCRATCH if r.params.get("TMA") else ""
    scratch += attention_views.HELPER + "\n\n" if r.plan.extra.get("views") else ""
    mask = r.plan.extra.get("mask")
    scratch += attention_positions.kernel_function(mask) + "\n\n" if mask and mask.get("positions") else ""
    return (head + scratch + attention.kernel(r.plan) + expressions.INTERPRETED.format(kernel="attention_kernel")
            + _model(r.plan.init, attention.forward(r.plan, r.params)))


def _render_matmul(r: Rendering) -> str:
    plan, params = r.plan, r.params
    stages = plan.extra["stages"]
    head = r.head(f"Fused Triton GEMMs for a {plan.describe()}.",
                  "each stage reads its input and weight (tiles reused from L2 and shared memory) and writes its "
                  "output once.")
    tma = r.strategy == "gemm_tma"
    kernels = "\n\n".join(matmul_kernels.kernel(st, i, params.get("precision"), params.get("SPLIT_K", 1), tma)
                            for i, st in enumerate(stages))
    tail = plan.extra.get("tail")
    forward = matmul_kernels.forward(stages, stages[0].chain_input or plan.inputs[0], params, plan.inputs, tma)
    scratch = TMA_SCRATCH if tma else ""
    if tail is not None:
        kernels, forward = _with_tail(kernels, forward, tail)
    helper = expressions.helpers_for(kernels)
    if params.get("K_MAJOR"):
        helper += matmul_kernels.K_MAJOR_HELPER + "\n\n"
    if stages[0].batched:
        helper += matmul_kernels.BATCH_HELPER + "\n\n"
    return (_with_interpreter_import(head) + scratch + helper + kernels
            + expressions.INTERPRETED.format(kernel="stage0_kernel")
            + expressions.dot_precision(params.get("precision")) + _model(plan.init, forward))


def _render_program(r: Rendering) -> str:
    """A row program: a pointwise chain, or reductions along rows."""
    program = r.plan.program
    assert program is not None
    body, forward = _row_program(program, r.strategy, r.params, r.plan.dtype)
    head = r.head(f"Fused Triton kernel for a {r.plan.describe()}.", launch.bytes_note(program))
    head, body = _with_helpers(head, body)
    return head + body + _model(r.plan.init, forward)


RENDERERS = {
    "cross_entropy": _render_cross_entropy,
    "sequence": _render_sequence,
    "group_norm": _render_group_norm,
    "pool": _render_pool,
    "resample": _render_resample,
    "rearrange": _render_rearrange,
    "view_copy": _render_view_copy,
    "rotary": _render_rotary,
    "embedding": _render_embedding,
    "take_along": _render_take_along,
    "unfold": _render_unfold,
    "conv": _render_conv,
    "dim_reduce": _render_dim_reduce,
    "scan": _render_scan,
    "sort": _render_sort,
    "attention": _render_attention,
    "matmul": _render_matmul,
}
"""The renderer of each plan kind; a row program (pointwise or row-reducing) otherwise."""


def render(plan: Plan, strategy: str, params: dict[str, Any], why: str) -> str:
    """The candidate source for ``plan`` with ``strategy`` and ``params``."""
    source = _indexed_submodules(RENDERERS.get(plan.kind, _render_program)(Rendering(plan, strategy, params, why)))
    return _sized(source, plan) if plan.sized_for or plan.leading_views else source


SUBMODULE_PATH = re.compile(r"\bself((?:\.[A-Za-z_]\w*|\.\d+)+)")


def _indexed_submodules(source: str) -> str:
    """Parameter paths through ``nn.Sequential`` and ``nn.ModuleList`` (``self.net.0.weight``, as torch
    names them) written as Python reads them: ``self.net[0].weight``."""
    return SUBMODULE_PATH.sub(lambda m: "self" + re.sub(r"\.(\d+)", r"[\1]", m.group(1)), source)


SIZED_CHECK = (
    "        if [tuple(t.shape) for t in ({names},) if isinstance(t, torch.Tensor)] != {shapes}:\n"
    "            raise ValueError(\"generated for inputs of shapes {shapes}: a size it reads is a number in its "
    "kernels\")\n")


def _sized(source: str, plan: Plan) -> str:
    """``source`` with a check at the top of ``ModelNew.forward`` that the inputs have the shapes the
    code was generated for: called at other sizes it says so instead of computing a wrong answer."""
    found = re.search(r"\n    def forward\(self, ([^)]*)\):\n", source)
    assert found is not None, "every template writes ModelNew.forward"
    check = SIZED_CHECK.format(names=found.group(1), shapes=plan.sized_for) if plan.sized_for else ""
    # inputs planned as the view forward first reads them through: the same view, first
    views = "".join(f"        {view.line()}\n" for view in plan.leading_views)
    return source[:found.end()] + check + views + source[found.end():]


