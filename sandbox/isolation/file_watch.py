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

import errno
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

FILES_LIMIT = 100_000
"""Entries (files, folders, links) a job may create in its writable host folders, all together. A Triton
or CUDA compile cache holds a few files per kernel; a candidate's outputs are a handful of tensor files."""
WATCH_INTERVAL_S = 1.0


MAX_DEPTH = 256
"""Folders nested deeper than this are not walked: the job is stopped as one that cannot be counted
(honest compile caches nest a few levels; the walk holds one open folder per level)."""
_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_GONE = (FileNotFoundError, NotADirectoryError)
"""An entry removed or replaced while it is walked: nothing there to count."""


def count_entries(folders: Iterable[Path], stop_after: int) -> tuple[int, str | None]:
    """Entries under ``folders`` (never following links), counted up to ``stop_after`` + 1 at most, and
    why a folder could not be walked (then the count is ``stop_after`` + 1: what cannot be counted
    counts as too much). Each folder is opened relative to its parent, so no path grows past the
    system's limit on path length, however deep the tree."""
    count = 0
    for folder in folders:
        try:
            top = os.open(folder, _FLAGS)
        except _GONE:
            continue
        except OSError as exc:
            return stop_after + 1, f"{folder}: {exc.strerror}"
        stack: list[tuple[int, Any]] = [(top, os.scandir(top))]
        try:
            while stack:
                fd, entries = stack[-1]
                entry = next(entries, None)
                if entry is None:
                    entries.close()
                    os.close(fd)
                    stack.pop()
                    continue
                count += 1
                if count > stop_after:
                    return count, None
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if len(stack) >= MAX_DEPTH:
                    return stop_after + 1, f"folders nested more than {MAX_DEPTH} deep"
                try:
                    child = os.open(entry.name, _FLAGS, dir_fd=fd)
                except (*_GONE, OSError) as exc:
                    if isinstance(exc, _GONE) or exc.errno == errno.ELOOP:  # replaced by a link meanwhile
                        continue
                    return stop_after + 1, f"a folder it made unreadable ({exc.strerror})"
                stack.append((child, os.scandir(child)))
        finally:
            for fd, entries in stack:
                entries.close()
                os.close(fd)
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
            count, why = count_entries(self.folders, self.limit)
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
