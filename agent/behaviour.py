"""Behavioural cells for the archive, from what a kernel is and how it ran (pure logic).

A model's own label for its strategy ("tiled", "fast-v2", "optimized") says little and changes from
reply to reply, so cells for a model's candidates come from measured features instead: the family
its source shows (CUDA or Triton, and which constructs its kernels use: matrix-unit dots, loops,
reductions, atomics, autotuning), how many distinct kernels a call launched, and whether the verdict
found it memory- or compute-bound. Two kernels alike in all three compete for one cell whatever
they were called; a kernel unlike the rest gets a cell of its own and survives even while slower.
"""

from __future__ import annotations

import ast

from kernelevo.sandbox.models import Verdict

MEASURED = "llm"
"""The descriptor a policy gives when the cell should come from the kernel itself."""
_FEATURES = {"dot": "dot", "atomic_add": "atomics", "atomic_max": "atomics", "atomic_min": "atomics",
             "atomic_cas": "atomics", "sum": "reduce", "max": "reduce", "min": "reduce", "reduce": "reduce",
             "argmax": "reduce", "cumsum": "scan", "associative_scan": "scan"}


def structure_family(source: str) -> str:
    """``cuda``, or ``triton`` with the constructs its ``@triton.jit`` functions use, e.g.
    ``triton:dot+loop``, ``triton:reduce``, ``triton:plain``; ``unreadable`` for a source that cannot be
    read (broken, or nested past what the parser walks)."""
    try:
        return _structure_family(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "unreadable"


def _structure_family(source: str) -> str:
    tree = ast.parse(source)
    if "load_inline" in source:
        return "cuda"
    features = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or not any("jit" in ast.unparse(d) for d in node.decorator_list):
            continue
        if any("autotune" in ast.unparse(d) for d in node.decorator_list):
            features.add("autotune")
        for inner in ast.walk(node):
            if isinstance(inner, (ast.For, ast.While)):
                features.add("loop")
            if isinstance(inner, ast.Attribute) and inner.attr in _FEATURES:
                features.add(_FEATURES[inner.attr])
    return "triton:" + ("+".join(sorted(features)) or "plain")


def kernel_count(verdict: Verdict) -> str:
    distinct = len(verdict.launches)
    return "1 kernel" if distinct <= 1 else "2 kernels" if distinct == 2 else "3+ kernels"


def behaviour_cell(source: str, verdict: Verdict) -> str:
    """The archive cell of a judged candidate: family, kernels per call, and what bounds it."""
    return f"{structure_family(source)}|{kernel_count(verdict)}|{verdict.bound or 'unbounded'}"
