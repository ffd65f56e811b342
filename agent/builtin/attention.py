"""Scaled dot-product attention as one Triton kernel (flash attention's forward), and, where a head is
too wide to hold in registers, as the matmuls and softmax it is made of.

``F.scaled_dot_product_attention(q, k, v)`` with q ``[batch, heads, queries, head_dim]`` and k, v
``[batch, heads, keys, head_dim]`` (self-attention, or cross-attention with any number of keys),
optionally causal (query i sees keys 0..i, as torch aligns the mask: top left) or masked (a boolean
mask, False hiding a key, or a float mask added to the scaled scores; passed in or held as a buffer,
of any shape that broadcasts to [batch, heads, queries, keys]; a query that sees no key gets zeros,
as torch gives), and scaled by any number. A program takes a block of queries of one (batch, head) and walks the keys in
blocks, keeping a running max and sum (online softmax), so the scores never reach memory: q, k and v
are read once per block of queries (k and v again for every block, mostly from L2) and the output is
written once. A head dimension that is not a power of two (48, 80, 96, 160, ...) is padded to one in
registers: the masked lanes load zeros, which add nothing to a score or to the output.

A head wider than 256 does not fit a block of queries' accumulator in registers: such a call is
rewritten in the traced graph as ``softmax(q @ k^T * scale) @ v`` (:func:`decompose_wide`), which
the batched-GEMM templates cover, the scores going through memory as torch's own math path does.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevo.agent.builtin import attention_positions, attention_views
from kernelevo.agent.builtin.attention_positions import UNBOUNDED
from kernelevo.agent.builtin.program import CannotCover
from kernelevo.agent.builtin.vocabulary import TRACED_CONSTANT

WIDEST_HEAD = 256
"""The widest head the flash kernel holds (a block of queries' fp32 accumulator is BLOCK_M x head)."""

KERNEL = '''@triton.jit
def log2_bias(bias):
    # An additive mask in the scores' log2 units. A finite bias stays finite: torch's finfo(dtype).min
    # times log2(e) would overflow to -inf, hiding keys that torch weighs evenly where every key of a
    # row has it. -inf stays -inf.
    return tl.where(bias == float("-inf"), bias, tl.maximum(bias * 1.4426950408889634, -3.4028234663852886e38))


@triton.jit
def attention_keys(acc, l_i, m_i, q, k_ptr, v_ptr, k_desc, v_desc, k_base, k_row0, offs_m, seq_q, seq_k,
                   stride_ks, mask_ptr, mask_base, stride_mq, stride_mk, scale_log2e, lo, hi, BLOCK_N: tl.constexpr,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, EVEN: tl.constexpr, CAUSAL: tl.constexpr,
                   MASK: tl.constexpr, TMA: tl.constexpr, SCALE_POSITIVE: tl.constexpr, WIDEN: tl.constexpr,
                   PRECISION: tl.constexpr):
    # Keys lo..hi for one block of queries, BLOCK_N at a time; the running max m and sum l rescale the
    # output accumulator (online softmax, in log2). Not EVEN: keys may run past the sequence (masked
    # loads, -inf scores). CAUSAL: keys after a query score -inf (only the diagonal band needs it).
    # MASK 1: a boolean mask, False scores -inf; MASK 2: a mask added to the scaled scores (read as
    # stored, broadcast dimensions with stride 0); MASK 3 and 4: the same, made from the query's and
    # the key's positions (attention_positions), so that nothing is read. A head padded to BLOCK_D
    # loads zeros past HEAD_DIM: they add nothing to a score or to the output.
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        # k is read as stored (rows of HEAD_DIM contiguous values) and transposed in shared memory.
        if TMA:
            k = k_desc.load([k_row0 + start_n, 0])
            v = v_desc.load([k_row0 + start_n, 0])
        else:
            at = k_base + cols[:, None] * stride_ks + offs_d[None, :]
            if EVEN and HEAD_DIM == BLOCK_D:
                k = tl.load(k_ptr + at)
                v = tl.load(v_ptr + at)
            else:
                inside = (cols[:, None] < seq_k) & (offs_d[None, :] < HEAD_DIM)
                k = tl.load(k_ptr + at, mask=inside, other=0.0)
                v = tl.load(v_ptr + at, mask=inside, other=0.0)
        if WIDEN:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        if not SCALE_POSITIVE:
            s = s * scale_log2e
        if MASK == 1 or MASK == 2:
            at = mask_base + offs_m[:, None] * stride_mq + cols[None, :] * stride_mk
            if EVEN:
                kept = tl.load(mask_ptr + at)
            else:
                kept = tl.load(mask_ptr + at, mask=(offs_m[:, None] < seq_q) & (cols[None, :] < seq_k), other=0)
            if MASK == 1:
                s = tl.where(kept != 0, s, float("-inf"))
            else:
                s = s + log2_bias(kept.to(tl.float32))
POSITION_MASKS
        if not EVEN:
            s = tl.where(cols[None, :] < seq_k, s, float("-inf"))
        if CAUSAL:
            s = tl.where(cols[None, :] <= offs_m[:, None], s, float("-inf"))
        if SCALE_POSITIVE:
            # A positive scale commutes with max: the row max is scaled once, and each score takes
            # one fused multiply-add (s * scale - m) before its exp2 instead of a multiply and a subtract.
            m_new = tl.maximum(m_i, tl.max(s, axis=1) * scale_log2e)
        else:
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_sub = m_new
        if MASK != 0:
            # A query whose keys so far are all masked has a max of -inf: subtract 0 instead, so its
            # weights are exp2(-inf) = 0, not NaN (until a key it may see arrives, or to the end).
            m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
        if SCALE_POSITIVE:
            p = tl.exp2(s * scale_log2e - m_sub[:, None])
        else:
            p = tl.exp2(s - m_sub[:, None])
        alpha = tl.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, mask_ptr, seq_q, seq_k, scale_log2e, stride_qb, stride_qh,
                     stride_qs, stride_kb, stride_kh, stride_ks, stride_mb, stride_mh, stride_mq, stride_mk, H,
                     GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                     BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr, EVEN: tl.constexpr,
                     TMA: tl.constexpr, SCALE_POSITIVE: tl.constexpr, WIDEN: tl.constexpr, BAND_LO: tl.constexpr,
                     BAND_HI: tl.constexpr, PRECISION: tl.constexpr):
    # One program: BLOCK_M queries of one (batch, head). EVEN (the queries divide into BLOCK_M and the
    # keys into BLOCK_N): no bounds masks and no -inf fill, which would otherwise cost a select per
    # score. TMA (Hopper; contiguous q, k, v, EVEN, a head of a power of two): the copy engine brings
    # whole tiles of the [batch * heads * seq, HEAD_DIM] rows into shared memory. GROUP query heads
    # share one head of k and v (grouped-query attention; 1: a head of their own).
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    kv_head = (bh % H) // GROUP
    q_base = (bh // H).to(tl.int64) * stride_qb + (bh % H).to(tl.int64) * stride_qh
    k_base = (bh // H).to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
    mask_base = (bh // H).to(tl.int64) * stride_mb + (bh % H).to(tl.int64) * stride_mh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q_at = q_base + offs_m[:, None] * stride_qs + offs_d[None, :]
    q_inside = (offs_m[:, None] < seq_q) & (offs_d[None, :] < HEAD_DIM)
    if TMA:
        heads_total = tl.num_programs(1)
        q_desc = tl.make_tensor_descriptor(q_ptr, shape=[heads_total * seq_q, HEAD_DIM], strides=[HEAD_DIM, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
        k_desc = tl.make_tensor_descriptor(k_ptr, shape=[heads_total // GROUP * seq_k, HEAD_DIM],
                                           strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
        v_desc = tl.make_tensor_descriptor(v_ptr, shape=[heads_total // GROUP * seq_k, HEAD_DIM],
                                           strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
        k_row0 = ((bh // H) * (H // GROUP) + kv_head) * seq_k
        q = q_desc.load([bh * seq_q + start_m * BLOCK_M, 0])
    else:
        k_desc, v_desc, k_row0 = k_ptr, v_ptr, 0  # unused without TMA
        if EVEN and HEAD_DIM == BLOCK_D:
            q = tl.load(q_ptr + q_at)
        else:
            q = tl.load(q_ptr + q_at, mask=q_inside, other=0.0)
    if WIDEN:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if CAUSAL:
        # Key blocks wholly before this block's first query (and inside the keys) are seen by every
        # query: no causal mask and no bounds. Only the diagonal band pays for masks; keys after the
        # block's last query are skipped.
        diag = tl.minimum((start_m * BLOCK_M) // BLOCK_N * BLOCK_N, seq_k // BLOCK_N * BLOCK_N)
        acc, l_i, m_i = attention_keys(acc, l_i, m_i, q, k_ptr, v_ptr, k_desc, v_desc, k_base, k_row0, offs_m,
                                       seq_q, seq_k, stride_ks, mask_ptr, mask_base, stride_mq, stride_mk,
                                       scale_log2e, 0, diag, BLOCK_N, HEAD_DIM, BLOCK_D, True, False, MASK, TMA,
                                       SCALE_POSITIVE, WIDEN, PRECISION)
        acc, l_i, m_i = attention_keys(acc, l_i, m_i, q, k_ptr, v_ptr, k_desc, v_desc, k_base, k_row0, offs_m,
                                       seq_q, seq_k, stride_ks, mask_ptr, mask_base, stride_mq, stride_mk,
                                       scale_log2e, diag, tl.minimum((start_m + 1) * BLOCK_M, seq_k), BLOCK_N,
                                       HEAD_DIM, BLOCK_D, EVEN, True, MASK, TMA, SCALE_POSITIVE, WIDEN, PRECISION)
    else:
        # A mask made from positions that sees only keys at distances BAND_LO..BAND_HI from a query
        # (j - i; a sliding window, a causal triangle): key blocks out of this block's reach are skipped.
        # 2**30 marks a side without a bound.
        lo, hi = 0, seq_k
        if BAND_LO > -1073741824:
            lo = tl.maximum(start_m * BLOCK_M + BAND_LO, 0) // BLOCK_N * BLOCK_N
        if BAND_HI < 1073741824:
            hi = tl.minimum((start_m + 1) * BLOCK_M + BAND_HI, seq_k)
        acc, l_i, m_i = attention_keys(acc, l_i, m_i, q, k_ptr, v_ptr, k_desc, v_desc, k_base, k_row0, offs_m,
                                       seq_q, seq_k, stride_ks, mask_ptr, mask_base, stride_mq, stride_mk,
                                       scale_log2e, lo, hi, BLOCK_N, HEAD_DIM, BLOCK_D, EVEN, False, MASK, TMA,
                                       SCALE_POSITIVE, WIDEN, PRECISION)
    if MASK != 0:
        # A query that sees no key at all: torch answers zeros (acc is 0 there; 0 / 0 would be NaN).
        l_i = tl.where(l_i == 0.0, 1.0, l_i)
    out = (acc / l_i[:, None]).to(o_ptr.dtype.element_ty)
    if EVEN and HEAD_DIM == BLOCK_D:
        tl.store(o_ptr + q_at, out)
    else:
        tl.store(o_ptr + q_at, out, mask=q_inside)
'''

def kernel(plan: Any) -> str:
    """The kernel's text for ``plan``."""
    mask = plan.extra.get("mask")
    lines = attention_positions.KERNEL_LINES if mask and mask.get("positions") else ""
    return KERNEL.replace("POSITION_MASKS\n", lines)


FORWARD = '''def forward(self, {args}):
    {prologue}
    batch, heads, seq, head_dim = {q}.shape
    seq_k = {k}.shape[2]
    out = {allocate}
    scale = {scale}
    {mask_glue}BLOCK_M, BLOCK_N = {BLOCK_M}, {BLOCK_N}
    block_d = max(16, next_power_of_2(head_dim))
    even = seq % BLOCK_M == 0 and seq_k % BLOCK_N == 0
    # fp32 products as three tf32 ones (fp32's accuracy on the tensor cores); bf16 and fp16 as they are
    precision = "ieee" if INTERPRETED else "tf32x3" if {q}.dtype == torch.float32 else "tf32"
    attention_kernel[(ceil_div(seq, BLOCK_M), batch * heads)](
        {q}, {k}, {v}, out, {mask}, seq, seq_k, scale * 1.4426950408889634, {q}.stride(0), {q}.stride(1),
        {q}.stride(2), {k}.stride(0), {k}.stride(1), {k}.stride(2), {mask_strides}, heads,
        GROUP=heads // {k}.shape[1], BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N, HEAD_DIM=head_dim, BLOCK_D=block_d, CAUSAL={causal}, MASK={mask_kind}, EVEN=even,
        TMA={TMA} and even and block_d == head_dim, SCALE_POSITIVE=scale > 0 and not {additive},
        WIDEN=INTERPRETED, BAND_LO={band_lo}, BAND_HI={band_hi}, PRECISION=precision, num_warps={num_warps},
        num_stages={num_stages})
    return out
'''

MASK_GLUE = '''# the mask seen as [batch, heads, queries, keys] (a broadcast dimension has stride 0); booleans
    # read as bytes
    mask = {mask}.expand(batch, heads, seq, seq_k)
    mask = mask.view(torch.uint8) if mask.dtype == torch.bool else mask
    '''


def block_d(head_dim: int) -> int:
    """The head as the kernel holds it: the next power of two, at least 16 (``tl.dot``'s least K)."""
    return max(16, 1 << (max(head_dim, 1) - 1).bit_length())


def _call(gm: torch.fx.GraphModule) -> tuple[torch.fx.Node, dict[str, Any]] | None:
    """The graph's only op if it is scaled_dot_product_attention, with its options by name."""
    calls = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr")]
    if len(calls) != 1 or calls[0].op != "call_function" or calls[0].target not in attention_views.ATTENTION_CALLS:
        return None
    return calls[0], _options(calls[0])


def _options(node: torch.fx.Node) -> dict[str, Any]:
    """A scaled_dot_product_attention call's options after q, k, v, by name however they were passed."""
    options = dict(node.kwargs)
    for i, name in enumerate(("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")):
        if len(node.args) > 3 + i:
            options[name] = node.args[3 + i]
    return options


def _refuse_options(options: dict[str, Any]) -> None:
    if options.get("dropout_p", 0.0) != 0.0:
        raise CannotCover("attention with dropout is not covered")
    if not isinstance(options.get("enable_gqa", False), bool):
        raise CannotCover("attention whose enable_gqa is not a constant")
    if options.get("attn_mask") is not None and options.get("is_causal"):
        raise CannotCover("attention with both a mask and is_causal (torch refuses it too)")
    scale = options.get("scale")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise CannotCover("attention with a scale that is not a number")


def _check_shapes(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...], grouped: bool = False) -> None:
    """k and v of q's heads, or (``grouped``: enable_gqa) of a number of heads that divides q's."""
    if not (len(q) == len(k) == len(v) == 4 and k == v and q[0] == k[0] and q[3] == k[3]) or \
            not (q[1] == k[1] or (grouped and k[1] > 0 and q[1] % k[1] == 0)):
        raise CannotCover("attention is covered for q [batch, heads, queries, head_dim] and k, v of one shape "
                          "[batch, heads, keys, head_dim] (or fewer heads, each shared by a group of q's, with "
                          "enable_gqa or repeat_interleave)")


def _mask(gm: torch.fx.GraphModule, node: Any, value: Any, q: tuple[int, ...], k: tuple[int, ...]) -> dict[str, Any]:
    """The mask's source in the generated ``forward`` (an input, or a buffer of the module) and kind:
    ``bool`` (True: the key is seen) or ``additive`` (added to the scaled scores)."""
    if not isinstance(node, torch.fx.Node) or node.op not in ("placeholder", "get_attr") or \
            str(node.target).startswith(TRACED_CONSTANT):  # made in forward: not a tensor ModelNew holds
        why = node.meta.get("positions_refused") if isinstance(node, torch.fx.Node) else None
        raise CannotCover("attention with a mask computed in forward (covered: a mask passed in, a buffer, or one "
                          "made from positions, sizes and numbers)" + (f": {why}" if why else ""))
    if node.op == "get_attr":
        value = getattr(gm, str(node.target), None) if "." not in str(node.target) else None
        if value is None:
            raise CannotCover("attention with a mask held in a submodule")
    if not isinstance(value, torch.Tensor) or not (value.dtype == torch.bool or value.is_floating_point()):
        raise CannotCover("attention with a mask that is not a boolean or floating-point tensor")
    try:
        torch.broadcast_shapes(tuple(value.shape), (q[0], q[1], q[2], k[2]))
    except RuntimeError:
        raise CannotCover(f"attention with a mask of shape {list(value.shape)}, which does not broadcast to "
                          "[batch, heads, queries, keys]") from None
    source = node.name if node.op == "placeholder" else f"self.{node.target}"
    return {"source": source, "kind": "bool" if value.dtype == torch.bool else "additive"}


def recognise(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]],
              known: dict[str, tuple[int, ...]] | None = None,
              there: dict[str, torch.fx.Node] | None = None) -> dict[str, Any] | None:
    """The attention plan's details if ``gm`` is one call of scaled_dot_product_attention on its inputs
    (``shapes``: theirs at the size being optimised; ``known``: shapes there of a larger graph's nodes,
    by name), with a mask passed in or held as a buffer; None if it is something else."""
    viewed = attention_views.find(gm, inputs, shapes, known or {}, there)
    if viewed is not None:
        return _viewed(gm, inputs, shapes, viewed)
    found = _call(gm)
    if found is None:
        return None
    node, options = found
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    mask = options.get("attn_mask")
    if tuple(node.args[:3]) != tuple(placeholders[:3]) or len(inputs) != len(placeholders) or \
            len(shapes) != len(inputs) or len(placeholders) != 3 + (isinstance(mask, torch.fx.Node)
                                                                   and mask.op == "placeholder"):
        raise CannotCover("attention is covered for forward(q, k, v) or forward(q, k, v, mask) passed straight to "
                          "scaled_dot_product_attention")
    _refuse_options(options)
    q, k, v = (tuple(s) for s in shapes[:3])
    _check_shapes(q, k, v, bool(options.get("enable_gqa")))
    if q[3] > WIDEST_HEAD:
        raise CannotCover(f"attention with head_dim {q[3]} in one kernel (covered up to {WIDEST_HEAD}; wider heads "
                          "are planned as their matmuls)")
    # a mask passed in is checked at its size there; a buffer, as the small model holds it, against the
    # traced q and k (the generated forward's expand checks it again at run time)
    found_mask = None
    if mask is not None and len(inputs) > 3:
        found_mask = _mask(gm, mask, torch.empty(shapes[3], dtype=inputs[3].dtype, device="meta"), q, k)
    elif mask is not None:
        found_mask = _mask(gm, mask, None, tuple(inputs[0].shape), tuple(inputs[1].shape))
    return {"causal": bool(options.get("is_causal", False)), "scale": options.get("scale"), "seq": q[2],
            "seq_k": k[2], "head_dim": q[3], "mask": found_mask or attention_positions.planned(options)}


def _viewed(gm: torch.fx.GraphModule, inputs: list[Any], shapes: list[tuple[int, ...]],
            viewed: attention_views.AttentionViews) -> dict[str, Any]:
    """The plan's details where q, k and v are views taken in ``forward`` (see attention_views)."""
    node = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target in attention_views.ATTENTION_CALLS)
    options = _options(node)
    _refuse_options(options)
    q, k, v = viewed.shapes
    _check_shapes(q, k, v, bool(options.get("enable_gqa")))
    if q[3] > WIDEST_HEAD:
        raise CannotCover(f"attention with head_dim {q[3]} in one kernel (covered up to {WIDEST_HEAD})")
    mask, found_mask = options.get("attn_mask"), None
    if mask is not None:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        small_q, small_k = (tuple(a.meta["tensor_meta"].shape) for a in node.args[:2])
        tensors = [p for p, x in zip(placeholders, inputs, strict=False) if isinstance(x, torch.Tensor)]
        if mask in tensors and len(shapes) == len(tensors):  # shapes: the tensor inputs' (numbers come in too)
            at = tensors.index(mask)
            value = torch.empty(shapes[at], dtype=inputs[placeholders.index(mask)].dtype, device="meta")
            found_mask = _mask(gm, mask, value, q, k)
        elif mask in placeholders:
            raise CannotCover("attention with a mask passed in whose size there is not known")
        else:
            found_mask = _mask(gm, mask, None, small_q, small_k)
    return {"causal": bool(options.get("is_causal", False)), "scale": options.get("scale"), "seq": q[2],
            "seq_k": k[2], "head_dim": q[3], "mask": found_mask or attention_positions.planned(options),
            "views": viewed}


def _repeated_heads(node: Any) -> tuple[torch.fx.Node, int] | None:
    """(the tensor, the repeat count) where ``node`` repeats each head of a 4-D tensor a whole number
    of times (``k.repeat_interleave(n, dim=1)``) and nothing else reads the copy; else None."""
    if not isinstance(node, torch.fx.Node) or len(node.users) != 1 or not (
            (node.op == "call_method" and node.target == "repeat_interleave")
            or (node.op == "call_function" and node.target is torch.repeat_interleave)):
        return None
    source = node.args[0] if node.args else None
    repeats = node.args[1] if len(node.args) > 1 else node.kwargs.get("repeats")
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
    shape = getattr(getattr(source, "meta", {}).get("tensor_meta"), "shape", None)
    if not isinstance(source, torch.fx.Node) or shape is None or len(shape) != 4 or set(node.kwargs) - {
            "repeats", "dim"} or isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1 or \
            dim not in (1, -3):
        return None
    return source, repeats


def fold_repeated_heads(gm: torch.fx.GraphModule) -> bool:
    """Each scaled_dot_product_attention whose k and v are heads repeated the same number of times
    (``repeat_interleave(n, dim=1)``, grouped-query attention as Llama writes it) made to read them
    unrepeated with ``enable_gqa=True``, which means the same: the kernel then reads each head of k
    and v for its group of query heads instead of a copy n times larger. True if the graph changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not F.scaled_dot_product_attention or len(node.args) < 3:
            continue
        options = _options(node)
        k, v = _repeated_heads(node.args[1]), _repeated_heads(node.args[2])
        if k is None or v is None or k[1] != v[1] or options.get("enable_gqa") or node.args[1] is node.args[2]:
            continue
        q = getattr(getattr(node.args[0], "meta", {}).get("tensor_meta"), "shape", None)
        source = k[0].meta["tensor_meta"].shape
        if q is None or len(q) != 4 or q[0] != source[0] or q[1] != source[1] * k[1]:
            continue  # q broadcast against the repeated heads: not what enable_gqa means
        repeats = (node.args[1], node.args[2])
        node.args = (node.args[0], k[0], v[0], *node.args[3:])
        node.kwargs = {**node.kwargs, "enable_gqa": True}
        for repeat in repeats:
            gm.graph.erase_node(repeat)
        changed = True
    if changed:
        gm.recompile()
    return changed


def decompose_wide(gm: torch.fx.GraphModule, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Rewrite each non-causal, unmasked scaled_dot_product_attention whose head (at the size being
    optimised: ``shapes``, by node name) is wider than the flash kernel holds as
    ``softmax(q @ k.transpose(-2, -1) * scale, -1) @ v``; True if the graph changed."""
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not F.scaled_dot_product_attention or len(node.args) < 3:
            continue
        options = _options(node)
        q, k, v = node.args[:3]
        wide = [shapes.get(a.name) for a in (q, k, v) if isinstance(a, torch.fx.Node)]
        if len(wide) != 3 or any(s is None for s in wide) or wide[0][-1] <= WIDEST_HEAD:
            continue
        _refuse_options(options)
        if options.get("enable_gqa"):
            raise CannotCover(f"grouped-query attention with head_dim {wide[0][-1]} (one kernel covers up to "
                              f"{WIDEST_HEAD})")
        if options.get("attn_mask") is not None:
            raise CannotCover(f"attention with a mask and head_dim {wide[0][-1]} (one kernel covers up to "
                              f"{WIDEST_HEAD})")
        if options.get("is_causal"):
            raise CannotCover(f"causal attention with head_dim {wide[0][-1]} (one kernel covers up to {WIDEST_HEAD})")
        scale = options.get("scale")
        with gm.graph.inserting_before(node):
            keys = gm.graph.call_method("transpose", (k, -2, -1))
            scores = gm.graph.call_function(torch.matmul, (q, keys))
            if scale is None:  # torch's default, 1 / sqrt(head_dim), read from q as a user writes it
                root = gm.graph.call_function(math.sqrt, (gm.graph.call_method("size", (q, -1)),))
                scaled = gm.graph.call_function(operator.truediv, (scores, root))
            else:
                scaled = gm.graph.call_function(torch.mul, (scores, float(scale)))
            weights = gm.graph.call_function(torch.softmax, (scaled,), {"dim": -1})
            out = gm.graph.call_function(torch.matmul, (weights, v))
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.recompile()
    return changed


def seeds(plan: Any, tensor_descriptors: bool) -> list[tuple[str, dict[str, Any], str]]:
    """Block shapes to start from; with ``tensor_descriptors`` (Hopper's copy engine through Triton),
    the same tiles through TMA where the sequences divide into them and the head is a power of two."""
    out: list[tuple[str, dict[str, Any], str]] = []
    d, seq, seq_k = block_d(plan.extra["head_dim"]), plan.extra["seq"], plan.extra.get("seq_k", plan.extra["seq"])
    for bm, bn, warps, stages in ((128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3)):
        if d >= 256 and bn > 64:
            continue
        out.append(("flash", {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps, "num_stages": stages,
                              "TMA": False}, f"seed: {bm} queries per program, keys in blocks of {bn}"))
    if tensor_descriptors and d == plan.extra["head_dim"]:
        # Where the sequences divide into the blocks, the same tiles through Hopper's copy engine:
        # second and fourth, so that a short search measures both kinds of load.
        tma = [(s, dict(p, TMA=True), w.replace("seed:", "seed: TMA loads,", 1)) for s, p, w in out
               if seq % p["BLOCK_M"] == 0 and seq_k % p["BLOCK_N"] == 0][:2]
        for at, seed in zip((1, 3), tma, strict=False):
            out.insert(at, seed)
    return out


def forward(plan: Any, params: dict[str, Any]) -> str:
    """The generated ``forward``: one launch over (query blocks, batch x heads)."""
    viewed = plan.extra.get("views")
    q, k, v = plan.inputs[:3] if viewed is None else viewed.qkv
    scale = repr(float(plan.extra["scale"])) if plan.extra["scale"] is not None else "1.0 / math.sqrt(head_dim)"
    mask = plan.extra.get("mask")
    kind = {None: 0, "bool": 1, "additive": 2}[mask["kind"] if mask else None]
    read = bool(mask and mask["source"])  # a mask in memory; else none, or one made from positions
    kind += 2 if mask and not read else 0
    glue = MASK_GLUE.format(mask=mask["source"]) if read else ""
    strides = "mask.stride(0), mask.stride(1), mask.stride(2), mask.stride(3)" if read else "0, 0, 0, 0"
    band_lo, band_hi = mask["band"] if mask and not read else (-UNBOUNDED, UNBOUNDED)
    settings = {"TMA": False, **params}
    if viewed is None:
        prologue, allocate = f"{q} = {q}.contiguous()\n    {k} = {k}.contiguous()\n    {v} = {v}.contiguous()", \
            f"torch.empty_like({q})"
    else:  # q, k and v read through their strides; the output written through q's (see attention_views)
        prologue = attention_views.prologue(viewed)
        allocate = f"torch.empty_strided({q}.shape, {q}.stride(), dtype={q}.dtype, device={q}.device)"
        settings["TMA"] = f"{settings['TMA']} and {q}.is_contiguous() and {k}.is_contiguous() and {v}.is_contiguous()"
    return FORWARD.format(args=", ".join(plan.inputs), q=q, k=k, v=v, scale=scale, causal=plan.extra["causal"],
                          mask="mask" if read else q, mask_glue=glue, mask_strides=strides, mask_kind=kind,
                          additive=kind in (2, 4), band_lo=band_lo, band_hi=band_hi,
                          prologue=prologue, allocate=allocate, **settings)
