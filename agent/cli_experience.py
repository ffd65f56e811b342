"""``kernelevo experience``: the library of verified kernels that runs keep and read back."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kernelevo.agent.cli_output import EXIT_USAGE, err, fail, out, printable

experience_app = typer.Typer(
    help="The experience library: each finished run keeps its verified best kernel (with its task's "
    "signature, times and the run's notes); later runs on similar tasks read the nearest back into the "
    "model's prompt, and the same task's kernel as a first candidate. Only kernels the harness re-judged "
    "correct are kept.", no_args_is_help=True)
LibraryOption = Annotated[Path | None, typer.Option(
    "--library", help="The experience file (default: experience.sqlite in the cache folder).")]


def _open(path: Path | None, as_json: bool):  # noqa: ANN202 - a Library
    from kernelevo.agent.experience import Library, default_path

    chosen = path or default_path()
    if path is not None and not chosen.exists():
        _fail(f"{chosen}: no such experience file", as_json)
    try:
        return Library(chosen)
    except (sqlite3.Error, OSError) as exc:
        _fail(f"{chosen} cannot be read as an experience library: {exc}", as_json)


def _fail(message: str, as_json: bool) -> None:
    fail(message, EXIT_USAGE, as_json)


@experience_app.command("list")
def list_command(library: LibraryOption = None,
                 as_json: Annotated[bool, typer.Option("--json", help="One JSON object per entry.")] = False) -> None:
    """Every kept kernel: its id, task, device, time and speedup."""
    with _open(library, as_json) as lib:
        entries = lib.entries()
    if as_json:
        for entry in entries:
            print(entry.model_dump_json(exclude={"source"}))
        return
    table = Table(title=f"experience ({len(entries)} kernel(s))")
    for column in ("id", "task", "inputs", "device", "ms", "speedup"):
        table.add_column(column, overflow="fold")
    for e in entries:
        table.add_row(e.id[:10], e.task, ", ".join(e.signature.inputs), e.device, f"{e.runtime_ms:.4g}",
                      f"{e.speedup:.2f}x" if e.speedup else "-")
    out.print(table)


@experience_app.command("show")
def show_command(entry_id: Annotated[str, typer.Argument(metavar="ID", help="An entry's id or its prefix.")],
                 library: LibraryOption = None,
                 as_json: Annotated[bool, typer.Option("--json", help="The entry as JSON.")] = False) -> None:
    """One kept kernel in full: its task's signature, times, the run's notes and the source."""
    with _open(library, as_json) as lib:
        try:
            entry = lib.get(entry_id)
        except ValueError as exc:
            _fail(str(exc), as_json)
    if entry is None:
        _fail(f"no entry {entry_id} in the experience library", as_json)
    if as_json:
        print(entry.model_dump_json(indent=2))
        return
    speed = f", {entry.speedup:.2f}x over eager" if entry.speedup else ""
    out.print(printable(f"{entry.id}  task {entry.task} on {entry.device}: {entry.runtime_ms:.4g} ms{speed}\n"
                        f"operations: {', '.join(entry.signature.ops)}\ninputs: {', '.join(entry.signature.inputs)}\n"
                        f"from run: {entry.run_dir}"), highlight=False, markup=False)
    for note in entry.notes:
        out.print(printable(f"note: {note}"), highlight=False, markup=False)
    out.print(printable(entry.source), highlight=False, markup=False)


@experience_app.command("forget")
def forget_command(entry_id: Annotated[str | None, typer.Argument(
                       metavar="ID", help="An entry's id or its prefix.")] = None,
                   every: Annotated[bool, typer.Option("--all", help="Forget every entry.")] = False,
                   library: LibraryOption = None) -> None:
    """Remove one kept kernel, or all of them with --all."""
    if (entry_id is None) == (not every):
        _fail("give an entry's ID or --all", False)
    with _open(library, False) as lib:
        try:
            removed = lib.forget(None if every else entry_id)
        except ValueError as exc:
            _fail(str(exc), False)
    if not removed:
        _fail(f"no entry {entry_id} in the experience library", False)
    err.print(f"forgot {removed} kernel(s)", highlight=False)
