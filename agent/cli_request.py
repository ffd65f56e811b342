"""``kernelevo request``: the requests a run sent to its model, rebuilt in full from the run folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kernelevo.agent.cli_output import EXIT_USAGE, err, fail, out, printable


def _fail(message: str, as_json: bool) -> None:
    fail(message, EXIT_USAGE, as_json)


def request_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder of the LLM policy.")],
    number: Annotated[int | None, typer.Argument(help="Which request, 1 for the first; none for the list.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The request's exact body (or the list) as JSON.")] = False,
) -> None:
    """The requests sent to the model, each rebuilt in full from the run folder: the system prompt,
    the tools' schemas, the parameters and every message, exactly as sent (each part is stored once,
    by its content hash, under RUN_DIR/requests)."""
    from kernelevo.agent.report.summary import request_text
    from kernelevo.agent.request_log import load_request
    from kernelevo.agent.store import RunStore

    if not (run_dir / "run.sqlite").is_file():
        _fail(f"{run_dir} is not a kernelevo run folder (no run.sqlite)", as_json)
    store = RunStore(run_dir)
    sent = [e for e in store.events() if e["type"] == "model_request" and e.get("request")]
    store.close()
    if number is None:
        rows = [{"number": k + 1, "generation": e.get("generation"), "step": e.get("step"),
                 "messages": e.get("messages"), "request": e["request"]} for k, e in enumerate(sent)]
        for row in rows:
            if as_json:
                print(json.dumps(row))
                continue
            out.print(f"{row['number']:>4}  generation {row['generation']}, step {row['step']}: {row['messages']} "
                      f"messages  {row['request'][:12]}", highlight=False, markup=False)
        if not rows and not as_json:
            err.print("no model requests are stored in this run", highlight=False)
        return
    if not 1 <= number <= len(sent):
        _fail(f"{run_dir} has {len(sent)} stored request(s); there is no request {number}", as_json)
    try:
        body = load_request(run_dir, sent[number - 1]["request"])
    except (KeyError, OSError, ValueError) as exc:
        _fail(f"request {number} cannot be rebuilt: {exc}", as_json)
    if as_json:
        print(json.dumps(body, indent=2))
    else:
        out.print(printable(request_text(body)), highlight=False, markup=False, soft_wrap=True)
