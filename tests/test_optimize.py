"""`kernelevo optimize` end to end with the built-in policy (CPU interpreter): budgets, status,
trace, export, kill -9 and resume, SIGTERM, and tasks the policy cannot cover."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT


def env(cache: Path) -> dict[str, str]:
    return dict(os.environ, KERNELEVO_CACHE=str(cache), PYTHONUNBUFFERED="1")


def kernelevo(cache: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", *args], capture_output=True, text=True,
                          env=env(cache), cwd=ROOT, timeout=timeout)


def status(cache: Path, run: Path) -> dict:
    done = kernelevo(cache, "status", str(run), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_optimize_finishes_with_a_verified_candidate(tmp_path: Path, cache_dir: Path) -> None:
    run = tmp_path / "run"
    done = kernelevo(cache_dir, "optimize", "softmax", "--size", "small", "--max-evals", "3", "--batch", "2",
                     "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    info = status(cache_dir, run)
    assert info["state"] == "finished" and info["evaluations"] == 3 and info["correct"] >= 1
    best = info["best"]
    assert best["verified"] and best["speedup"] is None and best["timing"] == "cpu-interpreter"
    assert {"id", "correct", "runtime_ms", "parent", "strategy"} <= set(info["candidates"][0])
    assert any(c["parent"] for c in info["candidates"])  # later generations descend from elites

    trace = kernelevo(cache_dir, "trace", str(run), "--json")
    events = [json.loads(line) for line in trace.stdout.splitlines()]
    assert {"decision", "verdict"} <= {e["type"] for e in events}
    assert any(e.get("kind") == "final" for e in events if e["type"] == "verdict")
    readable = kernelevo(cache_dir, "trace", str(run)).stdout
    assert "propose" in readable and "verdict" in readable and "re-judged with fresh seeds" in readable
    child = next(c for c in info["candidates"] if c["parent"])
    lineage = kernelevo(cache_dir, "trace", str(run), "--candidate", child["id"][:8], "--json").stdout
    assert {json.loads(line)["candidate"] for line in lineage.splitlines()} >= {child["id"], child["parent"]}

    exported = tmp_path / "best.py"
    assert kernelevo(cache_dir, "export", str(run), "-o", str(exported)).returncode == 0
    judged = kernelevo(cache_dir, "eval", "softmax", str(exported), "--size", "small", "--json")
    assert judged.returncode == 0 and json.loads(judged.stdout)["correct"]


@pytest.mark.slow
def test_budget_is_never_exceeded(tmp_path: Path, cache_dir: Path) -> None:
    run = tmp_path / "run"
    done = kernelevo(cache_dir, "optimize", "relu", "--size", "small", "--max-evals", "4", "--batch", "3",
                     "--run-dir", str(run))
    assert done.returncode == 0, done.stderr
    info = status(cache_dir, run)
    assert info["evaluations"] == 4 and "evaluation budget spent" in info["reason"]


def _start(cache: Path, run: Path, evals: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kernelevo.agent.cli", "optimize", "softmax", "--size", "small",
                             "--max-evals", str(evals), "--batch", "2", "--run-dir", str(run)],
                            env=env(cache), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _wait_for_evaluations(cache: Path, run: Path, count: int, proc: subprocess.Popen, limit: float = 300) -> None:
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if (run / "run.sqlite").exists() and status(cache, run)["evaluations"] >= count:
            return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.5)
    raise AssertionError("no progress")


def test_kill_9_then_resume_loses_no_evaluation(tmp_path: Path, cache_dir: Path) -> None:
    run = tmp_path / "run"
    proc = _start(cache_dir, run, 4)
    _wait_for_evaluations(cache_dir, run, 2, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = status(cache_dir, run)
    assert before["state"] == "interrupted"
    judged = {c["id"] for c in before["candidates"] if c["correct"] is not None}
    assert len(judged) >= 2
    done = kernelevo(cache_dir, "resume", str(run))
    assert done.returncode == 0, done.stderr
    after = status(cache_dir, run)
    assert after["state"] == "finished" and after["evaluations"] == 4
    assert judged <= {c["id"] for c in after["candidates"] if c["correct"] is not None}
    assert len({c["id"] for c in after["candidates"]}) == len(after["candidates"])  # no duplicates
    assert kernelevo(cache_dir, "resume", str(run)).returncode == 0  # a finished run stays finished


@pytest.mark.slow  # its sibling, kill -9 then resume, runs by default
def test_sigterm_stops_cleanly_and_resumes(tmp_path: Path, cache_dir: Path) -> None:
    run = tmp_path / "run"
    proc = _start(cache_dir, run, 5)
    _wait_for_evaluations(cache_dir, run, 1, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 4
    assert status(cache_dir, run)["state"] == "interrupted"
    done = kernelevo(cache_dir, "resume", str(run))
    assert done.returncode == 0, done.stderr
    assert status(cache_dir, run)["evaluations"] == 5


def test_uncovered_task_exits_1_and_says_why(tmp_path: Path, cache_dir: Path) -> None:
    run = tmp_path / "run"
    task = tmp_path / "sorted_rows.py"
    task.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                    "        return torch.sort(x, dim=-1).indices\n\ndef get_inputs():\n    return [torch.randn(4, 9)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    done = kernelevo(cache_dir, "optimize", str(task), "--size", "small", "--run-dir", str(run))
    assert done.returncode == 1
    assert "cannot cover" in done.stderr and "Traceback" not in done.stderr
    assert status(cache_dir, run)["state"] == "failed"


def test_usage_errors(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kernelevo.agent.cli import app

    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    runner = CliRunner()
    for args in (["optimize", "nope", "--run-dir", str(tmp_path / "r")], ["status", str(tmp_path)],
                 ["optimize", "softmax", "--policy", "llm"]):
        done = runner.invoke(app, args)
        assert done.exit_code == 2, (args, done.output)
        assert "Traceback" not in done.output


@pytest.mark.slow  # concurrency by default: two islands at once (test_llm_policy)
def test_several_evaluations_run_at_once_with_several_devices(tmp_path: Path, cache_dir: Path) -> None:
    """One evaluation per device at a time; two simulated devices overlap (the CPU stands in for GPUs)."""
    run = tmp_path / "run"
    environment = dict(env(cache_dir), KERNELEVO_PARALLEL="2")
    done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "optimize", "relu", "--size", "small",
                           "--max-evals", "4", "--batch", "4", "--run-dir", str(run)], capture_output=True,
                          text=True, env=environment, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "2 evaluation(s) at once" in done.stderr
    verdicts = [json.loads(line) for line in kernelevo(cache_dir, "trace", str(run), "--json").stdout.splitlines()]
    spans = [(e["started"], e["ts"]) for e in verdicts if e["type"] == "verdict" and e.get("kind") == "search"]
    assert len(spans) == 4
    overlapping = sum(1 for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1])
    assert overlapping >= 1
    assert status(cache_dir, run)["evaluations"] == 4


def test_a_machine_fault_mid_search_interrupts_the_run_and_resume_loses_nothing(
        tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge's environment failing under a search (CUDA kept out of the candidate's sandbox, say:
    EvalError with exit 3) is the machine's fault, not the run's: the run stops as interrupted, says
    why and how to go on, and `resume` finishes it with every verdict it had kept."""
    from kernelevo.agent.budget import Budget
    from kernelevo.agent.runner import RunConfig, create, drive
    from kernelevo.agent.store import RunStore
    from kernelevo.sandbox.judge.evaluate import EvalError, Evaluator
    from kernelevo.sandbox.models import TimingPolicy

    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    run = tmp_path / "run"
    config = RunConfig(task="relu", size="small", policy="builtin", budget=Budget(max_evals=3), batch=1,
                       measure_compile=False, experience=False,
                       timing=TimingPolicy(warmup=1, warmup_s=0, min_runs=5, budget_s=0.1))
    create(config, run).close()
    real, calls = Evaluator.evaluate, []

    def failing_second(self, task, candidate, trace_below_ms=None, compile_afresh=False):  # noqa: ANN001, ANN202
        calls.append(candidate)
        if len(calls) == 2:
            raise EvalError("the harness failed: CUDA did not start in the candidate's sandboxed process", 3)
        return real(self, task, candidate, trace_below_ms, compile_afresh)

    monkeypatch.setattr(Evaluator, "evaluate", failing_second)
    assert drive(run, first=True, progress=None) == 3
    store = RunStore(run)
    assert store.state() == "interrupted" and "kernelevo resume" in store.meta("state_reason")
    kept = store.count_evaluations()
    store.close()
    assert kept == 1
    monkeypatch.setattr(Evaluator, "evaluate", real)
    assert drive(run, first=False, progress=None) == 0
    store = RunStore(run)
    assert store.state() == "finished" and store.count_evaluations() == 3
    store.close()


def test_a_planner_bug_is_kernelevos_not_the_task_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture) -> None:
    """A policy that fails while planning a task it loaded (an IndexError in a template) is kernelevo's
    error (exit 5, the traceback in crash.log, the run left to resume), never reported as an unusable
    task file (exit 2)."""
    from kernelevo.agent.budget import Budget
    from kernelevo.agent.builtin.policy import BuiltinPolicy
    from kernelevo.agent.cli_output import EXIT_INTERNAL
    from kernelevo.agent.crash import CRASH_LOG
    from kernelevo.agent.runner import RunConfig, create, drive
    from kernelevo.agent.store import RunStore

    def broken(self, task):  # noqa: ANN001, ANN202
        raise IndexError("list index out of range")

    monkeypatch.setattr(BuiltinPolicy, "prepare", broken)
    run = tmp_path / "run"
    create(RunConfig(task="relu", size="small", policy="builtin", budget=Budget(max_evals=1), batch=1,
                     measure_compile=False, experience=False), run).close()
    assert drive(run, first=True, progress=None) == EXIT_INTERNAL
    said = capsys.readouterr().err
    assert "kernelevo's own error" in said and "IndexError" in said and str(run / CRASH_LOG) in said
    assert "in broken" in (run / CRASH_LOG).read_text()
    store = RunStore(run)
    assert store.state() == "interrupted"
    store.close()


def test_a_bug_of_kernelevos_mid_search_keeps_the_run_and_says_where_the_traceback_is(
        tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """An exception nobody planned for (a policy's KeyError, say) is kernelevo's bug: exit 5, the run
    interrupted with what it judged kept, the error in one line and the traceback in crash.log; once
    the bug is gone, `resume` finishes the run."""
    from kernelevo.agent.budget import Budget
    from kernelevo.agent.builtin.policy import BuiltinPolicy
    from kernelevo.agent.cli_output import EXIT_INTERNAL
    from kernelevo.agent.crash import CRASH_LOG
    from kernelevo.agent.runner import RunConfig, create, drive
    from kernelevo.agent.store import RunStore
    from kernelevo.sandbox.models import TimingPolicy

    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    run = tmp_path / "run"
    create(RunConfig(task="relu", size="small", policy="builtin", budget=Budget(max_evals=3), batch=1,
                     measure_compile=False, experience=False,
                     timing=TimingPolicy(warmup=1, warmup_s=0, min_runs=5, budget_s=0.1)), run).close()
    real, calls = BuiltinPolicy.propose, []

    def failing_second(self, view, count):  # noqa: ANN001, ANN202
        calls.append(view.generation)
        if len(calls) == 2:
            raise KeyError("BLOCK_N")
        return real(self, view, min(count, 1))

    monkeypatch.setattr(BuiltinPolicy, "propose", failing_second)
    assert drive(run, first=True, progress=None) == EXIT_INTERNAL
    said = capsys.readouterr().err
    assert "KeyError: 'BLOCK_N'" in said and str(run / CRASH_LOG) in said and "Traceback" not in said
    assert "failing_second" in (run / CRASH_LOG).read_text()
    store = RunStore(run)
    assert store.state() == "interrupted" and "kernelevo resume" in store.meta("state_reason")
    assert store.count_evaluations() == 1
    store.close()
    monkeypatch.setattr(BuiltinPolicy, "propose", real)
    assert drive(run, first=False, progress=None) == 0
    store = RunStore(run)
    assert store.state() == "finished" and store.count_evaluations() == 3
    store.close()
