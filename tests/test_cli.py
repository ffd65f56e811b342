"""The command-line contract: --json shape, exit codes, readable errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ON_GPU, ROOT, candidate

FIELDS = {"compiled", "correct", "reason", "checks", "runtime_ms", "reference_runtime_ms", "compile_runtime_ms",
          "speedup", "speedup_vs_compile", "timing", "device", "isolation", "assurance", "log"}


def kernelevo(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERNELEVO_CACHE=str(cache))
    return subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)


@pytest.mark.slow  # --json's eval is also run by the Docker fallback test
def test_eval_json_accepts_the_shipped_softmax(cache_dir: Path) -> None:
    done = kernelevo("eval", "softmax", "tasks/examples/softmax_triton.py", "--json", "--size", "small",
                     "--no-compile-baseline", "--cuda-graph", cache=cache_dir)
    assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)  # exactly one JSON object on stdout
    assert FIELDS <= set(verdict)
    assert verdict["correct"] and verdict["compiled"] and verdict["reason"] is None
    assert verdict["assurance"]  # how far the verdict can be trusted, in words
    assert all({"name", "passed", "detail"} <= set(c) for c in verdict["checks"])
    if not ON_GPU:
        assert verdict["timing"] == "cpu-interpreter" and verdict["speedup"] is None
        assert verdict["runtime_ms"] > 0
        assert verdict["graph_note"] == "CUDA graphs need a GPU: not timed" and verdict["graph_runtime_ms"] is None
    else:  # --cuda-graph: the replay's time beside the plain one
        assert verdict["graph_runtime_ms"] > 0 and verdict["runtime_ms"] > 0


@pytest.mark.slow  # strides are compared in test_compare.py; this is the flag's way to the judge
def test_strict_layout_refuses_a_transposed_view_and_says_how_sure(cache_dir: Path) -> None:
    """--strict-layout reaches the judge (a .T view of the right values is refused for its strides),
    and the printed verdict says how far its assurance goes."""
    done = kernelevo("eval", "softmax", str(candidate("ok_transposed_view")), "--size", "small",
                     "--no-compile-baseline", "--strict-layout", cache=cache_dir)
    assert done.returncode == 1, done.stderr
    assert "strides" in done.stdout and "REJECTED" in done.stdout
    assert "the candidate process's log:" in done.stdout


def test_eval_rejection_exits_1_with_a_reason(cache_dir: Path) -> None:
    done = kernelevo("eval", "relu", str(candidate("bad_input_mutation")), "--size", "small", cache=cache_dir)
    assert done.returncode == 1
    assert "REJECTED" in done.stdout and "inputs unchanged" in done.stdout


@pytest.mark.parametrize(("args", "words"), [
    (["eval", "no_such_task", "x.py"], "unknown task"),
    (["eval", "softmax", "missing_candidate.py", "--size", "small"], "candidate file not found"),
    (["eval", "softmax", "tasks/examples/softmax_triton.py", "--memory", "lots"], "size"),
    (["eval", "softmax"], "Missing argument"),
    (["eval", "softmax", "x.py", "--sandbox", "vm"], "Invalid value"),
])
def test_bad_usage_exits_2_without_a_traceback(cache_dir: Path, args: list[str], words: str) -> None:
    done = kernelevo(*args, cache=cache_dir)
    assert done.returncode == 2
    assert words in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_bad_usage_with_json_still_prints_one_object(cache_dir: Path) -> None:
    done = kernelevo("eval", "no_such_task", "x.py", "--json", cache=cache_dir)
    assert done.returncode == 2 and "error" in json.loads(done.stdout)


def test_malformed_task_file_exits_2(tmp_path: Path, cache_dir: Path) -> None:
    task = tmp_path / "broken.py"
    task.write_text("import torch\nclass Model: pass\n")
    done = kernelevo("eval", str(task), "tasks/examples/softmax_triton.py", cache=cache_dir)
    assert done.returncode == 2 and "get_inputs" in done.stderr and "Traceback" not in done.stderr


def test_a_reference_that_fails_is_a_clear_input_error(tmp_path: Path, cache_dir: Path) -> None:
    task = tmp_path / "nan_task.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return torch.log(x - 100)\n\ndef get_inputs():\n    return [torch.rand(8)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    done = kernelevo("eval", str(task), str(candidate("ok_relu_empty")), "--size", "small", cache=cache_dir)
    assert done.returncode == 2 and "not finite" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(ON_GPU, reason="on a GPU the CUDA candidate is judged instead")
def test_cuda_candidate_without_gpu_passes_the_compile_gate_and_exits_3(cache_dir: Path) -> None:
    done = kernelevo("eval", "relu", str(candidate("ok_cuda_relu")), "--json", "--size", "small", cache=cache_dir)
    verdict = json.loads(done.stdout)
    assert done.returncode == 3, verdict["reason"]
    gate = next(c for c in verdict["checks"] if c["name"] == "cuda compile gate")
    assert gate["passed"] and "registers" in gate["detail"]
    assert "need a GPU" in verdict["reason"]


def test_tasks_and_doctor(cache_dir: Path) -> None:
    tasks = kernelevo("tasks", "--json", cache=cache_dir)
    assert tasks.returncode == 0 and len(json.loads(tasks.stdout)) >= 12
    doctor = kernelevo("doctor", "--json", cache=cache_dir)
    items = {p["item"]: p for p in json.loads(doctor.stdout)}
    assert {"GPU", "driver", "CUDA", "nvcc", "ncu", "Triton", "Docker engine", "isolation", "writes"} <= set(items)
    assert items["GPU"]["available"] == ON_GPU
    from kernelevo.sandbox.child import confine
    from kernelevo.sandbox.isolation import confinement

    assert items["writes"]["available"] == (confine.abi_version() > 0 and confinement.wanted())


def test_help_teaches() -> None:
    done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "eval", "--help"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0 and "Examples" in done.stdout and "--memory" in done.stdout


def test_words_a_candidate_wrote_are_printed_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """A verdict's reason and details carry a candidate's own text (an exception's message): Rich markup
    in it must neither end the command (``[/judge]``) nor dress a rejection up (``[green]ACCEPTED``)."""
    from rich.console import Console

    from kernelevo.agent import cli_judge
    from kernelevo.sandbox.models import Check, Verdict

    console = Console(record=True, width=200)
    monkeypatch.setattr(cli_judge, "out", console)
    words = "ValueError: [/judge] [green]ACCEPTED[/green]"
    verdict = Verdict(task="relu", candidate="[bold]c.py", size="small", compiled=True, correct=False,
                      reason=f"correct: set 0: {words}", checks=[Check(name="correct: set 0", passed=False,
                                                                          detail=words)], device="cpu", isolation={})
    cli_judge._print_verdict(verdict)
    text = console.export_text()
    assert text.count("[/judge] [green]ACCEPTED[/green]") == 2 and "[bold]c.py" in text, text


def test_an_unplanned_error_in_any_command_is_one_line_and_a_crash_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """kernelevo's own error is exit 5, a full disk exit 3 (the machine's); both in one line, never a
    traceback, with the traceback kept under the cache folder."""
    import errno

    from kernelevo.agent import cli

    monkeypatch.setenv("KERNELEVO_CACHE", str(tmp_path))

    def raised(exc: Exception) -> Exception:
        try:
            raise exc
        except Exception as caught:  # noqa: BLE001 - a raised exception, with its traceback
            return caught

    assert cli._unplanned(raised(RuntimeError("the planner\nbroke"))) == 5
    said = capsys.readouterr().err
    assert "RuntimeError: the planner broke" in said and "bug in kernelevo" in said and "Traceback" not in said
    assert cli._unplanned(raised(OSError(errno.ENOSPC, "No space left on device"))) == 3
    said = capsys.readouterr().err
    assert "the machine" in said and "free the disk" in said
    logs = sorted((tmp_path / "crashes").glob("*/crash.log"))
    assert len(logs) >= 1 and "RuntimeError" in "".join(log.read_text() for log in logs)


def test_a_candidates_terminal_controls_never_reach_the_terminal(tmp_path: Path) -> None:
    """A candidate's error text may carry escape sequences (clear the screen, set the title, a green
    "ACCEPTED"): shown, they are codes, not controls; line breaks and tabs stay."""
    from kernelevo.agent.cli_output import plain, printable

    hostile = "boom\x1b[2J\x1b]0;title\x07\x1b[32mACCEPTED\x9b\nnext\tline"
    shown = printable(hostile)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert shown == "boom\\x1b[2J\\x1b]0;title\\x07\\x1b[32mACCEPTED\\x9b\nnext\tline"
    assert "\x1b" not in plain(hostile)
    bad = tmp_path / "bad.py"  # a kernel that runs, then an error with controls in its words
    source = (ROOT / "tests" / "candidates" / "bad_unencodable_error.py").read_text()
    bad.write_text(source.replace('"unencodable " + chr(0xD800) + " message"', '"\\x1b[2J\\x1b[32mACCEPTED"'))
    done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "eval", "relu", str(bad), "--sandbox",
                           "process"], capture_output=True, text=True, timeout=300)
    shown = done.stdout + done.stderr
    assert done.returncode == 1 and "\\x1b[32mACCEPTED" in shown and "\x1b" not in shown, shown[-800:]
