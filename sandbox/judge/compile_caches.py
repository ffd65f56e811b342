"""Candidates' compile caches: every process compiles into a folder of its own, and only the judge
carries a folder from one process of a source to the next.

A compiled kernel in a cache is trusted by whoever loads it: Triton keys a cubin by the kernel's
source, not by the bytes on disk, and torch loads an extension by its name. If candidate A could
write where candidate B's process looks, A could leave a correct binary under the key of B's wrong
kernel; B would be judged on A's binary and the user handed B's source. So no candidate's process
can reach another's cache, not even by name:

- each process (a candidate's timed process, its forensic pass, a side job) gets an empty folder
  of its own as it starts (``scratch``), the only part of the cache it may write or see (bubblewrap
  and Docker mount that folder alone; elsewhere Landlock confines writing to it, and as root the
  cache's root and its folders are the judge's, mode 711, entered by name only);
- the evaluations of one source share compiled kernels (its forensic pass would otherwise compile
  them again, under ncu): when a process ends, the judge moves its folder to ``kept/<name>``, where
  the name is a hash of the source keyed with a secret of this evaluator's, and moves it into the
  next process of the same source before naming the candidate to it (``lend``). What such a folder
  holds was written by processes of that very source, so it is that source's own doing;
- a final re-judge compiles afresh (``afresh``): its time is the handed-back source's own, compiled
  from it.

Kept folders are bounded: each (``KEPT_CAP_*``), all of one evaluator's together (``KEPT_TOTAL_*``:
the oldest kept go first), and they go when the evaluator closes, since no later evaluator holds
its key (a folder left by one that died is removed by the next that finds it).

Any failure to carry a folder leaves the process without it (the kernels are compiled again): it
never fails an evaluation. Where the sandbox mounts the process's folder (bubblewrap, Docker), it
appears at one fixed path, ``confinement.CACHE_INSIDE``, so a torch extension's build files, which
name their folder, stay valid from one process to the next.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from kernelevo.sandbox.isolation.namespaces import hand_over, keep_private, remove_tree
from kernelevo.sandbox.judge.disk import disk_use, free_space, has_room

KEPT, SCRATCH = "kept", "procs"
"""The folders, inside a compile cache, of the sources' kept caches and of the processes' own."""
KINDS = {"TRITON_CACHE_DIR": "triton", "TORCH_EXTENSIONS_DIR": "torch_extensions",
         "TORCHINDUCTOR_CACHE_DIR": "inductor", "XDG_CACHE_HOME": "xdg"}
"""The variables that name where a process compiles, and each one's folder inside a cache."""
_NAME = re.compile(r"[0-9a-f]{32}")
KEPT_CAP_FILES = 20_000
"""Nor one holding more files than this: a Triton cache holds a few a kernel, an extension's build a
dozen; millions of empty files would use up the disk's inodes."""
KEPT_CAP_BYTES = 1 << 30
"""A process's cache holding more than this is not kept: honest ones hold kilobytes (Triton) to a few
hundred megabytes (a torch extension's build); a candidate filling its folder must not fill the disk
for every verdict after its own."""
KEPT_TOTAL_BYTES = 4 << 30
KEPT_TOTAL_FILES = 100_000
"""All of an evaluator's kept caches together: past either, the oldest kept are removed (many
candidates each keeping just under the caps must not fill the disk either)."""


def env_for(folder: Path) -> dict[str, str]:
    """The compile-cache variables for a process that compiles into ``folder``."""
    return {name: str(folder / sub) for name, sub in KINDS.items()}


class CandidateCaches:
    """The candidates' caches under ``root`` for one evaluator (its key lives as long as it does)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._key = secrets.token_bytes(32)
        for folder in (root, root / KEPT, root / SCRATCH):
            keep_private(folder, 0o711)
        _remove_orphans(root / KEPT)
        self.kept_root = root / KEPT / f"{os.getpid()}-{secrets.token_hex(8)}"
        keep_private(self.kept_root, 0o711)
        self._kept_use: dict[str, tuple[int, int]] = {}
        """Bytes and files of each kept folder, oldest first."""

    def close(self) -> None:
        """Remove every kept folder: no later evaluator can name them (the key dies with this one)."""
        remove_tree(self.kept_root)
        self._kept_use.clear()

    def name_for(self, source: bytes, afresh: bool = False) -> str:
        """The name the source's kept cache goes by; ``afresh``: a name no other evaluation has."""
        salt = secrets.token_bytes(16) if afresh else b""
        return hmac.new(self._key, salt + hashlib.sha256(source).digest(), hashlib.sha256).hexdigest()[:32]

    def scratch(self) -> Path:
        """A new, empty folder for one process, handed to the sandbox's user."""
        folder = self.root / SCRATCH / secrets.token_hex(16)
        hand_over(folder)
        return folder

    def _kept(self, name: str) -> Path:
        """The kept folder of ``name``; anything but a name :meth:`name_for` gives is refused (an empty
        name would be the folder of all kept caches)."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a compile cache's name: {name!r}")
        return self.kept_root / name

    def lend(self, name: str, scratch: Path) -> None:
        """Move what the source's kept cache holds into ``scratch``, the folder of a process of the same
        source that has not yet been named its candidate. The entries move, not the folder: the process
        was started with ``scratch`` itself mounted or allowed, and holds on to that folder, not its
        path. Nothing kept, or anything in the way: the process compiles again."""
        kept = self._kept(name)
        try:
            if kept.is_symlink() or not kept.is_dir():
                return
            for entry in os.listdir(kept):
                if not os.path.lexists(scratch / entry):
                    os.rename(kept / entry, scratch / entry)
        except OSError:
            pass
        remove_tree(kept)
        self._kept_use.pop(name, None)

    @contextlib.contextmanager
    def lent(self, name: str, scratch: Path) -> Iterator[Path]:
        """``scratch`` holding the source's kept cache for as long as its process runs, then kept again
        (the process, and all it started, must have ended when the block does)."""
        self.lend(name, scratch)
        try:
            yield scratch
        finally:
            self.keep(name, scratch)

    def drop(self, name: str) -> None:
        """Remove what is kept under ``name`` (an afresh evaluation's: no later process has its name)."""
        remove_tree(self._kept(name))
        self._kept_use.pop(name, None)

    def keep(self, name: str, scratch: Path) -> None:
        """After the process that used ``scratch`` has ended: keep its folder for the source's next
        process (replacing what was kept), out of every candidate's reach. What it holds was written by
        that source's own processes; the judge never walks it, only moves and removes it."""
        kept = self._kept(name)
        self.drop(name)
        try:
            used = self._worth_keeping(scratch) if not scratch.is_symlink() and scratch.is_dir() else None
            if used is not None:
                os.rename(scratch, kept)
                self._kept_use[name] = used
                self._evict_oldest()
                return
        except OSError:
            pass
        remove_tree(scratch)

    def _worth_keeping(self, scratch: Path) -> tuple[int, int] | None:
        """Its bytes and files, if small enough to keep with room left on the disk (a folder ``du``
        cannot measure is not kept); else None."""
        used = disk_use(scratch)
        ok = (used is not None and used[0] <= KEPT_CAP_BYTES and used[1] <= KEPT_CAP_FILES
              and has_room(free_space(self.root)))
        return used if ok else None

    def _evict_oldest(self) -> None:
        """Remove the oldest kept folders while all of them together pass ``KEPT_TOTAL_*``."""
        while self._kept_use and (sum(b for b, _ in self._kept_use.values()) > KEPT_TOTAL_BYTES
                                  or sum(f for _, f in self._kept_use.values()) > KEPT_TOTAL_FILES):
            self.drop(next(iter(self._kept_use)))


def _remove_orphans(kept: Path) -> None:
    """Kept folders of evaluators whose process is gone (named ``<pid>-<token>``), or of any other name:
    their key died with them, so nothing can use them again."""
    try:
        entries = os.listdir(kept)
    except OSError:
        return
    for entry in entries:
        pid = entry.split("-", 1)[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        remove_tree(kept / entry)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True
