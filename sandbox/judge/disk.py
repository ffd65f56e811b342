"""The disk the judge writes on: how much a candidate-filled folder takes, how much is free, and the
room a session needs. A hostile candidate may fill its folders to fill the disk; the judge measures
without walking them (``du`` counts as ``rm`` removes) and keeps nothing that would leave it short."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

DISK_ROOM_BYTES = 8 << 30
"""Free disk a session should find: a few times what one session of a task of gigabytes writes at
once. Nothing is kept from a candidate's folders that would leave less; a full disk during a session
that began with this much was filled while the candidate ran."""


def disk_use(folder: Path, timeout_s: float = 30.0) -> int | None:
    """The bytes of disk ``folder`` and all beneath it take (blocks in use, not sizes: a sparse file
    counts what it holds): links not followed, one file system, any depth. None where ``du`` could not
    say within ``timeout_s``."""
    try:
        done = subprocess.run(["du", "-s", "-x", "-B1", "--", str(folder)], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        return int(done.stdout.split()[0]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def free_bytes(folder: Path | None) -> int | None:
    """Free bytes on the disk holding ``folder`` (None where that cannot be read)."""
    try:
        return shutil.disk_usage(folder).free if folder is not None else None
    except OSError:
        return None
