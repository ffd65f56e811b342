"""Names of a reference's inputs kept apart from the names generated code binds.

A generated ``forward`` takes the reference's inputs by position under their own names and binds
variables of its own (``out``, ``grid``, sizes, views); an input named like one of those would be
overwritten, so such inputs are renamed in the traced graph before anything is planned.
"""

from __future__ import annotations

import torch
import torch.fx

GENERATED_NAMES = frozenset({
    "h", "h0", "d", "w", "od", "oh", "ow", "kt", "kr", "ks", "st", "sr", "ss", "pt", "pr", "ps", "dt", "dr", "ds",
    "k_out", "cg", "groups", "weight", "out", "grid", "ws", "sms", "tiles", "tiles_c", "n_tiles", "n_rows", "n_cols",
    "vec", "block_c", "chunk", "outer", "reduced", "inner", "positions", "batch", "heads", "seq", "head_dim", "scale",
    "even", "losses", "parts", "self", "torch", "triton", "tl", "nn", "F", "math", "aligned", "conv_geometry",
    "pool_geometry", "src", "idx", "sizes", "strides", "n", "c", "padded", "block_i", "keep", "start", "edge_index",
    "ab", "wb", "count", "block", "block_d", "c_out", "full", "given", "i", "k", "m", "t", "t0", "s", "mask", "length",
    "ratio", "precision",
    "run", "runs", "seq_k", "shares", "size", "out_size", "span", "table", "table_c", "table_s", "strides_c",
    "strides_s",
    "round_to_bf16", "fmod_exact", "divide_by_number", "true_divide", "phase_taps", "tma_scratch",
    "InterpretedFunction", "ceil_div", "next_power_of_2"})
"""Names the generated ``forward`` methods and files define: an input of the reference with one of
these names (or an upper-case name, a private one, one beginning ``attr_`` or ``ws_``, the local name of a module's
tensor a cat reads, or one ending ``_rows``, ``_kernel``, ``_view`` or ``_of``) is renamed."""


MODULE_NAMES = frozenset({"ceil_div", "next_power_of_2", "round_to_bf16", "fmod_exact", "divide_by_number",
                          "divide_by_count", "true_divide", "phase_taps", "tma_scratch", "aligned", "conv_geometry",
                          "pool_geometry", "InterpretedFunction", "INTERPRETED", "CAST_ROUNDS", "RECIPROCAL_DIVISION"})
"""Module-level names a generated file defines besides its kernels (``*_kernel``): a helper or constant of
the reference carried along under one of them would be replaced by the file's own."""


def clashes(name: str) -> bool:
    """Could the generated code bind ``name`` (see ``GENERATED_NAMES``)?"""
    return (name in GENERATED_NAMES or name.isupper() or name.startswith(("_", "attr_", "ws_"))
            or name.endswith(("_rows", "_kernel", "_view", "_of")))


def safe_input_names(gm: torch.fx.GraphModule) -> None:
    """Rename ``gm``'s inputs that would clash with names the generated code defines (``h``, ``w``,
    ``out``, ``BLOCK_M`` ...): the candidate's ``forward`` takes its inputs by position, so the names
    are ours to choose."""
    changed = False
    for node in gm.graph.nodes:
        name = node.name
        if node.op == "placeholder" and clashes(name):
            node.target = f"input_{name.strip('_')}"
            node._rename(node.target)
            changed = True
    if changed:
        gm.recompile()
