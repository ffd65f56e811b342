"""The run report: one self-contained HTML page built from a run folder (``kernelevo report``).

``report_data`` gathers what the page shows from the run store (pure reading, no I/O beyond the
store); ``render`` embeds it in the page (``page.html``: inline styles and scripts, no network).
Candidate sources go in separate inline JSON blocks that the page parses only when a candidate is
opened, so a run of thousands of candidates stays quick to load. Works on a finished, running or
interrupted run: it reads what the store holds at that moment.
"""

from __future__ import annotations

import html
import json
import os
import time
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

from kernelevo.agent.report.summary import describe, status
from kernelevo.agent.store import RunStore

SOURCE_LIMIT = 200_000
"""Characters of one candidate's source kept in the page (a runaway file is cut, and says so)."""


def _short(text: Any, limit: int = 4000) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"


def _verdict_fields(verdict: Any) -> dict[str, Any]:
    if verdict is None:
        return {}
    return {
        "correct": verdict.correct, "reason": verdict.reason, "runtime_ms": verdict.runtime_ms,
        "eager_ms": verdict.reference_runtime_ms, "compile_ms": verdict.compile_runtime_ms,
        "speedup": verdict.speedup, "vs_compile": verdict.speedup_vs_compile, "timing": verdict.timing,
        "roofline": verdict.roofline_fraction, "bound": verdict.bound, "gbps": verdict.achieved_gbps,
        "tflops": verdict.achieved_tflops, "noise_pct": verdict.noise_pct, "diagnosis": verdict.diagnosis,
        "device": verdict.device, "wall_s": verdict.wall_s,
        "checks": [{"name": c.name, "passed": c.passed, "detail": _short(c.detail, 1500)} for c in verdict.checks],
    }


def _strategies(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per strategy: tried, judged, correct, success rate, best speedup (or best time)."""
    table: dict[str, dict[str, Any]] = defaultdict(lambda: {"tried": 0, "judged": 0, "correct": 0,
                                                           "best_speedup": None, "best_ms": None})
    for c in candidates:
        row = table[c["strategy"]]
        row["tried"] += 1
        if c.get("correct") is None:
            continue
        row["judged"] += 1
        if c["correct"]:
            row["correct"] += 1
            if c.get("speedup") is not None:
                row["best_speedup"] = max(row["best_speedup"] or 0.0, c["speedup"])
            if c.get("runtime_ms") is not None:
                row["best_ms"] = min(row["best_ms"] or float("inf"), c["runtime_ms"])
    result = []
    for name, row in table.items():
        row["success_rate"] = row["correct"] / row["judged"] if row["judged"] else None
        result.append({"strategy": name, **row})
    return sorted(result, key=lambda r: (-(r["best_speedup"] or 0), r["best_ms"] or float("inf"), r["strategy"]))


def report_data(store: RunStore) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data."""
    info = status(store)
    config = store.meta("config", {}) or {}
    events = store.events()
    verdict_time = {e["candidate"]: e["ts"] for e in events if e["type"] == "verdict" and e.get("kind") == "search"}
    created = store.meta("created")
    started = events[0]["ts"] if events else None
    candidates = []
    for order, row in enumerate(store.candidates()):
        cid = row["id"]
        search = store.evaluation(cid)
        final = store.evaluation(cid, "final")
        info_row = store.candidate(cid) or {}
        try:
            note = json.loads(info_row.get("note") or "{}")
        except ValueError:
            note = {}
        profile = store.meta(f"profile:{cid}")
        candidates.append({
            "id": cid, "order": order, "parent": row["parent"], "strategy": row["strategy"],
            "generation": row["generation"], "why": _short(note.get("why"), 600), "params": note.get("params"),
            "judged_at": verdict_time.get(cid), "search": _verdict_fields(search), "final": _verdict_fields(final),
            "correct": row["correct"], "runtime_ms": row["runtime_ms"], "speedup": row["speedup"],
            "profile": None if not profile else {"diagnosis": profile.get("diagnosis"),
                                                 "kernels": profile.get("kernels", [])[:6],
                                                 "unavailable": profile.get("unavailable", {})},
        })
    spent_tokens = (int(store.meta("tokens_in", 0) or 0), int(store.meta("tokens_out", 0) or 0))
    budget = config.get("budget") or {}
    cost = (spent_tokens[0] * (budget.get("price_in") or 0) + spent_tokens[1] * (budget.get("price_out") or 0)) / 1e6
    best = info["best"]
    best_final = None
    if best:
        verdict = store.evaluation(best["candidate"], "final") or store.evaluation(best["candidate"])
        best_final = _verdict_fields(verdict)
    trace = [{"seq": e["seq"], "ts": e["ts"], "type": e["type"], "candidate": e.get("candidate"),
              "text": _short(_event_text(e), 3000)} for e in events]
    return {
        "generated_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "run": str(store.dir), "kind": "task", "task": info["task"], "size": info["size"], "policy": info["policy"],
        "model": config.get("model"), "state": info["state"], "state_reason": info["reason"],
        "created": created, "started_ts": started, "elapsed_s": info["elapsed_s"],
        "evaluations": info["evaluations"], "max_evals": info["max_evals"], "correct": info["correct"],
        "budget": budget, "tokens_in": spent_tokens[0], "tokens_out": spent_tokens[1], "cost_usd": cost,
        "device": next((c["search"].get("device") for c in candidates if c["search"].get("device")), None),
        "best": best, "best_verdict": best_final, "candidates": candidates,
        "strategies": _strategies(candidates), "trace": trace,
        "notes": store.meta("notes", []) or [],
    }


def _event_text(event: dict[str, Any]) -> str:
    kind = event["type"]
    if kind == "model_response":
        calls = ", ".join(c.get("name", "?") if isinstance(c, dict) else str(c) for c in event.get("tool_calls") or [])
        thinking = f"thinking: {event['reasoning']}\n" if event.get("reasoning") else ""
        return (f"{thinking}model: {event.get('content') or ''}" + (f" [calls: {calls}]" if calls else "")).strip()
    if kind == "tool_call":
        return f"tool {event.get('name')}({_short(event.get('args'), 1500)})"
    if kind == "tool_result":
        return f"{event.get('name')} -> {_short(event.get('result'), 2000)}"
    if kind == "model_request":
        return f"request to the model (generation {event.get('generation')}, step {event.get('step')})"
    return describe(event)


def sources(store: RunStore, data: dict[str, Any]) -> dict[str, str]:
    """Each candidate's source, for the page's on-demand blocks."""
    found = {}
    for c in data["candidates"]:
        path = store.source_path(c["id"])
        try:
            text = path.read_text(errors="replace")
        except OSError:
            text = "(source file missing)"
        if len(text) > SOURCE_LIMIT:
            text = text[:SOURCE_LIMIT] + f"\n# ... cut at {SOURCE_LIMIT} characters for the report"
        found[c["id"]] = text
    return found


def _json_for_script(value: Any) -> str:
    # Inside <script>, "</script" would end the block and "<!--" changes how it is parsed: no "<"
    # (nor ">" or "&") reaches the page raw. They only occur inside JSON strings, where \u003c is valid.
    return (json.dumps(value, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))


def render(data: dict[str, Any], source_map: dict[str, str]) -> str:
    """The whole page as one string."""
    page = resources.files(__package__).joinpath("page.html").read_text()
    blocks = "\n".join(f'<script type="application/json" class="src" data-id="{html.escape(cid)}">'
                       f"{_json_for_script(text)}</script>" for cid, text in source_map.items())
    title = f"kernelevo: {data.get('task') or 'run'} ({data.get('state')})"
    return (page.replace("__TITLE__", html.escape(title))
            .replace("__DATA__", _json_for_script(data))
            .replace("__SOURCES__", blocks))


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """Build the report of ``run_dir`` and write it atomically (default: RUN_DIR/report.html)."""
    store = RunStore(run_dir)
    try:
        data = report_data(store)
        page = render(data, sources(store, data))
    finally:
        store.close()
    target = out or (run_dir / "report.html")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(page)
    tmp.replace(target)  # a browser reloading it never sees half a page
    return target


MODEL_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }}
header {{ background: #1d2330; color: #fff; padding: 12px 24px; }} header h1 {{ font-size: 18px; margin: 0; }}
main {{ padding: 16px 24px; max-width: 1400px; }}
section {{ background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 12px 16px; margin-bottom: 16px; }}
table {{ border-collapse: collapse; width: 100%; font-size: 13px; }}
th, td {{ text-align: left; padding: 3px 8px; border-bottom: 1px solid #eef0f4; vertical-align: top; }}
.ok {{ color: #1f7a3a; }} .bad {{ color: #b42323; }} .muted {{ color: #778; }}
.bar {{ background: #3b6fd6; height: 10px; display: inline-block; }}
</style></head>
<body><header><h1>{title}</h1><div class="muted">{subtitle}</div></header><main>
<section id="end-to-end"><h2>End to end</h2>{e2e}</section>
<section id="regions"><h2>Regions</h2><table id="region-table">
<tr><th>region</th><th>kind</th><th>nodes</th><th>share of time</th><th>before ms</th><th>after ms</th>
<th>evaluations</th><th>state</th><th>why</th><th>run</th></tr>
{rows}
</table><p class="muted">Times are measured in context (one forward of the whole network, each region timed
where it runs).{cpu_note}</p></section>
</main></body></html>
"""


def write_model_report(run_dir: Path, out: Path | None = None) -> Path:
    """The report of a whole-model run: end-to-end result, each region's time before and after, what
    was left alone and why, and a link to each optimized region's own report (written alongside)."""
    from kernelevo.agent.model.run import load_state

    state = load_state(run_dir)
    if state is None:
        raise FileNotFoundError(f"{run_dir} has not captured its model yet (no model.json)")
    rows = []
    for r in state["regions"]:
        link = ""
        if r.get("run_dir") and (Path(r["run_dir"]) / "run.sqlite").exists():
            page = write_report(Path(r["run_dir"]))
            link = f'<a href="{html.escape(str(page.relative_to(run_dir)))}">report</a>'
        share = r.get("share") or 0.0
        cls = {"optimized": "ok", "failed": "bad"}.get(r["state"], "muted")
        fmt = (lambda v: "" if v is None else f"{v:.4g}")  # noqa: E731
        rows.append(f'<tr class="region" data-name="{html.escape(r["name"])}"><td>{html.escape(r["name"])}</td>'
                    f'<td>{html.escape(r["kind"])}</td><td>{html.escape(", ".join(r["nodes"]))}</td>'
                    f'<td><span class="bar" style="width:{int(200 * share)}px"></span> {100 * share:.0f}%</td>'
                    f'<td>{fmt(r.get("before_ms"))}</td><td>{fmt(r.get("after_ms"))}</td><td>{r["evals"]}</td>'
                    f'<td class="{cls}">{html.escape(r["state"])}</td><td>{html.escape(r.get("reason") or "")}</td>'
                    f"<td>{link}</td></tr>")
    e2e = state.get("end_to_end") or {}
    if not e2e:
        e2e_html = '<p class="muted">not checked yet (the run has not finished)</p>'
    elif e2e.get("correct"):
        speed = (f"{e2e['optimized_ms']:.4g} ms against eager {e2e['eager_ms']:.4g} ms: "
                 f"<b>{e2e['speedup']:.2f}x</b>" if e2e.get("speedup") else "CPU interpreter: no speedup measured")
        if e2e.get("vs_compile"):
            speed += f"; {e2e['vs_compile']:.2f}x against torch.compile ({e2e['compile_ms']:.4g} ms)"
        e2e_html = (f'<p class="ok">matches the original on fresh inputs (max error {e2e["max_abs_error"]:.3g}), '
                    f'{e2e["regions_replaced"]} regions replaced</p><p>{speed}</p>')
    else:
        e2e_html = f'<p class="bad">{html.escape(str(e2e.get("reason")))}</p>'
    spec = state["config"]["spec"]
    page = MODEL_PAGE.format(
        title=html.escape(f"kernelevo: {Path(spec['path']).name} ({state['state']})"),
        subtitle=html.escape(f"run {run_dir} · device {state['device']} · model time {state['total_ms']:.4g} ms "
                             f"in context · {state['config']['max_evals']} evaluations · "
                             f"{state['config']['policy']} policy"),
        e2e=e2e_html, rows="\n".join(rows),
        cpu_note=" On the CPU these are interpreter times: they rank nothing." if state["device"] != "cuda" else "")
    target = out or (run_dir / "report.html")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(page)
    tmp.replace(target)
    return target
