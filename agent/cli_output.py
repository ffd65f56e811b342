"""What every ``kernelevo`` command prints through, and how it fails: one place for the consoles,
the exit codes and the error line (a JSON object too under ``--json``)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

out = Console()
err = Console(stderr=True)

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5
"""5: kernelevo's own error (a bug, not the input's or the machine's): a run is left interrupted with the
traceback in its folder's ``crash.log``, to resume once kernelevo is fixed."""


def plain(text: object) -> str:
    """``text`` shown as it is, never read as Rich markup: verdicts, strategies and errors carry words a
    candidate or a model wrote (``[/judge]`` would end the command; ``[green]ACCEPTED`` would lie)."""
    return escape(str(text))


def fail(message: str, code: int, as_json: bool) -> None:
    """Print ``message`` as an error (and as ``{"error": ...}`` under ``--json``), then exit with ``code``."""
    if as_json:
        print(json.dumps({"error": message}))
    err.print(f"[red]error:[/red] {plain(message)}", highlight=False)
    raise typer.Exit(code)
