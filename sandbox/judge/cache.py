"""Where measured baselines and ceilings are kept between runs (``~/.cache/kernelevo`` by default),
and where the GPU locks are."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

from pydantic import BaseModel


def default_cache_dir() -> Path:
    root = os.environ.get("KERNELEVO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelevo")
    return Path(root)


LOCK_ROOT = Path("/tmp")
"""Where the machine-wide lock folders are: a fixed place, not one that follows ``TMPDIR`` or
``XDG_RUNTIME_DIR`` (a login shell and a cron job differ there, and would not take turns)."""


def default_lock_dir() -> Path:
    """Where the GPU locks are kept: one folder for the whole machine per user, whatever cache folder a
    run uses, so that two kernelevo processes (two runs, a benchmark beside the tests) take turns on a
    GPU instead of timing, or tracing with Nsight Compute, at the same time. ``KERNELEVO_LOCK_DIR``
    overrides. A folder there that is not this user's own, a link, or one others may write is not
    trusted, and then the locks stay in the cache folder."""
    chosen = os.environ.get("KERNELEVO_LOCK_DIR")
    if chosen:
        return Path(chosen)
    shared = LOCK_ROOT / f"kernelevo-locks-{os.getuid()}"
    try:
        shared.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(shared)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
            return shared
    except OSError:
        pass
    return default_cache_dir() / "locks"


def key_of(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "device"


def load(path: Path, model: type[BaseModel]) -> BaseModel | None:
    try:
        return model.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def store(path: Path, value: BaseModel) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(value.model_dump_json(indent=1))
    tmp.replace(path)
