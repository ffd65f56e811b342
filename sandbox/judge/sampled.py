"""Checking a large timed output by a sample of its leaves, in the oracle.

A timed call commits to its output with a SHA-256 tree (``child/digest.py``) before anyone says which
calls are checked. For outputs of gigabytes, shipping and comparing the whole output of each checked
call costs seconds a check; instead the session draws leaves (4096-byte pieces of the output's bytes)
after the call, and the candidate's process ships those leaves with the tree's hashes above them.
The oracle checks that the leaves are the ones the committed tree holds (each hashes to its place,
and the tree's root under the call's secret seed is the digest the call returned), then compares
their values with eager's at the same places, with the whole output's tolerance.

What a sample bounds is the share of wrong bytes: an output wrong in a share ``p`` of its leaves
passes one check with chance ``(1 - p) ** leaves``. Where the work is spread over the output, as in
most kernels, skipping work shows as wrong leaves in proportion and is caught on the first check. But
work need not be spread evenly: one output may join a large cheap part and a small costly one, and a
candidate could skip the costly part, wrong in one leaf of thousands. So a share of the checks
(``whole_share``, drawn after the call like the check itself) ships whole outputs, and one call among
each block's least, drawn when the block starts and kept secret, is checked whole: a candidate that
skips work in more than half of the calls, as it must to move the median, meets it with chance above
one half in every block, whatever it counts. On a GPU the forensic pass stands behind that (its calls
compare whole outputs, and a median timed call much shorter than the candidate's own kernels under
ncu rejects). Every checked call of the correctness phase still compares whole outputs.
"""

from __future__ import annotations

import math
import random
from functools import partial
from pathlib import Path
from typing import Any

import torch

from kernelevo.sandbox import tensor_files
from kernelevo.sandbox.child import digest
from kernelevo.sandbox.judge import compare, ties
from kernelevo.sandbox.models import OutputStats, TimingPolicy


def draw_leaves(rng: random.Random, sizes: list[int], count: int) -> list[list[int]]:
    """For each output of ``sizes`` bytes, ``count`` distinct leaves (all of them if it has fewer), in
    order; drawn by the trusted side after the call committed to its output. The layout the candidate
    chose is not known yet, and a padded one spans up to ``SPAN_FACTOR`` times the bytes
    (``tensor_files.spanned``): so the leaves a padded span may have past a dense output's are drawn
    from too, each with the same chance, and those past the output's own are dropped where it is
    shipped (``digest.leaves_within``). A dense output keeps exactly ``count`` (or all); every leaf of
    any layout is drawn with at least that chance."""
    drawn = []
    for size in sizes:
        n = digest.leaf_count(size)
        beyond = digest.leaf_count(math.floor(size * tensor_files.SPAN_FACTOR)) - n
        leaves = rng.sample(range(n), min(count, n))
        if beyond > 0:
            leaves += rng.sample(range(n, n + beyond), min(beyond, math.ceil(count * beyond / n)))
        drawn.append(sorted(leaves))
    return drawn


def draw_if_sampled(rng: random.Random, sizes: list[int], policy: TimingPolicy) -> list[list[int]] | None:
    """The leaves a timed check ships, or None where it ships whole outputs: below the policy's size, and
    for a share of the checks above it, drawn apart from everything else."""
    if sum(sizes) < policy.sample_from_bytes or rng.random() < policy.whole_share:
        return None
    return draw_leaves(rng, sizes, policy.sampled_leaves)


def positions(leaves: list[int], shape: list[int], element_bytes: int,
              strides: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the values the leaves hold go: the logical flat index of each value, in order, and which
    of the leaves' values those are (all, but the gaps of a spanned layout), for an output whose bytes
    were hashed as a tensor file at ``strides`` holds them (``digest.output_bytes``; row-major where
    None). A leaf holds whole values: every element size divides the leaf's."""
    total = tensor_files.file_elements(shape, strides) if strides is not None else math.prod(shape)
    per_leaf = digest.LEAF_BYTES // element_bytes
    flat = torch.cat([torch.arange(k * per_leaf, min(total, (k + 1) * per_leaf)) for k in leaves]) if leaves \
        else torch.empty(0, dtype=torch.long)
    keep = torch.ones(flat.shape, dtype=torch.bool)
    order = tensor_files.storage_order(shape, strides) if strides is not None else None
    if order and flat.numel():
        where = torch.unravel_index(flat, tuple(int(shape[d]) for d in order))
        index = [where[j] for j in tensor_files.inverse(order)]  # each logical dimension's index
    elif strides is not None and tensor_files.spanned(shape, strides) and flat.numel():
        index, keep = _span_indices(flat, shape, strides)
        flat = flat[keep]
        index = [i[keep] for i in index]
    else:
        return flat, keep
    row_major = torch.empty(tuple(int(d) for d in shape), device="meta").stride()
    return sum((i * step for i, step in zip(index, row_major)), torch.zeros_like(flat)), keep


def _span_indices(offsets: torch.Tensor, shape: list[int], strides: list[int]) -> tuple[list[torch.Tensor],
                                                                                        torch.Tensor]:
    """Each logical dimension's index of the values at ``offsets`` in a spanned layout's storage, and
    which offsets hold a value at all (the rest are gaps): by division, the largest stride first."""
    rest = offsets.clone()
    index = [torch.zeros_like(offsets) for _ in shape]
    keep = torch.ones(offsets.shape, dtype=torch.bool)
    for d in sorted((d for d in range(len(shape)) if int(shape[d]) > 1), key=lambda d: -int(strides[d])):
        index[d] = rest // int(strides[d])
        keep &= index[d] < int(shape[d])
        rest = rest - index[d] * int(strides[d])
    return index, keep & (rest == 0)


def at(tensor: torch.Tensor | None, flat: torch.Tensor) -> torch.Tensor | None:
    """``tensor``'s values at logical flat indices ``flat``, without a contiguous copy of the whole."""
    if tensor is None:
        return None
    index = torch.unravel_index(flat.to(tensor.device), tensor.shape) if tensor.dim() else ()
    return tensor[index] if tensor.dim() else tensor.reshape(1).expand(flat.numel())


def compare_leaves(msg: dict[str, Any], metas: list[tensor_files.TensorFile], want: list[Any],
                   exact: list[Any] | None, sensitivity: list[float | compare.Scale]) -> dict[str, Any]:
    """The oracle's answer to ``compare_leaves``: each output's proof opened (``digest.open_leaf_proof``),
    its leaves compared with eager's values at the same places; ``digests``: the roots the proofs give,
    which the session holds against the digests the call returned."""
    leaves = msg["leaves"]
    if len(metas) != len(want) or len(leaves) != len(want):
        return {"ok": True, "problem": f"returned {len(metas)} outputs, the reference returns {len(want)}", "stats": []}
    found: list[dict[str, Any]] = []
    digests: list[list[int]] = []
    for k, (meta, w) in enumerate(zip(metas, want)):
        problem = compare.problem_in_description(meta, w)
        if problem:
            found.append(OutputStats(problem=problem).model_dump())
            continue
        strides = [int(s) for s in meta.strides]
        size = tensor_files.file_elements(meta.shape, strides) * w.element_size()  # as the call hashed it
        asked = digest.leaves_within([int(i) for i in leaves[k]], size)
        expected = digest.proof_bytes(size, asked)
        try:
            proof = tensor_files.read_tensor(tensor_files.TensorFile(file=meta.file, dtype="uint8", shape=[expected]),
                                             Path(msg["folder"]), "cpu", expected)
        except (OSError, ValueError) as exc:
            found.append(OutputStats(problem=f"the output's leaves could not be read: {exc}").model_dump())
            continue
        opened = digest.open_leaf_proof(proof.numpy().tobytes(), int(msg["digest_seed"]), k, size, w.dtype,
                                        w.shape, asked, strides)
        if isinstance(opened, str):
            found.append(OutputStats(problem=f"the leaves shipped are not the output the call committed to "
                                             f"({opened})").model_dump())
            continue
        root, pieces = opened
        digests.append(root)
        flat, keep = positions(asked, list(w.shape), w.element_size(), strides)
        raw = torch.frombuffer(bytearray(b"".join(pieces)), dtype=torch.uint8) if pieces \
            else torch.empty(0, dtype=torch.uint8)
        got = raw.view(w.dtype)[keep].to(w.device)
        w = ties.order_matched(got, w, (msg.get("tie_order") or want)[k], partial(at, flat=flat))
        x = exact[k] if exact is not None else None
        stats = compare.compare_output(got, at(w, flat), at(x, flat), float(msg["atol"]), float(msg["rtol"]),
                                       sensitivity[k], bool(msg.get("scale_atol")), whole=(w, x), positions=flat,
                                       scaled_up=bool(msg.get("scaled_up")))
        if stats.problem is None and msg.get("strict_layout"):
            stats.problem = compare.layout_problem(meta.strides, w)
        found.append(stats.model_dump())
    problems = [f"output {k}: {s['problem']}" if len(found) > 1 else s["problem"]
                for k, s in enumerate(found) if s["problem"]]
    return {"ok": True, "problem": problems[0] if problems else None, "stats": found, "digests": digests}
