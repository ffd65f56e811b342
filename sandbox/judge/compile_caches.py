"""Candidates' compile caches: one folder per candidate source, which no other candidate can find.

A compiled kernel in a cache is trusted by whoever loads it: Triton keys a cubin by the kernel's
source, not by the bytes on disk. If candidate A could write where candidate B's process looks, A
could leave a correct binary under the key of B's wrong kernel; B would then be judged on A's binary
and the user handed B's source. So a candidate's processes (its timed one, its forensic pass, its
side jobs) compile into a folder of their own, named by a keyed hash of the source: another source
never maps to it, and the name cannot be worked out without the evaluator's key. The cache's root
and its folder of candidates belong to the judge and can be entered, not listed or written (as
root; without root the sandbox's user is ours, and the candidate's process narrows its own writing
to its folder with Landlock as it is named, ``child/worker.py``).

A folder is shared by every evaluation of the same source on one evaluator (the kernels need not be
compiled again), except where an evaluation asks to compile afresh: the final re-judge, whose time
must be the handed-back source's own, compiled from it, whatever any earlier process left on disk.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path

from kernelevo.sandbox.child.compile_env import env_for
from kernelevo.sandbox.isolation.namespaces import hand_over, keep_private

__all__ = ["CANDIDATES", "CandidateCaches", "env_for"]

CANDIDATES = "by-candidate"
"""The folder of candidates' caches inside a compile cache."""


class CandidateCaches:
    """The candidates' caches under ``root`` for one evaluator (its key lives as long as it does)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._key = secrets.token_bytes(32)
        keep_private(root, 0o711)
        keep_private(root / CANDIDATES, 0o711)

    def folder_for(self, source: bytes, afresh: bool = False) -> Path:
        """The cache folder of this source, made and handed to the sandbox's user; ``afresh``: a new,
        empty one that no earlier process has seen."""
        salt = secrets.token_bytes(16) if afresh else b""
        name = hmac.new(self._key, salt + hashlib.sha256(source).digest(), hashlib.sha256).hexdigest()[:32]
        folder = self.root / CANDIDATES / name
        hand_over(folder)
        return folder
