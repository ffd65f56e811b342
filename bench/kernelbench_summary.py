"""The summary and table of a KernelBench sweep's rows (``bench/kernelbench.py``): KernelBench's fast_p
and geometric means, the figures the judge's margins are set from, and what a row's failure says."""

from __future__ import annotations

import math
from typing import Any

FAST_P = (0.0, 1.0, 1.5, 2.0)


def past_limit(row: dict[str, Any]) -> bool:
    """A harness row: the bench's own time limit ran out before a verdict."""
    return bool(row.get("harness")) and "took over" in str(row.get("reason"))


def timed_out(row: dict[str, Any]) -> bool:
    """A rejection for the judge's own time limit, which a crowded GPU can cause as the bench's can."""
    return not row.get("correct") and "timed out after" in str(row.get("reason"))


def summary(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """KernelBench's fast_p and geometric means, over what the file holds."""
    rows = list(results.values())
    out: dict[str, Any] = {"problems": len(rows), "covered": sum(1 for r in rows if r.get("covered", r.get("correct")))}
    timed = rows if rows and all("correct" in r for r in rows) else []  # a failed run counts as not fast
    if timed:
        out["correct"] = sum(1 for r in timed if r.get("correct"))
        # a lean row has no torch.compile time: the compile columns are over the rows that have one
        compiled = [r for r in timed if not r.get("lean")]
        if len(compiled) < len(timed):
            out["lean"] = len(timed) - len(compiled)
        unforensic = sum(1 for r in timed if r.get("lean") or r.get("no_forensic"))
        if unforensic:  # verified, timed, but without the forensic pass's trace of their kernels
            out["without_forensic_pass"] = unforensic
        for base, field, over in (("eager", "speedup", timed), ("compile", "speedup_vs_compile", compiled)):
            for p in FAST_P:
                fast = sum(1 for r in over if r.get("correct") and (r.get(field) or 0) > p)
                out[f"fast_{p:g}_{base}"] = fast / len(over) if over else None
            ups = [r[field] for r in over if r.get("correct") and r.get(field)]
            out[f"geomean_{base}"] = math.exp(sum(math.log(u) for u in ups) / len(ups)) if ups else None
        # Rows the pass rejected count too: every seed is the strategist's, honest, so how far below its
        # traced kernels a timed median falls is the room the forensic margin must leave.
        ratios = sorted(r["runtime_ms"] / r["forensic"]["per_call_ms"] for r in timed
                        if r.get("runtime_ms") and (r.get("forensic") or {}).get("per_call_ms"))
        if ratios:
            out["timed_over_traced"] = {"rows": len(ratios), "min": round(ratios[0], 3),
                                        "p10": round(ratios[len(ratios) // 10], 3),
                                        "median": round(ratios[len(ratios) // 2], 3)}
        if room := clock_room(timed):
            out["clock_room"] = room
    return out


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| problem | covered / correct | plan or reason | x eager | x compile |", "|---|---|---|---|---|"]
    for name, r in results.items():
        ok = r.get("correct", r.get("covered"))
        what = r.get("plan") or r.get("reason") or ""
        up = f"{r['speedup']:.2f}" if r.get("speedup") else ""
        vc = f"{r['speedup_vs_compile']:.2f}" if r.get("speedup_vs_compile") else ""
        lines.append(f"| {name} | {'yes' if ok else 'no'} | {str(what)[:120]} | {up} | {vc} |")
    return "\n".join(lines)


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"rows": len(ordered), "min": round(ordered[0], 3), "p10": round(ordered[len(ordered) // 10], 3),
            "median": round(ordered[len(ordered) // 2], 3), "p90": round(ordered[(9 * len(ordered)) // 10], 3),
            "max": round(ordered[-1], 3)}


def clock_room(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How much of the judge's clock allowance honest seeds used: the wall time per call each left
    unexplained beyond the reference's (ms), and as a share of its allowance. Every seed is the
    strategist's, honest, so the largest is the room a tighter allowance must leave."""
    kept = [r["clock"] for r in rows if (r.get("clock") or {}).get("allowed_ms")]
    # a round the check doubted and timed again is an honest seed's outlier: the room must cover it too
    figures = kept + [f["first_round"] for f in kept if (f.get("first_round") or {}).get("allowed_ms")]
    if not figures:
        return None
    return {"unexplained_ms": _quantiles([f["unexplained_ms"] for f in figures]),
            "share_of_allowance": _quantiles([f["unexplained_ms"] / f["allowed_ms"] for f in figures]),
            "retried": len(figures) - len(kept)}
