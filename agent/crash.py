"""Errors nobody planned for in a long run: the machine's (a full disk, no memory) or kernelevo's own.

A run that stops on one must lose nothing and say so plainly: what it judged stays in its store, the
error is one line, and the traceback is in ``crash.log`` for the report a user files."""

from __future__ import annotations

import errno
import sqlite3
import traceback
from pathlib import Path

from kernelevo.sandbox.exit_codes import EXIT_ENVIRONMENT, EXIT_INTERNAL

CRASH_LOG = "crash.log"
"""The traceback of a run stopped by an unplanned error, in the run's folder."""

BUG_HINT = "this is a bug in kernelevo, please report it with that file; nothing judged is lost"
MACHINE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO, errno.ENOMEM}


def is_the_machines(exc: BaseException) -> bool:
    """A full or read-only disk, a folder closed to us, no memory: the machine's, not a bug."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS:
        return True
    return isinstance(exc, sqlite3.OperationalError) and any(
        words in str(exc) for words in ("disk is full", "readonly", "disk I/O error", "unable to open"))


def exit_code_of(exc: BaseException) -> int:
    return EXIT_ENVIRONMENT if is_the_machines(exc) else EXIT_INTERNAL


def keep_crash(run_dir: Path, exc: BaseException) -> str:
    """Write ``exc``'s traceback to ``run_dir/crash.log``; the error, whose it is and where it was
    raised, in one line."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    at = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = " ".join(str(exc).split())[:300]
    whose = "the machine" if is_the_machines(exc) else "kernelevo's own error"
    try:
        (run_dir / CRASH_LOG).write_text("".join(traceback.format_exception(exc)))
        kept = f"; the traceback is in {run_dir / CRASH_LOG}"
    except OSError as err:
        kept = f"; its traceback could not be kept ({err.strerror})"
    return f"{whose} ({type(exc).__name__}: {text}{at}){kept}"


def hint(exc: BaseException) -> str:
    """What to do next, in one line."""
    return ("free the disk or memory it names, then go on; nothing judged is lost" if is_the_machines(exc)
            else BUG_HINT)
