"""Where measured baselines and ceilings are kept between runs (``~/.cache/kernelevo`` by default)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from pydantic import BaseModel


def default_cache_dir() -> Path:
    root = os.environ.get("KERNELEVO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelevo")
    return Path(root)


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
