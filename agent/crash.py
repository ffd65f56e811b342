"""kernelevo's own errors in a long run: the traceback kept in the run's folder, one line said.

A run that stops on a bug of ours must lose nothing and say so plainly: what it judged stays in its
store, the error is one line, and the traceback is in ``crash.log`` for the report a user files."""

from __future__ import annotations

import traceback
from pathlib import Path

CRASH_LOG = "crash.log"
"""The traceback of a run stopped by kernelevo's own error, in the run's folder."""


def keep_crash(run_dir: Path, exc: BaseException) -> str:
    """Write ``exc``'s traceback to ``run_dir/crash.log``; the error and where it was raised, in words."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    at = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    try:
        (run_dir / CRASH_LOG).write_text("".join(traceback.format_exception(exc)))
        kept = f"; the traceback is in {run_dir / CRASH_LOG}"
    except OSError as err:
        kept = f"; its traceback could not be kept ({err.strerror})"
    return f"kernelevo's own error ({type(exc).__name__}: {str(exc)[:300]}{at}){kept}"


BUG_HINT = "this is a bug in kernelevo, please report it with that file; nothing judged is lost"
