"""The disk the judge writes on: how much a candidate-filled folder takes, how much is free, and the
room a session needs. A hostile candidate may fill its folders to fill the disk; the judge measures
without walking them (``du`` counts as ``rm`` removes) and keeps nothing that would leave it short."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

DISK_ROOM_BYTES = 8 << 30
"""Free disk a session should find: a few times what one session of a task of gigabytes writes at
once. Nothing is kept from a candidate's folders that would leave less; a full disk during a session
that began with this much was filled while the candidate ran."""


DISK_ROOM_FILES = 200_000
"""Free inodes a session should find: a folder of millions of empty files fills a disk as surely as
gigabytes do, and no byte count shows it."""


def _du(folder: Path, unit: str, timeout_s: float) -> int | None:
    try:
        done = subprocess.run(["du", "-s", "-x", unit, "--", str(folder)], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        return int(done.stdout.split()[0]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def disk_use(folder: Path, timeout_s: float = 30.0) -> tuple[int, int] | None:
    """The bytes (blocks in use, not sizes: a sparse file counts what it holds) and the files (inodes)
    ``folder`` and all beneath it take: links not followed, one file system, any depth. None where
    ``du`` could not say within ``timeout_s``."""
    used = _du(folder, "-B1", timeout_s)
    files = _du(folder, "--inodes", timeout_s) if used is not None else None
    return None if used is None or files is None else (used, files)


def free_space(folder: Path | None) -> tuple[int, int] | None:
    """Free bytes and free inodes on the disk holding ``folder`` (None where that cannot be read)."""
    try:
        if folder is None:
            return None
        stats = os.statvfs(folder)
        return shutil.disk_usage(folder).free, stats.f_favail
    except OSError:
        return None


def has_room(free: tuple[int, int] | None, need_bytes: int = DISK_ROOM_BYTES) -> bool:
    """``free`` (from :func:`free_space`) holds ``need_bytes`` and ``DISK_ROOM_FILES`` inodes."""
    return free is not None and free[0] >= need_bytes and free[1] >= DISK_ROOM_FILES
