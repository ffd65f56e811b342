"""``kernelevo eval`` and ``kernelevo profile``: one candidate judged, or profiled, against a task;
and what the other commands share to load a task and pick a sandbox."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kernelevo.agent.cli_output import (
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    err,
    out,
    plain,
    printable,
)
from kernelevo.agent.cli_output import fail as _fail
from kernelevo.sandbox.judge.rules import CHECKED_SETS


class SizeChoice(str, Enum):
    small = "small"
    full = "full"


class SandboxChoice(str, Enum):
    auto = "auto"
    docker = "docker"
    process = "process"


class PolicyChoice(str, Enum):
    builtin = "builtin"
    llm = "llm"



def _load_task(task: str, size: SizeChoice | None, memory: str | None, as_json: bool):  # noqa: ANN202
    """Check --memory and load TASK at --size (small without a GPU); bad input exits 2."""
    from kernelevo.sandbox.isolation.cgroups import parse_size
    from kernelevo.tasks import TaskError, load_task

    try:
        if memory:
            parse_size(memory)
        return load_task(task, (size.value if size else _default_size()))  # type: ignore[arg-type]
    except (TaskError, ValueError) as exc:
        _fail(str(exc), EXIT_USAGE, as_json)


def _default_size() -> str:
    from kernelevo.sandbox.judge.evaluate import detect_device

    return "full" if detect_device() == "cuda" else "small"


def eval_command(
    task: Annotated[str, typer.Argument(
        help="A KernelBench-format .py file, or a built-in task name (see `kernelevo tasks`).")],
    candidate: Annotated[Path, typer.Argument(help="A .py file defining ModelNew with custom Triton or CUDA kernels.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")] = False,
    timeout: Annotated[float, typer.Option(
        help="Seconds before the candidate's process group is killed.", min=1)] = 300.0,
    memory: Annotated[str | None, typer.Option(
        help="Memory limit of the candidate's process, e.g. 2g or 512m (default: half the host's memory).")] = None,
    sandbox: Annotated[SandboxChoice, typer.Option(
        help="Where candidates run: docker, process, or auto (Docker when an engine and the image are there).")
    ] = SandboxChoice.auto,
    seeds: Annotated[int, typer.Option(
        help="Input sets to check against, each drawn from a secret seed and cycling through the value "
        "variants (as generated, x0.01, x100, ties, shifted).", min=1, max=50)] = CHECKED_SETS,
    size: Annotated[SizeChoice | None, typer.Option(
        help="Problem size; default small without a GPU, full with one.")] = None,
    gpu: Annotated[int, typer.Option(help="Index of the GPU to use.", min=0)] = 0,
    workdir: Annotated[Path | None, typer.Option(help="Keep job folders (logs, results) here.")] = None,
    no_compile_baseline: Annotated[bool, typer.Option(
        "--no-compile-baseline", help="Skip timing torch.compile of the reference.")] = False,
    strict_layout: Annotated[bool, typer.Option(
        "--strict-layout", help="Outputs must also have the reference output's strides, not only its values.")
    ] = False,
    no_forensic: Annotated[bool, typer.Option(
        "--no-forensic", help="On a GPU, skip the Nsight Compute trace of an accepted candidate's kernels "
        "(faster; the verdict then says it is not forensic).")] = False,
    cuda_graph: Annotated[bool, typer.Option(
        "--cuda-graph", help="On a GPU, also time the candidate and the reference captured as CUDA graphs and "
        "replayed (launch costs gone), reported beside the plain time, never instead of it.")] = False,
) -> None:
    """Judge CANDIDATE against TASK: correct or not (and why), and how fast, measured by the harness.

    Examples:
      kernelevo eval softmax tasks/examples/softmax_triton.py
      kernelevo eval my_task.py my_kernel.py --json --timeout 120 --memory 8g
    """
    from kernelevo.sandbox.judge.evaluate import EvalConfig, EvalError, Evaluator

    loaded = _load_task(task, size, memory, as_json)
    _require_file(candidate, as_json)
    config = EvalConfig(timeout_s=timeout, memory=memory, seeds=seeds, gpu=gpu, workdir=workdir,
                        measure_compile=not no_compile_baseline, strict_layout=strict_layout,
                        forensic=not no_forensic, cuda_graph=cuda_graph)
    chosen = _sandbox(sandbox.value, as_json)
    try:
        with Evaluator(config, sandbox=chosen) as evaluator:
            verdict, code = _judge(evaluator, loaded, candidate, as_json)
    except EvalError as exc:
        _fail(str(exc), exc.exit_code, as_json)
    except KeyboardInterrupt:
        _fail("interrupted", EXIT_INTERRUPTED, as_json)
    if as_json:
        print(verdict.model_dump_json())
    else:
        _print_verdict(verdict)
    raise typer.Exit(code)


def profile_command(
    task: Annotated[str, typer.Argument(help="A KernelBench-format .py file, or a built-in task name.")],
    candidate: Annotated[Path, typer.Argument(help="A .py file defining ModelNew.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")] = False,
    no_ncu: Annotated[bool, typer.Option("--no-ncu", help="Skip the Nsight Compute pass.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds before a candidate's process is killed.", min=1)] = 300.0,
    memory: Annotated[str | None, typer.Option(
        help="Memory limit of the candidate's processes, e.g. 8g (default: half the host's memory).")] = None,
    sandbox: Annotated[SandboxChoice, typer.Option(help="Where candidates run: docker, process or auto.")
                       ] = SandboxChoice.auto,
    size: Annotated[SizeChoice | None, typer.Option(
        help="Problem size; default small without a GPU, full with one.")] = None,
    gpu: Annotated[int, typer.Option(help="Index of the GPU to use.", min=0)] = 0,
) -> None:
    """Judge CANDIDATE, then profile it: roofline, GPU telemetry, compiler report (registers, spills,
    shared memory) and Nsight Compute counters (DRAM and SM throughput, occupancy, L2 hit rate, stall
    reasons), ending in a one-line diagnosis.

    The counters come from a separate pass under ncu, so the harness's timings stay clean. Whatever
    cannot be collected here (no GPU, no ncu, counters refused by the driver) says so; the rest is
    still reported. Exit code 1 when the candidate is rejected (nothing to profile).

    Examples:
      kernelevo profile softmax tasks/examples/softmax_triton.py
      kernelevo profile rmsnorm best.py --json
    """
    from kernelevo.sandbox.advice.profiling import HarnessProfiler, describe
    from kernelevo.sandbox.judge.evaluate import EvalConfig, EvalError, Evaluator

    loaded = _load_task(task, size, memory, as_json)
    _require_file(candidate, as_json)
    config = EvalConfig(timeout_s=timeout, memory=memory, gpu=gpu)
    chosen = _sandbox(sandbox.value, as_json)
    try:
        with Evaluator(config, sandbox=chosen) as evaluator:
            verdict, code = _judge(evaluator, loaded, candidate, as_json)
            if not verdict.correct:
                if as_json:
                    print(json.dumps({"verdict": verdict.model_dump(mode="json"), "profile": None}))
                else:
                    _print_verdict(verdict)
                    err.print("nothing to profile: the candidate was rejected", highlight=False)
                raise typer.Exit(code)
            if not as_json:
                err.print("[dim]profiling (compiler report, then Nsight Compute)...[/dim]")
            profile = HarnessProfiler(evaluator, use_ncu=not no_ncu).profile(loaded, candidate, verdict)
    except EvalError as exc:
        _fail(str(exc), exc.exit_code, as_json)
    except KeyboardInterrupt:
        _fail("interrupted", EXIT_INTERRUPTED, as_json)
    if as_json:
        print(json.dumps({"verdict": verdict.model_dump(mode="json"), "profile": profile.model_dump(mode="json")}))
    else:
        out.print(printable(describe(profile)), highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK)


def _require_file(candidate: Path, as_json: bool) -> None:
    if not candidate.is_file():
        _fail(f"candidate file not found: {candidate}", EXIT_USAGE, as_json)


def _judge(evaluator, task, candidate: Path, as_json: bool):  # noqa: ANN001, ANN202 - Evaluator, Task
    """``evaluator.evaluate``, saying first what is being judged (unless the output is JSON)."""
    if not as_json:
        err.print(f"[dim]judging {candidate} against {task.name} ({task.size}) on {evaluator.device}...[/dim]")
    return evaluator.evaluate(task, candidate)


def _sandbox(choice: str, as_json: bool):  # noqa: ANN202 - a Sandbox
    """The sandbox for ``--sandbox``; Docker asked for but unavailable is exit code 3, in one line."""
    from kernelevo.sandbox.isolation.choose import make_sandbox
    from kernelevo.sandbox.isolation.docker import DockerUnavailable

    try:
        chosen, warning = make_sandbox(choice)
    except DockerUnavailable as exc:
        _fail(str(exc), EXIT_ENVIRONMENT, as_json)
    if warning:
        err.print(printable(warning), markup=False, highlight=False)
    return chosen


def _print_verdict(verdict) -> None:  # noqa: ANN001 - a Verdict
    from kernelevo.sandbox.judge.timing import tie_note

    table = Table(title=plain(f"{verdict.candidate} vs {verdict.task} ({verdict.size})"), show_lines=False)
    table.add_column("check")
    table.add_column("")
    table.add_column("detail", overflow="fold")
    for check in verdict.checks:
        passed = "[green]pass[/green]" if check.passed else "[red]FAIL[/red]"
        table.add_row(plain(check.name), passed, plain(check.detail))
    out.print(table)
    status = "[green]ACCEPTED[/green]" if verdict.correct else "[red]REJECTED[/red]"
    out.print(f"{status}" + (f": {plain(verdict.reason)}" if verdict.reason else ""), highlight=False)
    if verdict.runtime_ms is not None:
        if verdict.timing == "cuda-events":
            line = f"candidate {verdict.runtime_ms:.4g} ms, eager {verdict.reference_runtime_ms:.4g} ms"
            if verdict.speedup:
                line += f", speedup {verdict.speedup:.2f}x"
                tie = tie_note(verdict.speedup)
                line += f" ({tie})" if tie else ""
            if verdict.compile_runtime_ms:
                line += f"; torch.compile {verdict.compile_runtime_ms:.4g} ms ({verdict.speedup_vs_compile:.2f}x)"
            if verdict.roofline_fraction:
                line += f"; {100 * verdict.roofline_fraction:.0f}% of the {verdict.bound}-bound roofline"
            if verdict.noise_pct is not None:
                line += f"; noise {verdict.noise_pct:.1f}%"
        else:
            line = (f"{verdict.timing} times (not speedups): candidate {verdict.runtime_ms:.4g} ms, "
                    f"reference {verdict.reference_runtime_ms:.4g} ms; run on a GPU to measure speed")
        out.print(line, highlight=False, markup=False)
    if verdict.graph_runtime_ms is not None:
        out.print(f"as CUDA graphs: candidate {verdict.graph_runtime_ms:.4g} ms, reference "
                  f"{verdict.graph_reference_ms:.4g} ms (beside the plain times, not instead)", highlight=False)
    if verdict.graph_note:
        out.print(f"[yellow]CUDA graph:[/yellow] {plain(verdict.graph_note)}", highlight=False)
    iso = verdict.isolation
    if iso:
        from kernelevo.sandbox.models import Isolation

        isolation = Isolation.model_validate(iso)
        out.print(f"[dim]isolation: {plain(isolation.summary())}[/dim]", highlight=False)
        for warning in isolation.warnings:
            out.print(f"[yellow]warning:[/yellow] {plain(warning)}", highlight=False)
    if verdict.assurance:
        out.print(f"[dim]assurance: {plain(verdict.assurance)}[/dim]", highlight=False)
    if verdict.log:
        out.print(f"[dim]the candidate process's log: {plain(verdict.log)}[/dim]", highlight=False)
    out.print(f"[dim]device: {verdict.device}[/dim]", highlight=False)
