"""The variables that name where a process compiles (Triton, torch's extensions, inductor, the XDG
cache) and each one's folder inside a compile cache: one list for the judge, which makes the folders
(``judge/compile_caches.py``), and for the candidate's process, which points itself at them."""

from __future__ import annotations

from pathlib import Path

KINDS = {"TRITON_CACHE_DIR": "triton", "TORCH_EXTENSIONS_DIR": "torch_extensions",
         "TORCHINDUCTOR_CACHE_DIR": "inductor", "XDG_CACHE_HOME": "xdg"}


def env_for(folder: Path) -> dict[str, str]:
    """The compile-cache variables for a process that compiles into ``folder``."""
    return {name: str(folder / sub) for name, sub in KINDS.items()}
