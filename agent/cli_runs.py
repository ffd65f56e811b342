"""The commands of a run: ``optimize`` and ``optimize-model`` start one, ``resume`` carries one on,
``status``, ``report`` and ``trace`` read one, ``export`` writes its best candidate out."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.table import Table

from kernelevo.agent.cli_judge import PolicyChoice, SandboxChoice, SizeChoice, _default_size, _load_task, _sandbox
from kernelevo.agent.cli_output import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    err,
    out,
    plain,
    printable,
)
from kernelevo.agent.cli_output import fail as _fail
from kernelevo.agent.crash import exit_code_of, hint, keep_crash


def _run_dir_for(task: str) -> Path:
    stem = Path(task).stem if task.endswith(".py") else task
    return Path("runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


# Options `optimize` and `optimize-model` declare alike.
PolicyOption = Annotated[PolicyChoice | None, typer.Option(
    help="Who proposes kernels: the built-in strategist (no LLM) or a model (--model).")]
ApiKeyEnvOption = Annotated[str, typer.Option(help="Environment variable that holds the API key.")]
TimeoutOption = Annotated[float, typer.Option(help="Seconds per candidate before it is killed.", min=1)]
MemoryOption = Annotated[str | None, typer.Option(
    help="Memory limit per candidate, e.g. 8g (default: half the host's memory).")]
# `optimize`'s options whose help runs over several lines, kept apart so that its signature stays readable.
RetryMinutesOption = Annotated[float, typer.Option(
    help="Keep retrying an endpoint that is down or overloaded this long (growing pauses, its Retry-After "
    "honoured) before stopping resumably.", min=0)]
IslandsOption = Annotated[int | None, typer.Option(
    help="With a model: conversations at once, each growing its own population, the best migrating "
    "between them every 2 generations (default: one per evaluation slot).", min=1, max=16)]
ExperienceOption = Annotated[Path | None, typer.Option(
    help="The experience library (default: experience.sqlite in the cache folder); see `kernelevo "
    "experience`.")]
NoBuiltinSeedOption = Annotated[bool, typer.Option(
    "--no-builtin-seed", help="With a model: do not start from the built-in strategist's first kernel "
    "(by default the model starts from it where the templates cover the task).")]


def optimize_command(
    task: Annotated[str, typer.Argument(help="A KernelBench-format .py file, or a built-in task name.")],
    policy: PolicyOption = None,
    model: Annotated[str | None, typer.Option(
        help="Model name at an OpenAI-compatible endpoint; implies --policy llm.")] = None,
    base_url: Annotated[str | None, typer.Option(
        help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1.")] = None,
    api_key_env: ApiKeyEnvOption = "OPENAI_API_KEY",
    retry_minutes: RetryMinutesOption = 15.0,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the model.", min=0)] = 0.2,
    model_timeout: Annotated[float, typer.Option(help="Seconds before one model request times out.", min=1)] = 120.0,
    steps_per_turn: Annotated[int, typer.Option(help="Model replies per generation at most.", min=1)] = 16,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget (input + output).", min=1)] = None,
    max_cost_usd: Annotated[float | None, typer.Option(
        help="Cost budget in USD (needs --price-in/--price-out).")] = None,
    price_in: Annotated[float, typer.Option(help="USD per million input tokens.")] = 0.0,
    price_out: Annotated[float, typer.Option(help="USD per million output tokens.")] = 0.0,
    max_evals: Annotated[int | None, typer.Option(help="Distinct candidates the harness may judge.", min=1)] = 20,
    max_minutes: Annotated[float | None, typer.Option(help="Wall-clock budget in minutes.", min=0)] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Run folder (default: runs/<task>-<timestamp>).")] = None,
    sandbox: Annotated[SandboxChoice, typer.Option(
        help="Where candidates run: docker, process, or auto (Docker when an engine and the image are there).")
    ] = SandboxChoice.auto,
    size: Annotated[SizeChoice | None, typer.Option(
        help="Problem size; default small without a GPU, full with one.")] = None,
    timeout: TimeoutOption = 300.0,
    memory: MemoryOption = None,
    batch: Annotated[int, typer.Option(help="Candidates proposed per generation.", min=1, max=64)] = 3,
    report: Annotated[bool, typer.Option(
        "--report", help="Keep RUN_DIR/report.html (see `kernelevo report`) up to date as the run goes.")] = False,
    strict_layout: Annotated[bool, typer.Option(
        "--strict-layout", help="Outputs must also have the reference output's strides.")] = False,
    no_forensic: Annotated[bool, typer.Option(
        "--no-forensic", help="On a GPU, skip the Nsight Compute trace of candidates about to be accepted.")
    ] = False,
    cuda_graph: Annotated[bool, typer.Option(
        "--cuda-graph", help="On a GPU, also time every candidate replayed as a CUDA graph (reported beside "
        "its plain time; selection still uses the plain time).")] = False,
    islands: IslandsOption = None,
    experience: ExperienceOption = None,
    no_experience: Annotated[bool, typer.Option(
        "--no-experience", help="Neither read earlier runs' verified kernels nor keep this run's best.")] = False,
    no_builtin_seed: NoBuiltinSeedOption = False,
) -> None:
    """Search for a faster, verified replacement of TASK, with no human in the loop.

    Every candidate is judged by the harness; the best is re-judged with fresh seeds before it is
    called best. Stop with Ctrl-C at any time and continue with `kernelevo resume RUN_DIR`.

    Examples:
      kernelevo optimize softmax --max-evals 12
      kernelevo optimize my_task.py --max-minutes 60 --run-dir runs/night1
    """
    from kernelevo.agent.budget import Budget
    from kernelevo.agent.runner import RunConfig

    chosen = _policy_of(policy, model)
    loaded = _load_task(task, size, memory, False)
    budget = Budget(max_evals=max_evals, max_minutes=max_minutes, max_tokens=max_tokens, max_cost_usd=max_cost_usd,
                    price_in=price_in, price_out=price_out)
    config = RunConfig(task=str(loaded.path) if not loaded.builtin else loaded.name, size=loaded.size,
                       policy=chosen, budget=budget, timeout_s=timeout, memory=memory, batch=batch, model=model,
                       base_url=base_url, api_key_env=api_key_env, sandbox=sandbox.value, report=report,
                       strict_layout=strict_layout, forensic=not no_forensic, cuda_graph=cuda_graph,
                       model_retry_minutes=retry_minutes,
                       temperature=temperature, model_timeout_s=model_timeout, steps_per_turn=steps_per_turn,
                       experience=not no_experience, experience_path=experience, islands=islands,
                       builtin_seed=not no_builtin_seed)
    _start(config, run_dir or _run_dir_for(task))


def _start(config, folder: Path) -> NoReturn:  # noqa: ANN001 - a RunConfig
    """Create the run in ``folder`` and drive it to its end; an existing run there is a usage error."""
    from kernelevo.agent.runner import create, drive

    try:
        create(config, folder).close()
    except FileExistsError as exc:
        _fail(str(exc), EXIT_USAGE, False)
    raise typer.Exit(drive(folder, first=True))


def _policy_of(policy: PolicyChoice | None, model: str | None) -> str:
    """The policy ``--policy`` and ``--model`` ask for together (a model implies the LLM policy)."""
    chosen = policy.value if policy else ("llm" if model else "builtin")
    if chosen == "llm" and not model:
        _fail("--policy llm needs --model NAME (and usually --base-url URL)", EXIT_USAGE, False)
    if chosen == "builtin" and model:
        _fail("--model goes with the LLM policy, not --policy builtin", EXIT_USAGE, False)
    return chosen


def optimize_model_command(
    model_spec: Annotated[str, typer.Argument(
        metavar="MODEL", help="A KernelBench-format file whose Model is a whole network, or file.py:ClassOrFactory "
        "(then --inputs is required).")],
    inputs: Annotated[str | None, typer.Option(help="file.py:function returning the example inputs (a list).")
                      ] = None,
    init: Annotated[str | None, typer.Option(help="file.py:function returning the constructor's arguments.")
                    ] = None,
    policy: PolicyOption = None,
    model: Annotated[str | None, typer.Option(help="Model name at an OpenAI-compatible endpoint.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint.")] = None,
    api_key_env: ApiKeyEnvOption = "OPENAI_API_KEY",
    max_evals: Annotated[int, typer.Option(help="Evaluations for the whole model, split across regions by "
                                                "expected gain.", min=1)] = 24,
    max_regions: Annotated[int, typer.Option(help="Optimize at most this many regions.", min=1)] = 8,
    run_dir: Annotated[Path | None, typer.Option(help="Run folder (default: runs/<model>-<timestamp>).")] = None,
    sandbox: Annotated[SandboxChoice, typer.Option(help="Where candidates run: docker, process or auto.")
                       ] = SandboxChoice.auto,
    size: Annotated[SizeChoice | None, typer.Option(
        help="For a KernelBench file: small applies its SMALL overrides; default small without a GPU, "
             "full with one.")] = None,
    timeout: TimeoutOption = 300.0,
    memory: MemoryOption = None,
    report: Annotated[bool, typer.Option(
        "--report", help="Keep RUN_DIR/report.html (and each region's page) up to date as the run goes.")] = False,
) -> None:
    """Optimize a whole network: capture its graph, time each fusible region in context, optimize the
    hottest regions under one budget (one region per GPU at a time), reassemble, and check the result
    against the original end to end on fresh inputs.

    Regions are tasks with the real shapes and dtypes captured from a run (RUN_DIR/regions/*.py).
    Continue an interrupted run with `kernelevo resume RUN_DIR`; write the result with
    `kernelevo export RUN_DIR -o optimized.py`, then `from optimized import optimize; fast = optimize(model)`.

    Examples:
      kernelevo optimize-model tasks/examples/transformer_block.py --max-evals 12 --size small
      kernelevo optimize-model net.py:build_net --inputs net.py:example_inputs --init net.py:config
    """
    from kernelevo.agent.model.run import ModelRunConfig, ModelSpec

    path, _, attr = model_spec.partition(":")
    if not Path(path).is_file():
        _fail(f"model file not found: {path}", EXIT_USAGE, False)
    if attr and not inputs:
        _fail("a file.py:ClassOrFactory model needs --inputs file.py:function", EXIT_USAGE, False)
    chosen = policy.value if policy else ("llm" if model else "builtin")
    if chosen == "llm" and not model:
        _fail("--policy llm needs --model NAME (and usually --base-url URL)", EXIT_USAGE, False)
    _sandbox(sandbox.value, False)  # an unavailable Docker engine is exit 3 now, not in every region
    chosen_size = size.value if size else _default_size()
    config = ModelRunConfig(spec=ModelSpec(path=str(Path(path).resolve()), attr=attr or "Model", inputs=inputs,
                                           init=init, size=chosen_size),
                            policy=chosen, max_evals=max_evals, max_regions=max_regions, sandbox=sandbox.value,
                            timeout_s=timeout, memory=memory, model=model, base_url=base_url,
                            api_key_env=api_key_env, size=chosen_size, report=report)
    folder = run_dir or _run_dir_for(path)
    if folder.exists() and any(folder.iterdir()):
        _fail(f"{folder} already exists: choose another --run-dir or `kernelevo resume {folder}`", EXIT_USAGE, False)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model-config.json").write_text(config.model_dump_json(indent=1))
    raise typer.Exit(_drive_model(config, folder))


def _drive_model(config, folder: Path) -> int:  # noqa: ANN001 - a ModelRunConfig
    from kernelevo.agent.model.run import optimize_model
    from kernelevo.tasks.regions import CannotCapture

    try:
        return optimize_model(config, folder, lambda line: err.print(printable(line), highlight=False, markup=False))
    except (CannotCapture, FileNotFoundError, AttributeError, ValueError) as exc:
        _fail(str(exc), EXIT_USAGE, False)
    except KeyboardInterrupt:
        _fail(f"interrupted: continue with `kernelevo resume {folder}`", EXIT_INTERRUPTED, False)
    except Exception as exc:  # noqa: BLE001 - unplanned (a bug, a full disk): one line, the run kept to resume
        _fail(f"stopped by {keep_crash(folder, exc)}; once that is fixed, `kernelevo resume {folder}` "
              f"continues\n{hint(exc)}", exit_code_of(exc), False)
    return EXIT_USAGE


def resume_command(run_dir: Annotated[Path, typer.Argument(help="A run folder made by `kernelevo optimize`.")]) -> None:
    """Continue an interrupted run within its remaining budget."""
    from kernelevo.agent.runner import drive

    if (run_dir / "model-config.json").is_file():
        from kernelevo.agent.model.run import ModelRunConfig

        config = ModelRunConfig.model_validate_json((run_dir / "model-config.json").read_text())
        raise typer.Exit(_drive_model(config, run_dir))
    _require_run(run_dir, False)
    raise typer.Exit(drive(run_dir, first=False))


def _require_run(run_dir: Path, as_json: bool) -> None:
    if not (run_dir / "run.sqlite").is_file():
        _fail(f"{run_dir} is not a kernelevo run folder (no run.sqlite)", EXIT_USAGE, as_json)


def status_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Where a run stands: state, evaluations, the best verified candidate (for a model run: each
    region's time before and after, the end-to-end check and speedup, what was left alone and why)."""
    from kernelevo.agent.report.summary import status
    from kernelevo.agent.store import RunStore

    if (run_dir / "model-config.json").is_file():
        _model_status(run_dir, as_json)
        return
    _require_run(run_dir, as_json)
    store = RunStore(run_dir)
    info = status(store, judge_times=True)
    store.close()
    if as_json:
        print(json.dumps(info))
        return
    out.print(f"[bold]{plain(info['task'])}[/bold] ({info['size']}), {info['policy']} policy: {info['state']}"
              + (f" ({plain(info['reason'])})" if info["reason"] else ""), highlight=False)
    out.print(f"evaluations {info['evaluations']}/{info['max_evals'] or '-'}, correct {info['correct']}",
              highlight=False)
    if info.get("model"):
        usage = info["model"]
        out.print(f"model: {usage['requests']} requests, {usage['tokens']} tokens "
                  f"({usage['requests_per_evaluation']} requests, {usage['tokens_per_evaluation']} tokens per "
                  "evaluation)", highlight=False)
    spent = info["judge_time"]
    if spent and spent["verdicts"]:
        largest = ", ".join(f"{plain(k)} {v:.0f} s" for k, v in list(spent["phases_s"].items())[:4])
        out.print(f"judge: {spent['verdicts']} verdicts, {spent['wall_s']:.0f} s ({largest})", highlight=False)
    best = info["best"]
    if best:
        speed = f", {best['speedup']:.2f}x over eager" if best.get("speedup") else ""
        tag = "verified with fresh seeds" if best["verified"] else "not yet re-judged"
        out.print(f"best {best['candidate'][:10]}: {best['runtime_ms']:.4g} ms{speed} ({tag})", highlight=False,
                  markup=False)
        if best.get("note"):
            out.print(f"[dim]{plain(best['note'])}[/dim]", highlight=False)
        if best.get("diagnosis"):
            out.print(printable(f"diagnosis: {best['diagnosis']}"), highlight=False, markup=False)
    table = Table()
    for column in ("id", "gen", "strategy", "parent", "result"):
        table.add_column(column)
    for c in info["candidates"]:
        result = "pending" if c["correct"] is None else (f"{c['runtime_ms']:.4g} ms" if c["correct"] else "rejected")
        table.add_row(c["id"][:10], str(c["generation"]), plain(c["strategy"]), (c["parent"] or "")[:10], result)
    out.print(table)


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (finished, running or interrupted).")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write the page "
                                                "(default: RUN_DIR/report.html).")] = None,
) -> None:
    """Write the run as one self-contained HTML page: summary, speed over the run, lineage tree,
    strategies, a sortable table of candidates, and per candidate its diff against its parent, every
    harness check, its timings, its profile diagnosis and the trace that produced it.

    The page needs no network (styles and scripts are inline); open it in any browser. On a run that
    is still going, run it again (or start the run with `optimize --report`) to refresh.

    Examples:
      kernelevo report runs/softmax-20261129-221500
      kernelevo report runs/night1 -o night1.html
    """
    from kernelevo.agent.report.html import write_model_report, write_report

    model_run = (run_dir / "model-config.json").is_file()
    if not model_run:
        _require_run(run_dir, False)
    if output is not None and output.is_dir():
        output = output / "report.html"
    try:
        path = write_model_report(run_dir, output) if model_run else write_report(run_dir, output)
    except OSError as exc:  # FileNotFoundError included: a model run that has not captured its model yet
        _fail(f"cannot write the report: {exc}", EXIT_USAGE, False)
    out.print(f"wrote {path}", highlight=False, markup=False)


def _model_status(run_dir: Path, as_json: bool) -> None:
    from kernelevo.agent.model.run import load_state

    state = load_state(run_dir)
    if state is None:
        _fail(f"{run_dir} has not captured its model yet (no model.json)", EXIT_USAGE, as_json)
    if as_json:
        print(json.dumps(state))
        return
    e2e = state.get("end_to_end") or {}
    out.print(f"[bold]{plain(state['config']['spec']['path'])}[/bold] on {state['device']}: {state['state']}; "
              "model time "
              f"{state['total_ms']:.4g} ms in context", highlight=False)
    table = Table()
    for column in ("region", "kind", "share", "before ms", "after ms", "evals", "state", "why"):
        table.add_column(column, no_wrap=column in ("region", "state"), overflow="fold")
    for r in state["regions"]:
        table.add_row(plain(r["name"]), r["kind"], f"{100 * (r['share'] or 0):.0f}%",
                      f"{r['before_ms']:.4g}" if r["before_ms"] is not None else "",
                      f"{r['after_ms']:.4g}" if r.get("after_ms") is not None else "", str(r["evals"]), r["state"],
                      plain(r.get("reason") or ""))
    out.print(table)
    if e2e:
        if e2e.get("correct") and e2e.get("max_abs_error") is None:  # nothing replaced: nothing to compare
            out.print(printable(f"end to end: {e2e.get('note') or 'unchanged'}"), highlight=False, markup=False)
        elif e2e.get("correct"):
            speed = (f"{e2e['optimized_ms']:.4g} ms vs eager {e2e['eager_ms']:.4g} ms ({e2e['speedup']:.2f}x)"
                     if e2e.get("speedup") else "CPU interpreter: no speedup measured")
            if e2e.get("vs_compile"):
                speed += f", {e2e['vs_compile']:.2f}x over torch.compile"
            out.print(f"end to end: matches the original (max error {e2e['max_abs_error']:.3g}); {speed}",
                      highlight=False, markup=False)
        else:
            out.print(printable(f"end to end: FAILED: {e2e.get('reason')}"), highlight=False, markup=False)


def trace_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line, each with a `type`.")] = False,
    candidate: Annotated[str | None, typer.Option(help="Follow one candidate's lineage (an id or its prefix).")] = None,
) -> None:
    """The run's reasoning trace: proposals and why, verdicts, selections, as a timeline. For a model
    run, each region's trace in turn (RUN_DIR/regions/NAME is a run folder of its own)."""
    from kernelevo.agent.report.summary import describe, format_time, timeline
    from kernelevo.agent.store import RunStore

    if (run_dir / "model-config.json").is_file() and not (run_dir / "run.sqlite").exists():
        regions = sorted(p.parent for p in (run_dir / "regions").glob("*/run.sqlite"))
        if not regions:
            _fail(f"{run_dir}: no region has been optimized yet", EXIT_USAGE, as_json)
        for region in regions:
            if as_json:  # one stream: each event says which region it belongs to
                store = RunStore(region)
                for event in store.events():
                    print(json.dumps({**event, "region": region.name}))
                store.close()
                continue
            out.print(printable(f"== region {region.name} =="), highlight=False, markup=False)
            trace_command(region, as_json=False, candidate=candidate)
        return
    _require_run(run_dir, as_json)
    store = RunStore(run_dir)
    try:
        events = timeline(store, candidate)
    except KeyError:
        store.close()
        _fail(f"no candidate {candidate} in {run_dir}", EXIT_USAGE, as_json)
    store.close()
    generation = None
    for event in events:
        if as_json:
            print(json.dumps(event))
            continue
        if event.get("action") == "propose" and event.get("generation") != generation:
            generation = event.get("generation")
            out.print(f"-- generation {generation} --", highlight=False, markup=False)
        out.print(printable(f"{format_time(event['ts'])}  {describe(event)}"), highlight=False, soft_wrap=True,
                  markup=False)


def export_command(
    run_dir: Annotated[Path, typer.Argument(help="A finished run folder.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the candidate file.")],
    keep_slower: Annotated[bool, typer.Option(
        "--keep-slower", help="Model runs: export the kernels even when the model ran slower end to end.")] = False,
) -> None:
    """Write the best verified candidate as a standalone file that `kernelevo eval` accepts; for a
    model run (`optimize-model`), a module with `optimize(model)` that puts the verified kernels into
    the network: `from optimized import optimize; fast = optimize(model)`."""
    from kernelevo.agent.store import RunStore

    if (run_dir / "model-config.json").is_file():
        from kernelevo.agent.model.export import export

        try:
            count = export(run_dir, output, keep_slower=keep_slower)
        except (OSError, ValueError) as exc:
            _fail(f"cannot export {run_dir}: {exc}", EXIT_USAGE, False)
        err.print(f"wrote {output} ({count} verified kernel(s))", highlight=False)
        raise typer.Exit(EXIT_OK if count else EXIT_REJECTED)
    _require_run(run_dir, False)
    store = RunStore(run_dir)
    best = store.meta("best")
    if not best:
        store.close()
        _fail(f"{run_dir} has no verified best candidate (state: {store.state()})", EXIT_REJECTED, False)
    source = store.source_path(best["id"]).read_text()
    store.close()
    output.write_text(source)
    err.print(f"wrote {output} (candidate {best['id'][:10]}, {best['runtime_ms']:.4g} ms)")
