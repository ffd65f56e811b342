"""The built-in suite: one KernelBench-format file per problem in ``tasks/builtin``."""

from __future__ import annotations

from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def builtin_names() -> list[str]:
    """Names of the built-in tasks, sorted."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.py") if not p.name.startswith("_"))


def builtin_path(name: str) -> Path | None:
    """The file of built-in task ``name``, or None."""
    path = BUILTIN_DIR / f"{name}.py"
    return path if path.is_file() and not name.startswith("_") else None
