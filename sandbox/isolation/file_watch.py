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
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

FILES_LIMIT = 100_000
"""Entries (files, folders, links) a job may create in its writable host folders, all together. A Triton
or CUDA compile cache holds a few files per kernel; a candidate's outputs are a handful of tensor files."""
WATCH_INTERVAL_S = 1.0


def count_entries(folders: Iterable[Path], stop_after: int) -> int:
    """Entries under ``folders`` (never following links), counted up to ``stop_after`` + 1 at most."""
    count = 0
    pending = [str(f) for f in folders]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    count += 1
                    if count > stop_after:
                        return count
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:  # a folder removed or closed meanwhile: what it held is not countable
            continue
    return count


class FileWatch:
    """Counts the entries in ``folders`` every ``interval`` seconds while a job runs; past ``limit``
    calls ``kill`` once and remembers it (``over``)."""

    def __init__(self, folders: list[Path], kill: Callable[[], None], limit: int | None = None,
                 interval: float = WATCH_INTERVAL_S) -> None:
        self.folders, self.kill, self.interval = folders, kill, interval
        self.limit = FILES_LIMIT if limit is None else limit
        self.over = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="file-watch")

    def start(self) -> FileWatch:
        if self.folders:
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if count_entries(self.folders, self.limit) > self.limit:
                self.over = True
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
