"""Cross-entropy of ``[batch, classes]`` logits and integer targets as two Triton kernels: per row, the
log-sum-exp in one pass over the logits (online) less the target's logit (with label smoothing, less
the mean logit too, summed in the same pass; with class weights, times the target's weight); then
the rows' losses reduced in a fixed order (sum, or mean over the rows not ignored: their count, or the
sum of their targets' weights), or returned as they are.

Logits ``[batch, classes, d1, ...]`` (a segmentation map: one target per pixel) are rows too: row
``r`` is position ``r % inner`` of sample ``r // inner``, its classes ``inner`` apart. A tile of
BLOCK_R neighbouring positions then reads BLOCK_R contiguous values per class, so few classes and
many pixels read as fast as the 2-D case. Bytes moved: the logits once, the targets twice (the loss,
then its reduction), the per-row losses written and read once in fp32.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import attribute_at, graph_calls

MAX_TILE = 16384
"""Logits a program holds at once (BLOCK_R x BLOCK_C, fp32 registers with the running max and sum)."""

CROSS_ENTROPY_KERNELS = '''@triton.jit
def row_loss_kernel(x_ptr, t_ptr, w_ptr, loss_ptr, n_rows, n_cols, inner, ignore_index,
                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, ROW_TARGETS: tl.constexpr, WEIGHTED: tl.constexpr):
    # loss = logsumexp(x) - x[target]. Online log-sum-exp over column blocks: one read of the logits.
    # Row r is position r % inner of sample r // inner; its classes lie inner apart (1 for 2-D logits).
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < n_rows
    rows64 = rows.to(tl.int64)
    base = (rows64 // inner) * n_cols * inner + rows64 % inner
    m = tl.full([BLOCK_R, BLOCK_C], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = row_ok[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + base[:, None] + cols[None, :].to(tl.int64) * inner, mask=mask, other=float("-inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new)) + tl.where(mask, tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=1)
    total = tl.sum(s * tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max[:, None])), axis=1)
    lse = row_max + tl.log(total)
    if ROW_TARGETS:  # each row's target is its own index (labels made with arange)
        t = rows64
    else:
        t = tl.load(t_ptr + rows, mask=row_ok, other=ignore_index).to(tl.int64)
    valid = row_ok & (t != ignore_index)
    picked = tl.load(x_ptr + base + t * inner, mask=valid, other=0.0).to(tl.float32)
    loss = tl.where(valid, lse - picked, 0.0)
    if WEIGHTED:  # each row's loss times its target's class weight
        loss = loss * tl.load(w_ptr + t, mask=valid, other=0.0).to(tl.float32)
    tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=row_ok)


@triton.jit
def reduce_kernel(loss_ptr, t_ptr, w_ptr, out_ptr, n_rows, ignore_index, MEAN: tl.constexpr, BLOCK: tl.constexpr,
                  ROW_TARGETS: tl.constexpr, WEIGHTED: tl.constexpr):
    # One program sums the per-row losses in a fixed order (deterministic) and counts the valid rows
    # (with class weights: sums their targets' weights, the mean's divisor).
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_rows, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ok = offs < n_rows
        acc += tl.load(loss_ptr + offs, mask=ok, other=0.0)
        if ROW_TARGETS:
            count += tl.where(ok & (offs != ignore_index), 1.0, 0.0)
        else:
            t = tl.load(t_ptr + offs, mask=ok, other=ignore_index)
            if WEIGHTED:
                count += tl.load(w_ptr + t, mask=ok & (t != ignore_index), other=0.0).to(tl.float32)
            else:
                count += tl.where(ok & (t != ignore_index), 1.0, 0.0)
    total = tl.sum(acc, axis=0)
    if MEAN:
        total = total / tl.sum(count, axis=0)
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))
'''

CROSS_ENTROPY_FORWARD = '''def forward(self, {arguments}):
    {logits} = {logits}.contiguous()
{targets_contiguous}    weight = {weights}
    n_cols = {logits}.shape[1]
    n_rows = {logits}.numel() // n_cols
    inner = n_rows // max({logits}.shape[0], 1)
    losses = torch.empty(n_rows, dtype={loss_dtype}, device={logits}.device)
    BLOCK_R, BLOCK_C = {BLOCK_R}, {BLOCK_C}
    row_loss_kernel[(ceil_div(n_rows, BLOCK_R),)](
        {logits}, {targets}, weight, losses, n_rows, n_cols, inner, {ignore_index}, BLOCK_R=BLOCK_R,
        BLOCK_C=BLOCK_C, ROW_TARGETS={row_targets}, WEIGHTED={weighted}, num_warps={num_warps})
    if {none}:
        return losses.view({logits}.shape[:1] + {logits}.shape[2:])
    out = torch.empty((), dtype={logits}.dtype, device={logits}.device)
    reduce_kernel[(1,)](losses, {targets}, weight, out, n_rows, {ignore_index}, MEAN={mean}, BLOCK=1024,
                        ROW_TARGETS={row_targets}, WEIGHTED={weighted}, num_warps=4)
    return out
'''


def _smoothed(kernels: str, smoothing: float) -> str:
    """The kernels with label smoothing ``smoothing``: each row's loss is
    ``(1 - e) * (lse - x[target]) + e * (lse - mean(x))``, so the loop also sums the row's logits."""
    if not smoothing:
        return kernels
    loop = "    for start in range(0, n_cols, BLOCK_C):\n"
    step = "        m = m_new\n"
    loss = "    loss = tl.where(valid, lse - picked, 0.0)\n"
    assert loop in kernels and step in kernels and loss in kernels, "the cross-entropy kernel's lines moved"
    return (kernels.replace(loop, "    logit_sum = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)\n" + loop, 1)
            .replace(step, step + "        logit_sum += tl.where(mask, x, 0.0)\n", 1)
            .replace(loss, f"    smooth = lse - tl.sum(logit_sum, axis=1) / n_cols\n"
                           f"    loss = tl.where(valid, {1.0 - smoothing!r} * (lse - picked) + {smoothing!r} * smooth, "
                           "0.0)\n", 1))


def kernels(plan: Any) -> str:
    """The two kernels for ``plan`` (a cross-entropy plan of ``recognize``)."""
    text = _smoothed(CROSS_ENTROPY_KERNELS, plan.extra.get("smoothing", 0.0))
    if plan.dtype == "bfloat16":  # bf16 results rounded to nearest as eager's (the interpreter's cast truncates)
        rounded = "loss" if plan.extra["reduction"] == "none" else "total"  # per-row losses kept in fp32 to reduce
        text = text.replace(f"{rounded}.to(", f"round_to_bf16({rounded}).to(")
    return text


def forward(plan: Any, params: dict[str, Any]) -> str:
    """``ModelNew.forward``: the row losses, then their reduction."""
    reduction, row_targets = plan.extra["reduction"], plan.extra.get("row_targets", False)
    # row targets: none is read (the logits stand in for the pointer); other inputs only gave sizes
    logits = plan.extra.get("logits", plan.inputs[0])
    targets = logits if row_targets else plan.extra.get("targets", plan.inputs[1])
    return CROSS_ENTROPY_FORWARD.format(
        arguments=", ".join(plan.inputs), logits=logits, targets=targets, row_targets=row_targets,
        targets_contiguous="" if row_targets else f"    {targets} = {targets}.contiguous()\n",
        weights=f"{plan.extra['weight']}.contiguous()" if plan.extra.get("weight") else logits,
        weighted=bool(plan.extra.get("weight")),
        ignore_index=plan.extra["ignore_index"], none=reduction == "none",
        mean=reduction == "mean", loss_dtype=f"{logits}.dtype" if reduction == "none" else "torch.float32",
        **params)


def _row_targets(node: Any) -> bool:
    """Is ``node`` ``torch.arange(n)`` (from 0, step 1, integers): each row's own index as its target, as
    a contrastive loss labels the diagonal? A target of any other length would not run in eager."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or node.target is not torch.arange:
        return False
    args, kw = list(node.args), dict(node.kwargs)
    if len(args) == 2 and args[0] == 0:
        args = args[1:]
    plain = len(args) == 1 and not isinstance(args[0], bool) and isinstance(args[0], (int, torch.fx.Node))
    dtype = kw.pop("dtype", torch.int64)
    kw.pop("device", None)
    return plain and not kw and dtype in (torch.int64, torch.int32)


def _size_only(node: torch.fx.Node, target: torch.fx.Node) -> bool:
    """Is ``node`` a read of sizes (or arithmetic on them) that feeds only the targets' ``arange``?"""
    reads = node.op == "call_method" and node.target == "size" or node.op == "call_function" and (
        node.target is getattr or node.target is operator.getitem)
    return reads and node.meta.get("tensor_meta") is None and all(
        u is target or _size_only(u, target) for u in node.users)


def recognise(gm: torch.fx.GraphModule, inputs: list[Any]) -> dict[str, Any] | None:
    """The cross-entropy plan's extras where ``gm`` is one ``F.cross_entropy`` of (logits, targets), the
    targets an input or each row's index (``torch.arange``); None where it calls something else."""
    calls = graph_calls(gm)[0]
    node = calls[-1] if calls else None
    if node is None or node.op != "call_function" or node.target is not F.cross_entropy:
        return None
    target = node.args[1] if len(node.args) > 1 else node.kwargs.get("target")
    row_targets = _row_targets(target) and all(c in (node, target) or _size_only(c, target) for c in calls)
    if len(calls) != 1 and not row_targets:
        return None
    names = ("weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
    kw = dict(node.kwargs) | {name: node.args[2 + i] for i, name in enumerate(names) if len(node.args) > 2 + i}
    if kw.get("size_average") is not None or kw.get("reduce") is not None:
        raise CannotCover("cross_entropy with legacy reduction arguments is not covered")
    smoothing = kw.get("label_smoothing", 0.0)
    if not isinstance(smoothing, (int, float)) or isinstance(smoothing, bool) or not 0.0 <= smoothing <= 1.0:
        raise CannotCover(f"cross_entropy with label smoothing {smoothing!r} (covered: a number from 0 to 1)")
    weight = _weight(kw.get("weight"), gm)
    if weight and (smoothing or row_targets):
        raise CannotCover("cross_entropy with class weights and label smoothing or targets made with arange")
    reduction = kw.get("reduction", "mean")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # (the two inputs in either order: a segment of a longer forward takes its inputs as they were made)
    wanted = (placeholders[0],) if row_targets else tuple(placeholders)
    given = tuple(node.args[:len(wanted)])
    if reduction not in ("mean", "sum", "none") or not placeholders or sorted(map(str, given)) != sorted(
            map(str, wanted)) or (row_targets and given != wanted) or (not row_targets and len(inputs) != 2) or \
            any(not _size_only(u, target) for p in placeholders[1:] if row_targets for u in p.users):
        raise CannotCover("cross_entropy is covered for (logits, targets) inputs with mean, sum or no reduction")
    logits = inputs[placeholders.index(given[0])]
    targets = torch.arange(logits.shape[0]) if row_targets else inputs[placeholders.index(given[1])]
    if logits.dim() < 2 or (row_targets and logits.dim() != 2) or targets.shape != logits.shape[:1] + logits.shape[2:] \
            or targets.dtype not in (torch.int64, torch.int32) or not logits.is_floating_point():
        raise CannotCover("cross_entropy is covered for [batch, classes, ...] logits and [batch, ...] integer targets")
    return {"reduction": reduction, "ignore_index": int(kw.get("ignore_index", -100)), "smoothing": float(smoothing),
            "row_targets": row_targets, "weight": weight, "logits": given[0].name,
            "targets": given[0].name if row_targets else given[1].name}


def _weight(node: Any, gm: torch.fx.GraphModule) -> str | None:
    """How ``forward`` reads the class weights: a tensor the module holds (``self.weight``), as the
    reference's own constructor makes it; None without weights. CannotCover for weights made otherwise."""
    if node is None:
        return None
    held = attribute_at(gm, str(node.target)) if isinstance(node, torch.fx.Node) and node.op == "get_attr" else None
    if isinstance(held, torch.Tensor) and held.dim() == 1:
        return f"self.{node.target}"
    raise CannotCover("cross_entropy with class weights computed in forward or passed in (covered: weights the "
                      "module holds)")
