"""Free device memory a process's caching allocator keeps, handed back to the driver.

The judge's two processes (the oracle and the candidate's) each have their own allocator, and a block
one of them keeps cached is memory the other cannot use. At a task's real size the difference is
whole input sets: the candidate's process makes each set's values, copies them into its input
buffers and keeps copies of them for the mutation check, and each of those, once freed, stays cached
in that process. The driver then counts it against the candidate when the oracle runs out of memory
(``judge/device_memory.candidate_share``), though the candidate never held it."""

from __future__ import annotations

import torch

RELEASE_ABOVE_BYTES = 1 << 30
"""Cached free blocks beyond this are handed back (below it, releasing would cost more allocations than
it frees)."""


def release_cached_blocks() -> None:
    """Hand cached free blocks back to the driver when they exceed ``RELEASE_ABOVE_BYTES``."""
    if torch.cuda.is_initialized() and (torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
                                        > RELEASE_ABOVE_BYTES):
        torch.cuda.empty_cache()
