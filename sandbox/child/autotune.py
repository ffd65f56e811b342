"""``@triton.autotune`` where it cannot tune: under the CPU interpreter there is no driver to time
configurations with (Triton raises "0 active drivers"), so the candidate is judged with its first
configuration, as a kernel with only that one would be. On a GPU autotuning runs as written; its
choices are cached (``TRITON_CACHE_AUTOTUNING``) so that a second process judging the same
candidate, such as the forensic pass, reuses them instead of timing every configuration again."""

from __future__ import annotations

import os
from typing import Any


def judge_first_config_under_interpreter() -> bool:
    """Under ``TRITON_INTERPRET=1``, make every autotuner keep only its first configuration."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    original = Autotuner.prune_configs

    def first_config(self: Any, kwargs: dict) -> list:
        return list(original(self, kwargs))[:1]

    Autotuner.prune_configs = first_config
    return True
