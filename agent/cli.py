"""The ``kernelevo`` command line.

Exit codes, the same for every command: 0 success (for eval: accepted); 1 rejected, or no correct
candidate found; 2 bad usage or unreadable input; 3 something the environment lacks (no GPU where
one is required, no Docker engine); 4 interrupted, resumable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kernelevo.agent.cli_experience import experience_app
from kernelevo.agent.cli_judge import SizeChoice, eval_command, profile_command
from kernelevo.agent.cli_output import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_USAGE, err, out, plain
from kernelevo.agent.cli_output import fail as _fail
from kernelevo.agent.cli_request import request_command
from kernelevo.agent.cli_runs import (
    export_command,
    optimize_command,
    optimize_model_command,
    report_command,
    resume_command,
    status_command,
    trace_command,
)

app = typer.Typer(
    name="kernelevo",
    help="Make GPU code faster with no human in the loop: write, verify and evolve CUDA/Triton kernels.\n\n"
    "Start with `kernelevo doctor` (what this machine offers), `kernelevo tasks` (the built-in problems) and "
    "`kernelevo eval TASK CANDIDATE` (judge a kernel).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

app.command("eval")(eval_command)
app.command("profile")(profile_command)
app.command("optimize")(optimize_command)
app.command("optimize-model")(optimize_model_command)
app.command("resume")(resume_command)
app.command("status")(status_command)
app.command("report")(report_command)
app.command("trace")(trace_command)
app.command("export")(export_command)


@app.command("tasks")
def tasks_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    size: Annotated[SizeChoice, typer.Option(help="Which size's overrides to show.")] = SizeChoice.full,
) -> None:
    """List the built-in tasks (any KernelBench-format file works as TASK too)."""
    from kernelevo.tasks import builtin_names, load_task

    loaded = [load_task(name, size.value) for name in builtin_names()]  # type: ignore[arg-type]
    if as_json:
        print(json.dumps([{"name": t.name, "dtype": t.dtype or "float32", "strict": not t.allow_partial,
                           "description": t.description, "path": str(t.path)} for t in loaded]))
        return
    table = Table(title=f"built-in tasks ({len(loaded)})")
    for column in ("name", "dtype", "replacement", "description"):
        table.add_column(column, overflow="fold")
    for t in loaded:
        table.add_row(t.name, t.dtype or "float32", "partial" if t.allow_partial else "strict", t.description)
    out.print(table)


sandbox_app = typer.Typer(help="The Docker sandbox's image.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(experience_app, name="experience")
app.command("request")(request_command)


@sandbox_app.command("build")
def sandbox_build_command(
    dockerfile: Annotated[Path | None, typer.Option(
        help="Build from this Dockerfile instead (needs a registry for its base image), e.g. sandbox/Dockerfile.")
    ] = None,
    tag: Annotated[str, typer.Option(help="The image's tag.")] = "kernelevo-sandbox:local",
) -> None:
    """Build the Docker sandbox's image.

    By default from local files only (no registry, as in an air-gapped cluster): an almost empty
    root filesystem imported with `docker import`; /usr, the Python installation, the virtual
    environment and kernelevo are bind-mounted read-only into each container at run time.

    Examples:
      kernelevo sandbox build
      kernelevo sandbox build --dockerfile sandbox/Dockerfile --tag kernelevo-sandbox:cuda
    """
    from kernelevo.sandbox.isolation.docker import DockerUnavailable, build_image, client

    try:
        if dockerfile is None:
            image = build_image(tag)
        else:
            if not dockerfile.is_file():
                _fail(f"no Dockerfile at {dockerfile}", EXIT_USAGE, False)
            built, _ = client().images.build(path=str(dockerfile.resolve().parent), dockerfile=dockerfile.name,
                                             tag=tag, rm=True)
            image = built.id
    except DockerUnavailable as exc:
        _fail(str(exc), EXIT_ENVIRONMENT, False)
    except Exception as exc:  # a build error: say it in one line
        _fail(f"the image could not be built: {str(exc).splitlines()[0][:300]}", EXIT_ENVIRONMENT, False)
    out.print(f"built {tag} ({image[:19]})", highlight=False, markup=False)


@app.command("doctor")
def doctor_command(as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False) -> None:
    """Show what this machine offers: GPU, driver, CUDA, nvcc, ncu, Triton mode, Docker, isolation."""
    from kernelevo.sandbox.isolation.environment import probe_environment

    probes = probe_environment()
    if as_json:
        print(json.dumps([p.model_dump() for p in probes]))
        return
    table = Table(title="kernelevo doctor")
    table.add_column("item")
    table.add_column("")
    table.add_column("detail", overflow="fold")
    for p in probes:
        table.add_row(p.item, "[green]yes[/green]" if p.available else "[yellow]no[/yellow]", p.detail)
    out.print(table)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - unplanned, in any command: one line, the traceback kept
        sys.exit(_unplanned(exc))


def _unplanned(exc: Exception) -> int:
    """Say an error no command planned for in one line, keep its traceback under the cache folder, and
    give its exit code (3 the machine's, 5 kernelevo's own)."""
    import tempfile
    import time

    from kernelevo.agent.crash import exit_code_of, hint, keep_crash
    from kernelevo.sandbox.judge.cache import default_cache_dir

    crashes = default_cache_dir() / "crashes"
    try:
        crashes.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=crashes))
    except OSError:
        folder = crashes
    err.print(f"[red]error:[/red] {plain(keep_crash(folder, exc))}\n{hint(exc)}", highlight=False)
    return exit_code_of(exc)


if __name__ == "__main__":
    main()
