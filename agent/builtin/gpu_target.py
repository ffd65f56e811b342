"""The GPU the built-in strategist plans its seeds for: its SMs, the shared memory a program may use,
and whether it has Hopper's copy engine (read from Triton's driver; an H100/H200 without a GPU)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Target:
    """The GPU the seeds plan for."""

    sms: int = 132
    shared_bytes: int = 232448
    """Shared memory one program may use; proposals that need more fail to launch."""
    tma: bool = True
    """Hopper or later: the TMA templates can run."""


HOPPER = Target()
"""An H100 or H200: what the Triton compile gate compiles for, and the plan without a GPU."""


@functools.cache
def target() -> Target:
    """This machine's GPU (the first), as Triton's driver reports it; :data:`HOPPER` without one."""
    try:
        if not torch.cuda.is_available():
            return HOPPER
        from triton.runtime import driver

        props = driver.active.utils.get_device_properties(0)
        return Target(sms=int(props["multiprocessor_count"]), shared_bytes=int(props["max_shared_mem"]),
                      tma=torch.cuda.get_device_capability(0)[0] >= 9)
    except Exception:  # another Triton's driver API: plan for the GPU the seeds were written for
        return HOPPER
