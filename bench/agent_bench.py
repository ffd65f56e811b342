"""The LLM loop's own cost (not a test): a scripted model over real HTTP replays a fixed sequence of
edits, and the run is timed with one island and with two.

The model is a script on 127.0.0.1 behind the real ``ChatOpenAI`` client (``tests/fake_openai.py``,
as strict as a real server about message histories). Each turn it edits the best kernel it was shown
(a SEARCH/REPLACE block on the launch line, the next block size of a fixed sequence), checks the
result and ends the turn; a reflection gets a one-line note. Its replies are instant, so what the
run spends beyond the judge's verdicts is the orchestration: the graph, checkpoints, prompts, the
store and the HTTP round trips.

Per run: evaluations, wall time, the verdicts' own wall time, orchestration overhead per evaluation,
evaluations per minute, requests and tokens per evaluation (the script's token counts are not real:
request sizes are given instead). The overhead is the time from the first model request to the end
of the run during which no harness work ran (no verdict, final re-judge, profile or compile gate, on
any island: the intervals are recorded around the evaluator's calls and merged), over the
evaluations: the time the harness sat idle waiting for the loop. Orchestration that overlaps another
island's verdict is hidden by it and not counted, as it costs the run nothing.

Usage: python bench/agent_bench.py [--islands 1,2] [--evals 8] [--task relu] [--size full] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI, tool_call  # noqa: E402

KEY_ENV = "KERNELEVO_BENCH_KEY"
START = (ROOT / "tests" / "candidates" / "ok_relu_empty.py").read_text()
BLOCKS = [2048, 4096, 512, 8192, 256, 16384, 128, 1024]
"""The block sizes the scripted model steps through, one edit per turn (unique per run)."""


class ScriptedModel:
    """A model that edits the launch line of the kernel it is shown. Thread-safe: islands ask at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.blocks = itertools.cycle(BLOCKS)

    def __call__(self, body: dict) -> dict:
        messages = body["messages"]
        if messages[0]["content"].startswith("You are a kernel engineer writing short notes"):
            return {"content": "Larger blocks amortise the launch; the grid kernel stays memory-bound."}
        last = messages[-1]
        if last["role"] == "tool":
            text = str(last.get("content") or "")
            saved = _saved_id(text)
            if saved:
                return {"tool_calls": [tool_call("check_kernel", {"candidate": saved})]}
            return {"content": "done"}
        prompt = "\n".join(str(m.get("content") or "") for m in messages)
        line = next((ln for ln in prompt.splitlines() if "relu_kernel[(" in ln and "BLOCK=" in ln), None)
        parent = _parent_id(prompt)
        if line is None or parent is None:
            return {"tool_calls": [tool_call("write_kernel", {"source": START, "strategy": "grid"})]}
        with self.lock:
            block = next(self.blocks)
        old = line.split("BLOCK=")[1].split(")")[0]
        new = line.replace(f"cdiv(n, {old})", f"cdiv(n, {block})").replace(f"BLOCK={old}", f"BLOCK={block}")
        edits = f"<<<<<<< SEARCH\n{line}\n=======\n{new}\n>>>>>>> REPLACE"
        return {"tool_calls": [tool_call("edit_kernel", {"candidate": parent, "edits": edits,
                                                         "strategy": f"block-{block}"})]}


def _saved_id(text: str) -> str | None:
    """The candidate id a write or an edit reported ("saved as candidate <id>")."""
    marker = "saved as candidate "
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split()[0].strip(".,:;")


def _parent_id(prompt: str) -> str | None:
    """The id of the fastest kernel, whose source the prompt shows ("The fastest so far, <id> (...")."""
    marker = "The fastest so far, "
    if marker not in prompt:
        return None
    return prompt.split(marker, 1)[1].split()[0].strip(".,:;")


class HarnessClock:
    """Records when the evaluator's work ran (on every thread), by wrapping its entry points."""

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []
        self.lock = threading.Lock()
        self.saved: list[tuple[type, str, object]] = []

    def __enter__(self) -> HarnessClock:
        from kernelevo.sandbox.advice.profiling import HarnessProfiler
        from kernelevo.sandbox.judge.evaluate import Evaluator

        for owner, name in ((Evaluator, "evaluate"), (Evaluator, "triton_gate"), (Evaluator, "ncu_pass"),
                            (HarnessProfiler, "profile")):
            original = getattr(owner, name)
            self.saved.append((owner, name, original))
            setattr(owner, name, self._timed(original))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in self.saved:
            setattr(owner, name, original)

    def _timed(self, original):  # noqa: ANN001, ANN202 - any method
        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with self.lock:
                    self.intervals.append((began, time.perf_counter()))
        return wrapper

    def idle_s(self, start: float, end: float) -> float:
        """Seconds of [start, end] during which none of the recorded work ran."""
        covered, reach = 0.0, start
        for a, b in sorted(self.intervals):
            a, b = max(a, reach), min(b, end)
            if b > a:
                covered += b - a
                reach = b
        return (end - start) - covered


def one_run(folder: Path, islands: int, evals: int, task: str, size: str) -> dict:
    from kernelevo.agent.budget import Budget
    from kernelevo.agent.report.summary import status
    from kernelevo.agent.runner import RunConfig, create, drive
    from kernelevo.agent.store import RunStore

    run = folder / f"islands{islands}"
    with FakeOpenAI([ScriptedModel()] * 1000) as server:
        config = RunConfig(task=task, size=size, policy="llm", model="scripted", base_url=server.base_url,
                           api_key_env=KEY_ENV, budget=Budget(max_evals=evals), islands=islands,
                           measure_compile=False, experience=False, model_retry_minutes=0.0,
                           builtin_seed=False)
        create(config, run).close()
        with HarnessClock() as clock:
            began, began_at = time.perf_counter(), time.time()
            code = drive(run, first=True, progress=None)
            ended = time.perf_counter()
        wall = ended - began
        refused = list(server.refused)
        sent = sum(len(json.dumps(r)) for r in server.requests)
    store = RunStore(run)
    try:
        state = status(store, judge_times=True)
        return {"islands": islands, "exit": code, "wall_s": wall, "refused": refused, "request_chars": sent,
                **_costs(store, wall, began_at, lambda first_s: clock.idle_s(began + first_s, ended)),
                "model": state["model"], "judge_time": state["judge_time"]}
    finally:
        store.close()


def _costs(store, wall: float, began_at: float, idle_after) -> dict:  # noqa: ANN001 - (store, seconds -> seconds)
    """Verdict time and orchestration overhead, from the store's verdicts and its events' stamps
    (``began_at``: the wall clock when the run was started; ``idle_after(s)``: seconds without harness
    work from ``s`` into the run to its end)."""
    search = [store.evaluation(c["id"]) for c in store.candidates()]
    verdicts = [v for v in search if v is not None]
    final = [store.evaluation(c["id"], "final") for c in store.candidates()]
    final_s = sum(v.wall_s or 0.0 for v in final if v is not None)
    asked = [e["ts"] for e in store.events() if e["type"] == "model_request"]
    # the task, the evaluators' processes, the baseline, eager and compile times: not the loop's
    before_s = (min(asked) - began_at) if asked else 0.0
    verdict_s = sum(v.wall_s or 0.0 for v in verdicts)
    n = len(verdicts)
    return {"evaluations": n, "correct": sum(bool(v.correct) for v in verdicts), "verdict_s": verdict_s,
            "final_rejudge_s": final_s, "before_first_request_s": before_s,
            "overhead_per_eval_s": idle_after(before_s) / n if n else None,
            "evals_per_minute": 60 * n / wall if wall else None,
            "best_ms": min((v.runtime_ms for v in verdicts if v.correct and v.runtime_ms), default=None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--islands", default="1,2", help="comma-separated island counts, one run each")
    parser.add_argument("--evals", type=int, default=8, help="evaluations per run")
    parser.add_argument("--task", default="relu")
    parser.add_argument("--size", default="full")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "sk-bench-not-a-real-key")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kernelevo-agent-bench-") as scratch:
        # without bubblewrap the candidates run as an unprivileged user that must pass through
        os.chmod(scratch, 0o711)
        os.environ.setdefault("KERNELEVO_CACHE", str(Path(scratch) / "cache"))
        for islands in (int(x) for x in args.islands.split(",")):
            rows.append(one_run(Path(scratch), islands, args.evals, args.task, args.size))
            print(json.dumps(rows[-1], default=str), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2, default=str))
    print("| islands | evaluations (correct) | wall s | verdicts s | overhead per evaluation s | "
          "evaluations per minute | requests per evaluation | request kB per evaluation |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, n = r["model"] or {}, max(r["evaluations"], 1)
        overhead = r["overhead_per_eval_s"]
        print(f"| {r['islands']} | {r['evaluations']} ({r['correct']}) | {r['wall_s']:.1f} | {r['verdict_s']:.1f} | "
              f"{overhead if overhead is None else round(overhead, 2)} | {r['evals_per_minute']:.2f} | "
              f"{m.get('requests', 0) / n:.1f} | {r['request_chars'] / n / 1000:.1f} |")
    failed = [r["islands"] for r in rows if r["exit"] != 0]
    if failed:
        raise SystemExit(f"the run(s) with {failed} island(s) did not finish cleanly: see their output above")


if __name__ == "__main__":
    main()
