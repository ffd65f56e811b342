"""The LLM policy through the real ChatOpenAI client against a scripted server on 127.0.0.1:
a full run, bad replies and arguments, HTTP errors, an endpoint that is down, and the API key
never reaching the run folder."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import candidate
from fake_openai import FakeOpenAI, tool_call
from kernelevo.agent.budget import Budget
from kernelevo.agent.experience import Library
from kernelevo.agent.report.summary import status
from kernelevo.agent.request_log import load_request
from kernelevo.agent.runner import RunConfig, create, drive
from kernelevo.agent.store import RunStore, source_id
from kernelevo.sandbox.models import TimingPolicy
from kernelevo.tasks import load_task

KEY = "sk-kernelevo-test-key-never-stored"
GOOD = candidate("ok_relu_empty").read_text()
NO_MODEL_NEW = GOOD.replace("class ModelNew", "class SomethingElse")


def run_with(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, base_url: str, evals: int = 1,
             **extra: object) -> tuple[int, Path]:
    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    monkeypatch.setenv("KERNELEVO_TEST_KEY", KEY)
    extra.setdefault("model_retry_minutes", 0.0)  # an outage stops a test at once unless it asks otherwise
    extra.setdefault("experience", False)  # tests share a cache folder: only the experience tests remember
    extra.setdefault("builtin_seed", False)  # each test scripts its own first kernel, but the seed's test
    run = tmp_path / str(extra.pop("run_name", "run"))
    config = RunConfig(task="relu", size="small", policy="llm", model="fake-coder", base_url=base_url,
                       api_key_env="KERNELEVO_TEST_KEY", budget=extra.pop("budget", Budget(max_evals=evals)), batch=1,
                       measure_compile=False, timing=TimingPolicy(warmup=1, warmup_s=0, min_runs=5, budget_s=0.1),
                       **extra)
    if not (run / "run.sqlite").exists():
        create(config, run).close()
    return drive(run, first=not (run / "checkpointed").exists(), progress=None), run


def events(run: Path) -> list[dict]:
    store = RunStore(run)
    found = store.events()
    store.close()
    return found


@pytest.mark.slow  # the diff test writes, edits and judges
def test_a_scripted_model_writes_a_correct_candidate(tmp_path, cache_dir, monkeypatch) -> None:
    cid = source_id(GOOD)
    script = [
        {"content": "I will write a grid kernel.", "reasoning_content": "Relu is memory-bound: one pass.",
         "tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
        {"tool_calls": [tool_call("compile_kernel", {"candidate": cid[:10]})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": cid[:10]})]},
        # the evaluation budget (1) is spent by the check: the turn ends, then the reflection
        {"content": "A plain blocked grid is correct; next try wider blocks."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 0 and not server.refused  # the reasoning text was never sent back
    requests = [e["request"] for e in events(run) if e["type"] == "model_request"]
    assert [load_request(run, r) for r in requests] == server.requests  # every request, exactly as sent
    stored = sum(p.stat().st_size for p in (run / "requests").rglob("*.json"))
    sent = sum(len(json.dumps(r, separators=(",", ":"))) for r in server.requests)
    assert stored < 0.6 * sent  # the tools and the history each request repeats are stored once
    responses = [e for e in events(run) if e["type"] == "model_response"]
    assert responses[0]["reasoning"] == "Relu is memory-bound: one pass."
    store = RunStore(run)
    info = status(store)
    assert info["state"] == "finished" and info["evaluations"] == 1
    assert info["best"]["candidate"] == cid and info["best"]["verified"]
    assert store.meta("tokens_in") == 400 and store.meta("tokens_out") == 80  # usage from the four responses
    assert store.meta("notes") == ["A plain blocked grid is correct; next try wider blocks."]
    store.close()
    kinds = {e["type"] for e in events(run)}
    assert {"model_request", "model_response", "tool_call", "tool_result", "verdict", "decision"} <= kinds
    results = [e for e in events(run) if e["type"] == "tool_result"]
    assert "for sm_90a: ok" in results[1]["result"]  # the compile gate, with no GPU
    assert "ACCEPTED" in results[2]["result"]  # the model saw the harness's own verdict
    assert all(e["candidate"] == cid for e in results)  # tool events are linked to the candidate
    # the request carried the tools' schemas and the key only as a header, never in the run folder
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} >= {"write_kernel", "check_kernel",
                                                                            "edit_kernel", "read_source"}
    facts = server.requests[0]["messages"][1]["content"]  # what a kernel engineer would want to know
    assert "eager reference:" in facts and "torch.compile:" in facts and "1 of 1 evaluations left" in facts
    assert server.headers[0].get("authorization") == f"Bearer {KEY}"
    for path in run.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_bad_replies_and_arguments_do_not_lose_the_run(tmp_path, cache_dir, monkeypatch) -> None:
    bad, good = source_id(NO_MODEL_NEW), source_id(GOOD)
    script = [
        {"content": "Let me think about it first."},                                   # no tool call
        {"tool_calls": [tool_call("write_kernel", "{not json")]},                      # malformed arguments
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD})]},                 # missing field
        {"tool_calls": [tool_call("launch_rockets", {})]},                             # no such tool
        {"tool_calls": [tool_call("write_kernel", {"source": NO_MODEL_NEW, "strategy": "broken"})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": bad})]},                # rejected by the harness
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid", "parent": bad[:8]})]},
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},  # the same twice
        {"tool_calls": [tool_call("check_kernel", {"candidate": good})]},
        {"content": "done"},
        {"content": "Class ModelNew is required; the grid kernel works."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, evals=2)
    assert code == 0
    results = [e["result"] for e in events(run) if e["type"] == "tool_result"]
    text = "\n".join(results)
    assert "could not parse the arguments" in text
    assert "write_kernel failed" in text and "strategy" in text
    assert "there is no tool 'launch_rockets'" in text
    assert "static checks FAIL" in text and "REJECTED" in text
    assert "identical to candidate" in text
    nudges = [e for e in events(run) if e["type"] == "model_request" and "Please use the tools" in e["last"]]
    assert nudges
    info = status(RunStore(run))
    assert info["evaluations"] == 2 and info["best"]["candidate"] == good
    assert server.refused == []  # every request's history was one a real server accepts


@pytest.mark.slow  # a sibling of the bad-replies test
def test_a_reply_mixing_a_valid_and_a_malformed_call_keeps_the_valid_one(tmp_path, cache_dir, monkeypatch) -> None:
    """Both calls get an answer (a real server refuses a history with an unanswered call, HTTP 400),
    and the valid one is carried out."""
    good = source_id(GOOD)
    script = [
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"}),
                        tool_call("check_kernel", "{not json")]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": good[:10]})]},
        {"content": "done"},
        {"content": "The grid kernel works."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert server.refused == [] and code == 0
    results = "\n".join(e["result"] for e in events(run) if e["type"] == "tool_result")
    assert "could not parse the arguments of check_kernel" in results and "ACCEPTED" in results
    assert status(RunStore(run))["best"]["candidate"] == good


@pytest.mark.slow  # a sibling of the outage test, which retries too
def test_http_errors_are_retried(tmp_path, cache_dir, monkeypatch) -> None:
    script = [{"status": 500}, {"status": 503},
              {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
              {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(GOOD)})]},
              {"content": "note"}]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 0
    assert len(server.requests) == 5  # two failures retried, write, check, reflection


def test_a_request_the_endpoint_refuses_stops_the_run_with_its_reason(tmp_path, cache_dir, monkeypatch) -> None:
    """HTTP 400 (a context overflow, an unsupported parameter) is the same on every retry: exit 2 with
    the server's words, not exit 4 and a resume that fails again forever."""
    script = [{"status": 400, "message": "Unsupported parameter: 'temperature'"}]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 2 and len(server.requests) == 1  # not retried
    store = RunStore(run)
    assert store.state() == "failed" and "Unsupported parameter" in store.meta("state_reason")


def test_a_turn_that_outgrows_the_context_ends_and_keeps_its_kernel(tmp_path, cache_dir, monkeypatch) -> None:
    """A context overflow ends the turn, not the run: what the turn wrote is judged."""
    script = [
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
        {"status": 400, "message": "This model's maximum context length is 8192 tokens"},
        {"content": "Grid kernel written."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 0 and status(RunStore(run))["best"]["candidate"] == source_id(GOOD)
    assert any(e.get("action") == "end turn" for e in events(run))


def test_an_outage_is_ridden_out_with_growing_pauses_and_retry_after(tmp_path, cache_dir, monkeypatch) -> None:
    """Three failures in a row, past the client's own retries, within the retry horizon: the run waits
    (as long as the server's Retry-After says, then longer each time) and goes on."""
    monkeypatch.setattr("kernelevo.agent.llm_policy.RETRY_FIRST_S", 0.2)  # pauses of 0.1-0.3 s, then 0.2-0.6 s
    script = [{"status": 503, "headers": {"Retry-After": "0.5"}}, {"status": 502}, {"status": 500},
              {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
              {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(GOOD)})]},
              {"content": "done"}, {"content": "note"}]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, model_retries=0,
                             model_retry_minutes=1.0)
    assert code == 0
    assert server.times[1] - server.times[0] >= 0.5  # Retry-After honoured
    assert sum(e["type"] == "model_retry" for e in events(run)) == 3


def test_endpoint_down_interrupts_cleanly_and_resumes(tmp_path, cache_dir, monkeypatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, run = run_with(tmp_path, cache_dir, monkeypatch, f"http://127.0.0.1:{port}/v1", model_retries=1)
    assert code == 4
    store = RunStore(run)
    assert store.state() == "interrupted" and "endpoint failed" in store.meta("state_reason")
    store.close()
    script = [{"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
              {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(GOOD)})]},
              {"content": "done"}, {"content": "note"}]
    with FakeOpenAI(script, port=port):
        assert drive(run, first=False, progress=None) == 0
    info = status(RunStore(run))
    assert info["state"] == "finished" and info["best"]["candidate"] == source_id(GOOD)


def test_a_slow_endpoint_times_out_and_interrupts(tmp_path, cache_dir, monkeypatch) -> None:
    with FakeOpenAI([{"sleep": 5}, {"sleep": 5}, {"sleep": 5}]) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, model_timeout_s=1, model_retries=1)
    assert code == 4
    assert any(e["type"] == "model_error" and "Timeout" in e["error"] for e in events(run))


@pytest.mark.slow  # the trace's lines are read by other tests too
def test_trace_json_lines_have_types(tmp_path, cache_dir, monkeypatch) -> None:
    script = [{"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
              {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(GOOD)})]},
              {"content": "done"}, {"content": "note"}]
    with FakeOpenAI(script) as server:
        _, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    for event in events(run):
        assert json.loads(json.dumps(event))["type"]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", *args], capture_output=True, text=True,
                              timeout=120)

    trace = cli("trace", str(run)).stdout
    assert "tool_call write_kernel (strategy=grid)" in trace and "\n      def relu_kernel(" in trace
    assert "'source':" not in trace  # the kernel is printed as code, not inside a dict
    listing = cli("request", str(run), "--json").stdout.splitlines()
    assert len(listing) == len(server.requests)
    assert json.loads(cli("request", str(run), "1", "--json").stdout) == server.requests[0]
    shown = cli("request", str(run), "2").stdout
    assert "--- message 1: system ---" in shown and "write_kernel" in shown and "      def relu_kernel(" in shown
    missing = cli("request", str(run), str(len(server.requests) + 1))
    assert missing.returncode == 2 and "there is no request" in missing.stderr


def test_the_reflection_never_calls_an_unjudged_kernel_rejected(tmp_path, cache_dir, monkeypatch) -> None:
    """A kernel written but not checked in the turn is judged after it: the reflection, which comes
    first, says so instead of calling it rejected."""
    script = [
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
        {"content": "done"},
        {"content": "Wrote a grid kernel."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 0 and server.refused == []
    reflection = next(r for r in server.requests if "writing short notes" in r["messages"][0]["content"])
    text = reflection["messages"][-1]["content"]
    assert "not judged yet" in text and "rejected" not in text


@pytest.mark.slow  # a sibling of the bad-replies test
def test_a_kernel_in_a_code_block_is_taken_as_a_write(tmp_path, cache_dir, monkeypatch) -> None:
    """A model that keeps answering with code blocks instead of tool calls still gets its kernel judged
    (it used to get one nudge, then the run ended for good)."""
    script = [
        {"content": f"Here is my kernel:\n```python\n{GOOD}```\n"},
        {"content": "done"},
        {"content": "Code block kernel."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 0 and server.refused == []
    info = status(RunStore(run))
    assert info["best"]["candidate"] == source_id(GOOD) and info["best"]["verified"]
    assert any("taken as write_kernel" in (m.get("content") or "") for m in server.requests[1]["messages"])


def test_a_model_improves_the_code_it_is_shown_by_a_diff(tmp_path, cache_dir, monkeypatch) -> None:
    """The second generation's prompt carries the best kernel's source; the scripted model copies a
    line of it into a SEARCH/REPLACE edit, which can only apply if the source really was shown."""
    first = source_id(GOOD)

    def edit_from_prompt(body: dict) -> dict:
        prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
        line = next((ln for ln in prompt.splitlines() if "BLOCK=1024)" in ln), None)
        if line is None:
            return {"content": "I cannot see any kernel."}
        edits = f"<<<<<<< SEARCH\n{line}\n=======\n{line.replace('1024', '512')}\n>>>>>>> REPLACE"
        return {"tool_calls": [tool_call("edit_kernel", {"candidate": first[:10], "edits": edits,
                                                         "strategy": "smaller-blocks"})]}

    script = [
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": first[:10]})]},
        {"content": "done"},
        {"content": "A grid kernel works."},
        edit_from_prompt,
        {"tool_calls": [tool_call("read_source", {"candidate": first[:10]})]},
        {"content": "done"},
        {"content": "Smaller blocks."},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, evals=2)
    assert code == 0 and server.refused == []
    store = RunStore(run)
    edited = [c for c in store.candidates() if c["id"] != first]
    assert len(edited) == 1 and edited[0]["parent"] == first
    assert "BLOCK=512" in store.source_path(edited[0]["id"]).read_text()
    assert store.evaluation(edited[0]["id"]).correct
    results = "\n".join(e["result"] for e in events(run) if e["type"] == "tool_result")
    assert "edited; saved as candidate" in results and "relu_kernel" in results  # read_source showed code


def test_a_verified_kernel_is_remembered_and_seeds_the_next_run(tmp_path, cache_dir, monkeypatch) -> None:
    """Run 1 keeps its verified best in the experience library (with its reflection note). Run 2 on
    the same task starts from it: written as a first candidate, shown in the prompt with the note, and
    judged by the harness. A best whose final verdict is a rejection adds nothing."""
    library = tmp_path / "experience.sqlite"
    cid = source_id(GOOD)
    first = [{"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
             {"tool_calls": [tool_call("check_kernel", {"candidate": cid[:10]})]},
             {"content": "One program per 1024 values is enough for relu."}]  # the budget is spent: reflection
    with FakeOpenAI(first) as server:
        code, _ = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, experience=True,
                           experience_path=library, run_name="first")
    assert code == 0
    with Library(library) as lib:
        kept = lib.entries()
    assert len(kept) == 1 and kept[0].source == GOOD and kept[0].task == "relu"
    assert kept[0].notes == ["One program per 1024 values is enough for relu."] and kept[0].device == "cpu"

    prompts: list[str] = []

    def check_the_seed(body: dict) -> dict:  # runs in the server's thread: it records, the test asserts
        prompts.append(body["messages"][1]["content"])
        return {"tool_calls": [tool_call("check_kernel", {"candidate": cid[:10]})]}

    with FakeOpenAI([check_the_seed, {"content": "The kept kernel still holds."}]) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, experience=True,
                             experience_path=library, run_name="second")
    assert code == 0 and server.refused == [] and len(prompts) == 1
    assert "From earlier runs" in prompts[0] and "One program per 1024 values" in prompts[0]
    assert f"written as candidate {cid[:10]}" in prompts[0] and "relu_kernel" in prompts[0]
    seeds = [e for e in events(run) if e.get("action") == "seed"]
    assert len(seeds) == 1 and seeds[0]["candidate"] == cid
    info = status(RunStore(run))
    assert info["best"]["candidate"] == cid and info["best"]["verified"]

    # a final verdict that is not correct is never kept (the run above re-judged its best correct)
    from kernelevo.agent.experience import keep_final

    store = RunStore(run)
    rejected = store.evaluation(cid, "final").model_copy(update={"correct": False, "reason": "wrong"})
    store.record_evaluation(cid, "final", rejected)
    assert keep_final(tmp_path / "other.sqlite", load_task("relu", "small"), store, "cpu", [], {"id": cid}) is None
    store.close()
    with Library(tmp_path / "other.sqlite") as lib:
        assert lib.entries() == []  # nothing the harness did not verify


@pytest.mark.slow  # the diff test's prompt shows code too
def test_other_strategies_that_work_are_shown_as_inspirations(tmp_path, cache_dir, monkeypatch) -> None:
    """The next generation's prompt carries the fastest kernel and, beside it, the source of the best
    kernel of another strategy."""
    # another structure (two blocks per program, in a loop): another cell of the archive
    wide = GOOD.replace("""    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)""", """    for half in range(2):
        offs = (tl.program_id(0) * 2 + half) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)""").replace("triton.cdiv(n, 1024)", "triton.cdiv(n, 2048)")
    assert wide != GOOD
    third = GOOD.replace("BLOCK=1024", "BLOCK=512")
    seen: list[str] = []

    def look(body: dict) -> dict:
        seen.append("\n".join(str(m.get("content") or "") for m in body["messages"]))
        return {"tool_calls": [tool_call("write_kernel", {"source": third, "strategy": "narrow"}),
                               tool_call("check_kernel", {"candidate": source_id(third)[:10]})]}

    script = [
        {"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"}),
                        tool_call("write_kernel", {"source": wide, "strategy": "wide"})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(GOOD)[:10]}),
                        tool_call("check_kernel", {"candidate": source_id(wide)[:10]})]},
        {"content": "done"},
        {"content": "Both block sizes work."},
        look,
        {"content": "Narrow works too."},
    ]
    with FakeOpenAI(script) as server:
        code, _ = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, evals=3)
    assert code == 0 and server.refused == [] and len(seen) == 1
    assert "Other strategies that work" in seen[0]
    assert "BLOCK=1024)" in seen[0] and "for half in range(2):" in seen[0]  # the fastest and the other, as code


def test_no_request_goes_out_once_the_token_budget_is_spent(tmp_path, cache_dir, monkeypatch) -> None:
    """Each scripted reply costs 120 tokens: with 200 allowed, the second reply ends the turn and no
    reflection is asked for (it would spend tokens past the budget)."""
    script = [{"tool_calls": [tool_call("write_kernel", {"source": GOOD, "strategy": "grid"})]},
              {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(GOOD)[:10]})]},
              {"content": "a reflection that must not be asked for"}]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url,
                             budget=Budget(max_evals=5, max_tokens=200))
    assert len(server.requests) == 2 and code == 0
    skipped = [e for e in events(run) if e.get("action") == "no reflection"]
    assert len(skipped) == 1 and "token budget" in skipped[0]["reason"]


def test_two_islands_hold_two_conversations_at_once(tmp_path, cache_dir, monkeypatch) -> None:
    """With two islands the model is asked twice at the same time, each island writes and checks its own
    kernel, and the budget of two evaluations holds across them."""
    looped = GOOD.replace("    offs = tl.program_id(0) * BLOCK", "    for _ in range(1):\n        pass\n"
                          "    offs = tl.program_id(0) * BLOCK")
    kernels = {0: GOOD, 1: looped}

    def respond(body: dict) -> dict:
        messages = body["messages"]
        if messages[0]["content"].startswith("You are a kernel engineer writing short notes"):
            return {"content": "island note"}
        island = 0 if "island 0 of 2" in messages[1]["content"] else 1
        source, last = kernels[island], messages[-1]
        if last["role"] == "user":
            time.sleep(0.3)  # the other island's opening request arrives meanwhile
            return {"tool_calls": [tool_call("write_kernel", {"source": source, "strategy": f"island{island}"})]}
        if last["role"] == "tool" and "ACCEPTED" not in last["content"] and "judged" not in last["content"]:
            return {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(source)[:10]})]}
        return {"content": "done"}

    with FakeOpenAI([respond] * 20) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, evals=2, islands=2)
    assert code == 0 and server.refused == []
    first_two = server.requests[:2]
    assert all(len(r["messages"]) == 2 for r in first_two)  # two opening prompts before any answer came back
    assert {"island 0 of 2" in r["messages"][1]["content"] for r in first_two} == {True, False}
    store = RunStore(run)
    assert store.meta("islands") == {source_id(GOOD): 0, source_id(looped): 1}
    assert store.count_evaluations("search") == 2
    assert all(store.evaluation(source_id(k)).correct for k in kernels.values())
    usage = status(store)["model"]  # a turn ends early once the other island spent the budget: 7 or 8
    assert usage["requests"] == len(server.requests) and usage["requests_per_evaluation"] == len(server.requests) / 2
    store.close()


def test_the_model_starts_from_the_strategists_kernel(tmp_path, cache_dir, monkeypatch) -> None:
    """Where the built-in templates cover the task, their first kernel is the population's first
    candidate, judged like any other, before the model writes anything."""
    script = [{"content": "done"}, {"content": "Started from the strategist's kernel."}]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url, builtin_seed=True)
    assert code == 0 and server.refused == []
    info = status(RunStore(run))
    first = info["candidates"][0]
    assert first["strategy"].startswith("builtin-") and first["correct"], info["candidates"]
    assert info["best"]["candidate"] == first["id"] and info["best"]["verified"]
    seeded = [e for e in events(run) if e["type"] == "decision" and e.get("action") == "seed"]
    assert seeded and "built-in strategist's first kernel" in seeded[0]["reason"]


def test_a_lone_surrogate_in_a_models_reply_is_read_as_text(tmp_path, cache_dir, monkeypatch) -> None:
    """A server may send a lone UTF-16 surrogate, escaped, in the content or a tool's arguments (ones that
    parse, or not): no kernel's source can be parsed with one, no store write it, and the client cannot
    send it back. It is read as U+FFFD, and the run goes on."""
    odd = GOOD.replace("import torch", "# a note \ud800 the model wrote\nimport torch", 1)
    script = [
        {"content": "Arguments that do not parse.", "tool_calls": [tool_call("write_kernel", "{bad \ud800")]},
        {"content": "A kernel \ud800 with a comment.",
         "tool_calls": [tool_call("write_kernel", {"source": odd, "strategy": "grid \udfff"})]},
        {"tool_calls": [tool_call("check_kernel", {"candidate": source_id(odd.replace("\ud800", "\ufffd"))[:10]})]},
        {"content": "done \ud800"},
    ]
    with FakeOpenAI(script) as server:
        code, run = run_with(tmp_path, cache_dir, monkeypatch, server.base_url)
    assert code == 0 and not server.refused
    info = status(RunStore(run))
    assert info["best"]["verified"] and info["best"]["candidate"] == source_id(odd.replace("\ud800", "\ufffd"))
