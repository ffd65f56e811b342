"""What share of each verdict in a finished run the forensic pass took.

The forensic pass (ncu tracing the candidate's calls from outside its process) is the judge's most
expensive phase. A search traces only the verdicts that could be handed back, so its cost per verdict
is the question, not its cost per traced verdict. This reads a run folder and prints, per verdict,
its wall time, the forensic pass's seconds and their share, then the totals.

    python3 bench/forensic_share.py RUN_DIR [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernelevo.agent.store import RunStore  # noqa: E402
from kernelevo.sandbox.judge.forensic import PHASE as FORENSIC  # noqa: E402


def rows(store: RunStore) -> list[dict]:
    """One row per recorded verdict, search verdicts first, in the order the candidates were made."""
    out = []
    for kind in ("search", "final"):
        for cand in store.candidates():
            verdict = store.evaluation(cand["id"], kind)
            if verdict is None:
                continue
            wall = verdict.wall_s or 0.0
            forensic = verdict.phases.get(FORENSIC, 0.0)
            out.append({"candidate": cand["id"], "kind": kind, "correct": verdict.correct,
                        "runtime_ms": verdict.runtime_ms, "wall_s": round(wall, 2),
                        "forensic_s": round(forensic, 2),
                        "share": round(forensic / wall, 3) if wall else None,
                        "traced": bool(verdict.forensic)})
    return out


def totals(table: list[dict]) -> dict:
    wall = sum(r["wall_s"] for r in table)
    forensic = sum(r["forensic_s"] for r in table)
    search = [r for r in table if r["kind"] == "search"]
    return {"verdicts": len(table), "search_verdicts": len(search),
            "traced_search_verdicts": sum(r["traced"] for r in search),
            "wall_s": round(wall, 1), "forensic_s": round(forensic, 1),
            "share": round(forensic / wall, 3) if wall else None,
            "search_share": round(sum(r["forensic_s"] for r in search)
                                  / max(sum(r["wall_s"] for r in search), 1e-9), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not (args.run_dir / "run.sqlite").exists():
        print(f"error: {args.run_dir} holds no run", file=sys.stderr)
        return 2
    store = RunStore(args.run_dir)
    try:
        table = rows(store)
    finally:
        store.close()
    summary = totals(table)
    if args.json:
        print(json.dumps({"rows": table, "totals": summary}, indent=1))
        return 0
    print("| candidate | kind | correct | ms | wall s | forensic s | share | traced |")
    print("|---|---|---|---|---|---|---|---|")
    for r in table:
        ms = f"{r['runtime_ms']:.4f}" if r["runtime_ms"] else "-"
        share = f"{100 * r['share']:.0f}%" if r["share"] is not None else "-"
        print(f"| {r['candidate']} | {r['kind']} | {'yes' if r['correct'] else 'no'} | {ms} | "
              f"{r['wall_s']} | {r['forensic_s']} | {share} | {'yes' if r['traced'] else 'no'} |")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
