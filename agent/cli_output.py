"""What every ``kernelevo`` command prints through, and how it fails: one place for the consoles,
the error line (a JSON object too under ``--json``), and the exit codes (``sandbox/exit_codes.py``)."""

from __future__ import annotations

import json
import re

import typer
from rich.console import Console
from rich.markup import escape

from kernelevo.sandbox.exit_codes import (  # noqa: F401 - the CLI's codes, kept with the judge's errors
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
)

out = Console()
err = Console(stderr=True)

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Terminal controls (C0 but tab and line feed, DEL, C1) and the bidirectional overrides that make
text read otherwise than it is written."""


def printable(text: object) -> str:
    """``text`` with every terminal control character (escape sequences, C1 controls) shown as its code:
    a candidate's error can carry ones that clear the screen or print a fake "ACCEPTED" in colour."""
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) > 0xff else f"\\x{ord(m.group()):02x}",
                         str(text))


def plain(text: object) -> str:
    """``text`` shown as it is, never read as Rich markup or as terminal controls: verdicts, strategies
    and errors carry words a candidate or a model wrote (``[/judge]`` would end the command;
    ``[green]ACCEPTED`` would lie, and so would an escape sequence)."""
    return escape(printable(text))


def fail(message: str, code: int, as_json: bool) -> None:
    """Print ``message`` as an error (and as ``{"error": ...}`` under ``--json``), then exit with ``code``."""
    if as_json:
        print(json.dumps({"error": message}))
    err.print(f"[red]error:[/red] {plain(message)}", highlight=False)
    raise typer.Exit(code)
