"""The HTML run report: the data it is built from, escaping, and an end-to-end check in headless
Chromium on a real run made here (scripted model over real HTTP, CPU interpreter): the plot, the
lineage tree and a candidate's diff render, read back from the DOM, plus a screenshot."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import IN_CI, candidate
from fake_openai import FakeOpenAI, tool_call
from kernelevo.agent.report.html import render, report_data, sources, write_report
from kernelevo.agent.store import RunStore, source_id
from kernelevo.sandbox.models import Check, Verdict

GOOD = candidate("ok_relu_empty").read_text()
WIDER = GOOD.replace("triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)", "triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048)")


def _verdict(correct: bool, ms: float | None = None, speedup: float | None = None, reason: str | None = None) -> Verdict:
    return Verdict(task="relu", candidate="c.py", size="full", compiled=True, correct=correct, reason=reason,
                   checks=[Check(name="correct: set 0", passed=correct, detail="within tolerance" if correct
                                 else reason or "")], device="NVIDIA H200", isolation={}, runtime_ms=ms,
                   speedup=speedup, timing="cuda-events" if ms else None, reference_runtime_ms=1.0,
                   compile_runtime_ms=0.9, speedup_vs_compile=(0.9 / ms) if ms else None,
                   diagnosis="memory-bound; 90% of bandwidth" if correct else None)


def _store(tmp_path: Path) -> tuple[RunStore, list[str]]:
    store = RunStore(tmp_path / "run")
    store.set_meta("config", {"task": "relu", "size": "full", "policy": "builtin", "budget": {"max_evals": 10}})
    store.event("decision", None, action="start", policy="builtin", family="pointwise")
    a, _ = store.add_candidate(GOOD, None, "tiled", "tiled|1024", json.dumps({"why": "seed", "params": {"B": 1024}}), 0)
    b, _ = store.add_candidate(WIDER, a, "tiled", "tiled|2048", json.dumps({"why": "wider blocks"}), 1)
    c, _ = store.add_candidate("</script><script>alert('x')</script>\n", a, "vector", "vector|4", "{}", 1)
    for cid, verdict in ((a, _verdict(True, 0.5, 2.0)), (b, _verdict(True, 0.4, 2.5)),
                         (c, _verdict(False, reason="static: no ModelNew"))):
        store.record_evaluation(cid, "search", verdict)
        store.event("verdict", cid, kind="search", correct=verdict.correct, reason=verdict.reason,
                    runtime_ms=verdict.runtime_ms, speedup=verdict.speedup, timing=verdict.timing)
    store.set_meta("best", {"id": b, "runtime_ms": 0.4, "speedup": 2.5, "timing": "cuda-events"})
    store.set_state("finished", "evaluation budget spent")
    return store, [a, b, c]


def test_report_data_summarises_the_run(tmp_path: Path) -> None:
    store, (a, b, c) = _store(tmp_path)
    data = report_data(store)
    assert data["state"] == "finished" and data["device"] == "NVIDIA H200" and data["evaluations"] == 3
    assert data["best"]["candidate"] == b and data["best_verdict"]["speedup"] == 2.5
    strategies = {s["strategy"]: s for s in data["strategies"]}
    assert strategies["tiled"] == {"strategy": "tiled", "tried": 2, "judged": 2, "correct": 2, "best_speedup": 2.5,
                                   "best_ms": 0.4, "success_rate": 1.0}
    assert strategies["vector"]["success_rate"] == 0.0 and strategies["vector"]["best_speedup"] is None
    by_id = {x["id"]: x for x in data["candidates"]}
    assert by_id[b]["parent"] == a and by_id[b]["why"] == "wider blocks" and by_id[a]["params"] == {"B": 1024}
    assert by_id[c]["search"]["checks"][0] == {"name": "correct: set 0", "passed": False,
                                              "detail": "static: no ModelNew"}
    assert any(e["candidate"] == b and "verdict" in e["text"] for e in data["trace"])
    store.close()


def test_a_hostile_source_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    store, (_, _, c) = _store(tmp_path)
    data = report_data(store)
    page = render(data, sources(store, data))
    store.close()
    assert "<script>alert('x')</script>" not in page
    assert page.count("</script>") == page.count("<script")  # every block closes where it should
    block = re.search(rf'data-id="{c}">(.*?)</script>', page, re.S)
    assert block and json.loads(block.group(1)).startswith("</script><script>")


def test_the_report_is_written_atomically_next_to_the_run(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    store.close()
    path = write_report(tmp_path / "run")
    assert path == tmp_path / "run" / "report.html" and path.read_text().startswith("<!DOCTYPE html>")
    assert not list((tmp_path / "run").glob(".report.html.*"))
    assert "http://" not in path.read_text().replace("http://www.w3.org/2000/svg", "")  # nothing fetched


# --- end to end, in a real browser ----------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        message = "Chromium is not installed: `apt-get install chromium` to run the report's browser tests"
        if IN_CI:
            pytest.fail(f"CI must provide Chromium (.ci/run installs it): {message}")
        pytest.skip(message)
    return found


def browse(page: Path, *args: str, fragment: str = "") -> str:
    done = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           *args, f"file://{page}{fragment}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_real_run_renders_in_headless_chromium(tmp_path, cache_dir, monkeypatch) -> None:
    from test_llm_policy import run_with

    first, second = source_id(GOOD), source_id(WIDER)
    script = [
        {"content": "A plain grid first.", "tool_calls": [tool_call("write_kernel", {"source": GOOD,
                                                                                      "strategy": "grid"})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": first[:10]})]},
        {"content": "Wider blocks should halve the launches.",
         "tool_calls": [tool_call("write_kernel", {"source": WIDER, "strategy": "grid-2048",
                                                   "parent": first[:10]})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": second[:10]})]},
        {"content": "Wider blocks were fine."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, evals=2, report=True)
    assert code == 0
    page = run / "report.html"  # written by --report as the run went, and at its end
    assert page.exists()
    dom = browse(page, "--dump-dom", fragment=f"#c={second}")
    assert 'data-ready="1"' in dom  # the script ran to its end
    # the plot: a best-so-far line through the judged candidates
    line = re.search(r'<path d="([^"]+)"[^>]*id="best-line"', dom)
    assert line and line.group(1).startswith("M")
    assert len(re.findall(r'class="point', dom)) == 2
    # the lineage tree: two nodes and the edge between them
    assert len(re.findall(r'<g class="node"', dom)) == 2 and len(re.findall(r'class="edge"', dom)) == 1
    # the candidate opened from the URL: its diff against its parent, its checks, its reasoning
    assert re.search(r'class="add">\+ .*BLOCK=2048', dom) and re.search(r'class="del">- .*BLOCK=1024', dom)
    assert "Harness checks" in dom and "ghost replay" in dom
    assert "Wider blocks should halve the launches." in dom  # the model's words that produced it
    shot = tmp_path / "report.png"
    browse(page, "--window-size=1400,2400", f"--screenshot={shot}", fragment=f"#c={second}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_thousands_of_candidates_stay_usable(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.set_meta("config", {"task": "relu", "size": "full", "policy": "builtin", "budget": {}})
    parent = None
    for i in range(2000):
        cid, _ = store.add_candidate(GOOD.replace("BLOCK=1024)", f"BLOCK=1024)  # variant {i}"), parent,
                                     f"s{i % 7}", f"c{i}", "{}", i // 50)
        store.record_evaluation(cid, "search", _verdict(i % 3 != 0, 1.0 + (i % 13) / 10, 1.0 + (i % 11) / 10,
                                                        None if i % 3 else "wrong"))
        parent = cid if i % 50 == 0 else parent
    store.set_state("interrupted", "stopped by a signal")
    store.close()
    page = write_report(tmp_path / "run")
    dom = browse(page, "--dump-dom")
    assert len(re.findall(r'<tr class="row', dom)) == 300  # the table starts with 300 rows ...
    assert re.search(r'<button id="more">', dom)  # ... and a button for the rest
    assert len(re.findall(r'<g class="node"', dom)) == 2000
    assert re.search(r'<div class="v [^"]*">interrupted</div>', dom)  # the state card says so


def test_optimize_report_refreshes_the_page_as_verdicts_come(tmp_path: Path) -> None:
    from kernelevo.agent.runner import ReportRefresher

    store, _ = _store(tmp_path)
    seen = []
    refresher = ReportRefresher(tmp_path / "run", lambda rt, cid, v: seen.append(cid), every_s=0)
    refresher(None, "first", _verdict(True, 0.5, 2.0))
    page = tmp_path / "run" / "report.html"
    assert page.exists() and "brand-new" not in page.read_text()
    cid, _ = store.add_candidate(GOOD + "\n# brand-new\n", None, "tiled", "tiled|x", "{}", 2)
    refresher(None, cid, _verdict(True, 0.5, 2.0))
    assert cid in page.read_text() and seen == ["first", cid]  # the progress line still printed
    slow = ReportRefresher(tmp_path / "run", None, every_s=3600)
    slow.write()
    before = page.stat().st_mtime_ns
    slow(None, cid, _verdict(True, 0.5, 2.0))  # within the interval: not rewritten
    assert page.stat().st_mtime_ns == before
    store.close()


def test_status_says_where_the_judges_time_went(tmp_path: Path) -> None:
    """Each phase summed over the search verdicts and the final re-judges, largest first; the forensic
    pass's own total (the same as its phase) left out."""
    from kernelevo.agent.report.summary import status

    store = RunStore(tmp_path)
    for n, source in enumerate(("a = 1\n", "a = 2\n")):
        cid, _ = store.add_candidate(source, None, "s", "c", "", 0)
        verdict = Verdict(task="t", candidate=cid, size="full", compiled=True, correct=True, reason=None, checks=[],
                          device="cuda", isolation={}, wall_s=40.0,
                          phases={"correctness": 20.0 + n, "timing": 10.0, "forensic: total": 7.0, "total": 39.0})
        store.record_evaluation(cid, "search", verdict)
        if n == 1:
            store.record_evaluation(cid, "final", verdict)
    assert status(store)["judge_time"] is None  # only where asked for: it reads every verdict
    spent = status(store, judge_times=True)["judge_time"]
    store.close()
    assert spent == {"verdicts": 3, "wall_s": 120.0,
                     "phases_s": {"session": 117.0, "correctness": 62.0, "timing": 30.0}}
    assert list(spent["phases_s"]) == ["session", "correctness", "timing"]
