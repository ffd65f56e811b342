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
    order; drawn by the trusted side after the call committed to its output."""
    counts = [digest.leaf_count(size) for size in sizes]
    return [sorted(rng.sample(range(n), min(count, n))) for n in counts]


def draw_if_sampled(rng: random.Random, sizes: list[int], policy: TimingPolicy) -> list[list[int]] | None:
    """The leaves a timed check ships, or None where it ships whole outputs: below the policy's size, and
    for a share of the checks above it, drawn apart from everything else."""
    if sum(sizes) < policy.sample_from_bytes or rng.random() < policy.whole_share:
        return None
    return draw_leaves(rng, sizes, policy.sampled_leaves)


def positions(leaves: list[int], shape: list[int], element_bytes: int,
              order: tensor_files.Order = None) -> torch.Tensor:
    """The logical flat element indices the leaves hold, in order (a leaf holds whole elements: every
    element size divides the leaf's), for an output whose bytes were hashed with its dimensions in
    ``order`` (``tensor_files.storage_order``; row-major where None)."""
    numel = math.prod(int(d) for d in shape)
    per_leaf = digest.LEAF_BYTES // element_bytes
    flat = torch.cat([torch.arange(k * per_leaf, min(numel, (k + 1) * per_leaf)) for k in leaves]) if leaves \
        else torch.empty(0, dtype=torch.long)
    if not order or not flat.numel():
        return flat
    where = torch.unravel_index(flat, tuple(int(shape[d]) for d in order))
    index = [where[j] for j in tensor_files.inverse(order)]  # each logical dimension's index
    row_major = torch.empty(tuple(int(d) for d in shape), device="meta").stride()
    return sum((i * step for i, step in zip(index, row_major)), torch.zeros_like(flat))


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
        size = w.numel() * w.element_size()
        asked = [int(i) for i in leaves[k]]
        expected = digest.proof_bytes(size, asked)
        try:
            proof = tensor_files.read_tensor(tensor_files.TensorFile(file=meta.file, dtype="uint8", shape=[expected]),
                                             Path(msg["folder"]), "cpu", expected)
        except (OSError, ValueError) as exc:
            found.append(OutputStats(problem=f"the output's leaves could not be read: {exc}").model_dump())
            continue
        order = tensor_files.storage_order(meta.shape, meta.strides)  # the layout the call hashed
        opened = digest.open_leaf_proof(proof.numpy().tobytes(), int(msg["digest_seed"]), k, size, w.dtype,
                                        w.shape, asked, order)
        if isinstance(opened, str):
            found.append(OutputStats(problem=f"the leaves shipped are not the output the call committed to "
                                             f"({opened})").model_dump())
            continue
        root, pieces = opened
        digests.append(root)
        flat = positions(asked, list(w.shape), w.element_size(), order)
        raw = torch.frombuffer(bytearray(b"".join(pieces)), dtype=torch.uint8) if pieces \
            else torch.empty(0, dtype=torch.uint8)
        got = raw.view(w.dtype).to(w.device)
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
