"""A limit on how many files a job creates in the host folders it may write.

A memory or process limit has a kernel behind it; a count of files has none without filesystem quotas.
A candidate that writes millions of small files costs every later step that reads its folders
(measuring a compile cache, removing a job's folders): each would wait out its time limit and leave
the files behind, and over a night the disk's inodes run out. So a thread walks the job's writable
folders while it runs, counting entries and stopping as soon as the count passes the limit, and kills
the job when it does. An honest job writes tens to a few thousand files (a compile cache, its outputs),
so the walk is cheap; a flood is caught within one interval.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

FILES_LIMIT = 100_000
"""Entries (files, folders, links) a job may create in its writable host folders, all together. A Triton
or CUDA compile cache holds a few files per kernel; a candidate's outputs are a handful of tensor files."""
WATCH_INTERVAL_S = 1.0


FIND = shutil.which("find") or "find"
_VANISHED = b"No such file or directory"
"""find's words for an entry removed while it walked (a compiler's temporary file): nothing to count."""


def count_entries(folders: Iterable[Path], stop_after: int) -> tuple[int, str | None]:
    """Entries under ``folders`` (never following links), counted up to ``stop_after`` + 1 at most, and
    why a folder could not be walked (then the count is ``stop_after`` + 1: what cannot be counted
    counts as too much). GNU find walks them: it opens each folder from its parent and keeps few
    folders open, so neither a tree deeper than a path may be long nor one deeper than the open-file
    limit escapes the count."""
    roots = [str(f) for f in folders if os.path.lexists(f)]
    if not roots:
        return 0, None
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen([FIND, *roots, "-mindepth", "1", "-printf", "."], stdout=subprocess.PIPE,
                                stderr=errors, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        count = 0
        while chunk := proc.stdout.read(1 << 16):
            count += len(chunk)
            if count > stop_after:
                proc.kill()
                proc.wait()
                return stop_after + 1, None
        proc.wait()
        errors.seek(0)
        unexpected = [line for line in errors.read().splitlines() if line and _VANISHED not in line]
    if proc.returncode != 0 and unexpected:
        return stop_after + 1, unexpected[0].decode(errors="replace")[-200:]
    return count, None


class FileWatch:
    """Counts the entries in ``folders`` every ``interval`` seconds while a job runs; past ``limit``
    calls ``kill`` once and remembers it (``over``)."""

    def __init__(self, folders: list[Path], kill: Callable[[], None], limit: int | None = None,
                 interval: float = WATCH_INTERVAL_S) -> None:
        self.folders, self.kill, self.interval = folders, kill, interval
        self.limit = FILES_LIMIT if limit is None else limit
        self.over = False
        self.why: str | None = None
        """Where the walk could not go, if that is why the job was stopped."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="file-watch")

    def start(self) -> FileWatch:
        if self.folders:
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                count, why = count_entries(self.folders, self.limit)
            except Exception:
                if self._stop.is_set() or sys.is_finalizing():
                    return  # a walk still running when the job ended or the process exits: nothing to count
                raise
            if count > self.limit:
                self.over, self.why = True, why
                self.kill()
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def watched_folders(job_dir: Path, writable: list[Path], compile_cache: Path | None, folder_writable: bool,
                    trusted: bool, private_tmp: Path | None = None) -> list[Path]:
    """The host folders an untrusted job may write (none for the judge's own processes)."""
    if trusted:
        return []
    found = [*writable, *([compile_cache] if compile_cache else []), *([job_dir] if folder_writable else []),
             *([private_tmp] if private_tmp else [])]
    return list(dict.fromkeys(found))
