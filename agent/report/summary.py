"""Reading a run back: its status as one object, and its trace as a readable timeline."""

from __future__ import annotations

import json
import time
from typing import Any

from kernelevo.agent.store import RunStore
from kernelevo.sandbox.judge.timing import tie_note


def status(store: RunStore, judge_times: bool = False) -> dict[str, Any]:
    """The ``kernelevo status --json`` object (``judge_times``: with :func:`judge_time`, which reads
    every verdict; the page that refreshes while a run goes on leaves it out)."""
    candidates = store.candidates()
    best = store.meta("best")
    timing = None
    if best is None and store.meta("state") != "finished":
        correct = [c for c in candidates if c["correct"] and c["runtime_ms"] is not None]
        if correct:
            top = min(correct, key=lambda c: c["runtime_ms"])
            verdict = store.evaluation(top["id"])
            timing = verdict.timing if verdict else None
            best = {"id": top["id"], "runtime_ms": top["runtime_ms"], "speedup": top["speedup"], "timing": timing,
                    "verified": False}
    elif best is not None:
        best = dict(best, verified=True)
    config = store.meta("config", {})
    diagnosis = None
    if best is not None:
        kept = store.meta(f"profile:{best['id']}")
        verdict = store.evaluation(best["id"], "final") or store.evaluation(best["id"])
        diagnosis = (kept or {}).get("diagnosis") or (verdict.diagnosis if verdict else None)
    return {
        "state": store.state(),
        "reason": store.meta("state_reason"),
        "task": config.get("task"),
        "size": config.get("size"),
        "policy": config.get("policy"),
        "evaluations": store.count_evaluations("search"),
        "max_evals": (config.get("budget") or {}).get("max_evals"),
        "correct": sum(1 for c in candidates if c["correct"]),
        "best": None if best is None else {
            "candidate": best["id"], "runtime_ms": best["runtime_ms"], "speedup": best.get("speedup"),
            "timing": best.get("timing"), "verified": best.get("verified", False), "diagnosis": diagnosis,
            "note": "CPU interpreter time: chosen by it, never called a speedup"
            if best.get("timing") == "cpu-interpreter" else tie_note(best.get("speedup"))},
        "elapsed_s": store.meta("elapsed_s"),
        "model": model_usage(store),
        "judge_time": judge_time(store) if judge_times else None,
        "candidates": [{"id": c["id"], "correct": c["correct"], "runtime_ms": c["runtime_ms"], "parent": c["parent"],
                        "strategy": c["strategy"], "generation": c["generation"]} for c in candidates],
    }


def judge_time(store: RunStore) -> dict[str, Any]:
    """Where the judge's time went: the verdicts (search and final re-judges), their wall time, and each
    phase's seconds summed over them, largest first. Phases nest (``session`` holds the session's own
    phases, ``forensic pass`` the ``forensic: ...`` ones), so they are not a partition of the wall time;
    the forensic sessions' own totals are left out (``forensic pass`` holds them and ncu's start)."""
    verdicts = [v for c in store.candidates() for kind in ("search", "final")
                if (v := store.evaluation(c["id"], kind)) is not None]
    phases: dict[str, float] = {}
    for verdict in verdicts:
        for phase, seconds in verdict.phases.items():
            if phase.endswith(": total"):
                continue
            name = "session" if phase == "total" else phase
            phases[name] = phases.get(name, 0.0) + seconds
    return {"verdicts": len(verdicts), "wall_s": round(sum(v.wall_s or 0.0 for v in verdicts), 1),
            "phases_s": {k: round(v, 1) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}}


def model_usage(store: RunStore) -> dict[str, Any] | None:
    """Requests and tokens the model took, in all and per evaluation (None for a run without a model)."""
    requests = sum(1 for e in store.events() if e["type"] == "model_request")
    if not requests:
        return None
    tokens = int(store.meta("tokens_in", 0)) + int(store.meta("tokens_out", 0))
    judged = max(store.count_evaluations("search"), 1)
    return {"requests": requests, "tokens": tokens, "requests_per_evaluation": round(requests / judged, 2),
            "tokens_per_evaluation": round(tokens / judged)}


def lineage(store: RunStore, cid: str) -> list[str]:
    """``cid`` and its ancestors, oldest first."""
    chain = []
    seen = set()
    current: str | None = cid
    while current and current not in seen:
        seen.add(current)
        chain.append(current)
        row = store.candidate(current)
        current = row["parent"] if row else None
    return list(reversed(chain))


def describe(event: dict[str, Any]) -> str:
    """One trace event in words."""
    kind, cid = event["type"], (event.get("candidate") or "")[:10]
    if kind == "decision":
        action = event.get("action")
        if action == "propose":
            parent = f" from {event['parent'][:10]}" if event.get("parent") else ""
            params = ", ".join(f"{k}={v}" for k, v in (event.get("params") or {}).items())
            return f"propose {cid} [{event.get('strategy')}: {params}]{parent}: {event.get('why')}"
        if action in ("start", "resume"):
            return f"{action}: {event.get('policy')} policy on {event.get('family')}"
        return f"{action} {cid}: {event.get('reason', '')}".replace("  ", " ").strip()
    if kind == "verdict":
        label = "final verdict" if event.get("kind") == "final" else "verdict"
        if event.get("correct"):
            speed = f", {event['speedup']:.2f}x over eager" if event.get("speedup") else ""
            if event.get("vs_compile"):
                speed += f", {event['vs_compile']:.2f}x over torch.compile"
            if event.get("roofline"):
                ceiling = {"memory": "copy bandwidth", "compute": "matmul peak"}.get(event.get("bound") or "",
                                                                                   "roofline")
                speed += f", {event['roofline']:.0%} of the {ceiling}"
            note = " (CPU interpreter time)" if event.get("timing") == "cpu-interpreter" else ""
            return f"{label} {cid}: correct, {event['runtime_ms']:.4g} ms{speed}{note}"
        return f"{label} {cid}: rejected: {event.get('reason')}"
    if kind == "profile":
        if event.get("error"):
            return f"profile {cid}: failed: {event['error']}"
        missing = "; ".join(f"{k} not available ({v})" for k, v in (event.get("unavailable") or {}).items())
        return f"profile {cid}: {event.get('diagnosis')}" + (f" [{missing}]" if missing else "")
    if kind == "tool_call":
        return describe_tool_call(event)
    if kind == "model_response":
        calls = ", ".join(str(c.get("name")) for c in event.get("tool_calls") or [])
        parts = [f"model_response (generation {event.get('generation')}, step {event.get('step')})"]
        if event.get("reasoning"):
            parts.append(f"reasoning: {event['reasoning']}")
        if event.get("content"):
            parts.append(f"says: {event['content']}")
        if calls:
            parts.append(f"calls: {calls}")  # each call follows as a tool_call, its code printed as code
        return "; ".join(parts)
    if kind == "model_request":
        stored = f", stored as {event['request'][:12]} (kernelevo request)" if event.get("request") else ""
        return (f"model_request (generation {event.get('generation')}, step {event.get('step')}): "
                f"{event.get('messages')} messages{stored}")
    return f"{kind} {cid}: " + ", ".join(f"{k}={v}" for k, v in event.items()
                                          if k not in ("seq", "ts", "type", "candidate"))


CODE_ARGUMENTS = ("source", "edits")
"""Tool arguments that hold code: printed as code under the call, not inside a dict."""


def describe_tool_call(event: dict[str, Any]) -> str:
    """A tool call in words; a kernel's source or a diff is printed below it as code, indented."""
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    cid = (event.get("candidate") or "")[:10]
    plain = ", ".join(f"{k}={v}" for k, v in args.items() if k not in CODE_ARGUMENTS)
    line = f"tool_call {event.get('name')}" + (f" {cid}" if cid else "") + (f" ({plain})" if plain else "")
    for key in CODE_ARGUMENTS:
        if isinstance(args.get(key), str):
            line += f"\n    {key}:\n" + "\n".join("      " + text for text in args[key].splitlines())
    return line


def timeline(store: RunStore, candidate: str | None = None) -> list[dict[str, Any]]:
    """The trace's events, all or those of one candidate's lineage."""
    events = store.events()
    if candidate:
        matches = [c["id"] for c in store.candidates() if c["id"].startswith(candidate)]
        if not matches:
            raise KeyError(candidate)
        chain = set(lineage(store, matches[0]))
        events = [e for e in events if e.get("candidate") in chain]
    return events


def format_time(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def request_text(body: dict[str, Any]) -> str:
    """A request as a person reads it: its parameters, its tools by name, then each message with its
    role, its text and its tool calls (code arguments as code)."""
    params = ", ".join(f"{k}={v}" for k, v in body.items() if k not in ("messages", "tools"))
    tools = ", ".join(t.get("function", {}).get("name", "?") for t in body.get("tools") or [])
    lines = [f"parameters: {params}", f"tools: {tools or 'none'}"]
    for k, message in enumerate(body.get("messages") or []):
        extra = f" (answers {message['tool_call_id']})" if message.get("tool_call_id") else ""
        lines.append(f"--- message {k + 1}: {message.get('role')}{extra} ---")
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in content)
        if content:
            lines.append(str(content))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                args = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {"arguments": function.get("arguments")}
            lines.append(describe_tool_call({"name": function.get("name"), "args": args}))
    return "\n".join(lines)
