"""The run report: one self-contained HTML page built from a run folder (``kernelevo report``).

``report_data`` gathers what the page shows from the run store (pure reading, no I/O beyond the
store); ``render`` embeds it in the page (``report_page.html``: inline styles and scripts, no network).
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

from kernelevo.agent.report import describe, status
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
    page = resources.files(__package__).joinpath("report_page.html").read_text()
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
