"""Every template the built-in policy renders is judged correct by the harness (CPU interpreter),
on odd sizes and in fp32 and bf16."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ON_GPU
from kernelevo.agent.builtin.recognize import recognise
from kernelevo.agent.builtin.templates import render
from kernelevo.tasks import load_task

TASK = '''import torch
import torch.nn as nn
{dtype_line}

class Model(nn.Module):
    def forward(self, x):
        return {expr}

def get_inputs():
    return [torch.randn({shape})]

def get_init_inputs():
    return []
'''

CASES = [
    ("torch.softmax(x, dim=-1)", "3, 4097", "", "online", {"BLOCK": 1024, "num_warps": 4}),
    ("torch.softmax(x, dim=-1)", "2, 3, 1000", "", "registers", {"num_warps": 4}),
    ("torch.log_softmax(x, dim=-1)", "5, 1000", "", "online", {"BLOCK": 256, "num_warps": 2}),
    ("torch.log_softmax(x, dim=-1)", "5, 1000", "DTYPE = torch.bfloat16", "registers", {"num_warps": 4}),
    ("torch.sum(x, dim=-1)", "6, 4097", "", "blocked-reduce", {"BLOCK": 1024, "num_warps": 4}),
    ("torch.amax(x, dim=-1)", "6, 1000", "DTYPE = torch.bfloat16", "blocked-reduce", {"BLOCK": 512, "num_warps": 4}),
    ("torch.relu(x)", "4097", "", "blocked", {"BLOCK": 1024, "num_warps": 4}),
    ("torch.sigmoid(x)", "3, 1000", "DTYPE = torch.bfloat16", "persistent", {"BLOCK": 512, "num_warps": 4, "programs": 3}),
    ("torch.nn.functional.gelu(x)", "1000", "", "blocked", {"BLOCK": 256, "num_warps": 2}),
    ("torch.tanh(x)", "1000", "", "persistent", {"BLOCK": 256, "num_warps": 2, "programs": 2}),
]


@pytest.mark.parametrize(("expr", "shape", "dtype_line", "strategy", "params"), CASES,
                         ids=[f"{c[0].split('(')[0]}-{c[3]}-{c[1]}" for c in CASES])
def test_templates_are_correct(evaluator, tmp_path: Path, expr: str, shape: str, dtype_line: str, strategy: str,
                               params: dict) -> None:
    task_path = tmp_path / "task.py"
    task_path.write_text(TASK.format(expr=expr, shape=shape, dtype_line=dtype_line))
    task = load_task(str(task_path), "full")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(render(recognise(task), strategy, params, "test"))
    verdict, code = evaluator.evaluate(task, candidate)
    assert code == 0, verdict.reason
    if not ON_GPU:
        assert verdict.timing == "cpu-interpreter"
