"""The trust boundary as the layout draws it: what runs in the candidate's process imports nothing of
the trusted side, and the run-time half of an exported ``optimize(model)`` imports no agent machinery."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, candidate
from kernelevo.tasks import load_task

TRUSTED = ("kernelevo.sandbox.judge", "kernelevo.sandbox.isolation", "kernelevo.sandbox.advice", "kernelevo.agent",
           "kernelevo.tools")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_code_of_the_candidates_process_imports_nothing_of_the_trusted_side() -> None:
    child = sorted((ROOT / "sandbox" / "child").glob("*.py")) + [ROOT / "sandbox" / "wire.py", ROOT / "sandbox" / "tensor_files.py"]
    assert len(child) >= 8
    for path in child:
        bad = [m for m in _imports(path) if m.startswith(TRUSTED)]
        assert not bad, f"{path.name} imports {bad}"


@pytest.fixture(scope="module")
def relu_record(evaluator):  # noqa: ANN201 - a judging session's Record
    source = candidate("ok_relu_empty")
    return evaluator._session(load_task("relu", "small"), source, evaluator.caches.name_for(source.read_bytes()))


def test_the_candidates_process_loaded_nothing_of_the_trusted_side(relu_record) -> None:
    """What the worker itself reports at the end of a real judgement (it could lie only to look clean,
    and an honest candidate has no reason to)."""
    record = relu_record
    assert record.ok, [c for c in record.checks if not c.passed]
    assert "kernelevo.sandbox.child.worker" in record.worker_modules or record.worker_modules
    assert not [m for m in record.worker_modules if m.startswith(TRUSTED)], record.worker_modules


def test_an_exported_optimize_imports_neither_langgraph_nor_langchain(tmp_path: Path) -> None:
    from kernelevo.agent.model.export import TEMPLATE

    exported = tmp_path / "optimized.py"
    exported.write_text(TEMPLATE.format(title="tiny", stem="optimized", run="r", created="today", device="cpu",
                                        summary="none", spec=repr({"regions": [], "kernels": [], "model_inputs": []})))
    script = (
        "import importlib.util, sys, torch\n"
        f"spec = importlib.util.spec_from_file_location('optimized', {str(exported)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
        "fast = module.optimize(model, [torch.randn(2, 4)])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain', 'langchain_core',"
        " 'langchain_openai', 'openai'))\n"
        "print('HEAVY', heavy)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "HEAVY []" in done.stdout, done.stdout


def test_nothing_in_a_candidates_outbox_outlives_its_session(relu_record) -> None:
    """At a task's real sizes one output file can be gigabytes, and a hostile process may fill its
    outbox to fill the disk for the verdicts after its own: the outbox goes when its session ends
    (each output file, before that, once compared: ``test_judge``)."""
    assert relu_record.ok
    outbox = relu_record.worker_outbox
    assert outbox is not None and not outbox.exists()


def test_the_builtin_runner_does_not_load_the_model_client() -> None:
    """Every CLI start of a run imports the runner: the OpenAI client (about a second) is loaded only
    when the llm policy is built."""
    script = ("import sys, kernelevo.agent.runner, kernelevo.agent.cli_runs\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'langchain_openai')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
