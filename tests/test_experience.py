"""The experience library without a run: task signatures, similarity, the file, and its commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernelevo.agent.experience import (
    IN_PROMPT,
    SAME_TASK,
    Entry,
    Library,
    Signature,
    entry_id,
    reference_hash,
    reference_ops,
    signature_of,
    similarity,
)
from kernelevo.tasks import load_task

SOFTMAX = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.softmax(self.proj(x).relu(), dim=-1)

def get_inputs():
    return [torch.randn(8, 64)]

def get_init_inputs():
    return [64]
'''


def entry(task: str, ops: list[str], inputs: list[str], ms: float, source: str = "class ModelNew: ...",
          notes: list[str] | None = None) -> Entry:
    signature = Signature(ops=ops, inputs=inputs, device="cpu")
    return Entry(id=entry_id(source + task, signature), task=task, signature=signature, source=source,
                 runtime_ms=ms, speedup=2.0, device="cpu", notes=notes or [])


def test_a_signature_names_the_work_not_the_glue(tmp_path: Path) -> None:
    assert reference_ops(SOFTMAX) == ["Linear", "relu", "softmax"]
    assert reference_ops("def broken(:") == []
    path = tmp_path / "task.py"
    path.write_text(SOFTMAX)
    signature = signature_of(load_task(str(path), "full"), "cpu", ["float32[8, 64]"])
    assert signature.inputs == ["float32[8, 64]"] and signature.ops == ["Linear", "relu", "softmax"]
    # the same code laid out differently is the same reference; another dim is not
    assert reference_hash(SOFTMAX) == reference_hash(SOFTMAX.replace("dim=-1", "dim = -1") + "\n# a comment\n")
    assert reference_hash(SOFTMAX) != reference_hash(SOFTMAX.replace("dim=-1", "dim=0"))


def test_similarity_ranks_the_same_task_above_its_kind_and_its_kind_above_others() -> None:
    a = Signature(ops=["relu"], inputs=["float32[4096, 4096]"], device="cpu")
    same = similarity(a, a)
    resized = similarity(a, Signature(ops=["relu"], inputs=["float32[1024, 1024]"], device="cpu"))
    other = similarity(a, Signature(ops=["softmax", "exp"], inputs=["float32[4096, 4096]"], device="cpu"))
    assert same == 1.0 and same >= SAME_TASK > resized >= IN_PROMPT > other


def test_the_library_keeps_finds_and_forgets(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    with Library(path) as lib:
        relu = entry("relu", ["relu"], ["float32[64]"], 2.0, notes=["wide blocks"])
        lib.add(relu)
        lib.add(relu.model_copy(update={"runtime_ms": 3.0, "notes": ["later note"]}))  # slower: the notes join
        lib.add(entry("softmax", ["softmax"], ["float32[8, 64]"], 1.0))
        assert [e.task for e in lib.entries()] == ["relu", "softmax"] and lib.get(relu.id[:8]).runtime_ms == 2.0
        assert lib.get(relu.id[:8]).notes == ["wide blocks", "later note"]
        assert lib.get("%") is None and lib.get("") is None and lib.forget("%") == 0  # ids, not patterns
        found = lib.nearest(Signature(ops=["relu"], inputs=["float32[64]"], device="cpu"))
        assert [e.task for e in found] == ["relu"] and found[0].similarity == 1.0
        assert lib.forget(relu.id[:8]) == 1 and lib.forget("ffff") == 0
        assert lib.forget(None) == 1 and lib.entries() == []


def test_the_experience_commands(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    kept = entry("relu", ["relu"], ["float32[64]"], 2.0, source="class ModelNew:\n    pass\n", notes=["a note"])
    with Library(path) as lib:
        lib.add(kept)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "experience", *args, "--library",
                               str(path)], capture_output=True, text=True, timeout=120)

    listed = [json.loads(line) for line in cli("list", "--json").stdout.splitlines()]
    assert [e["id"] for e in listed] == [kept.id] and "source" not in listed[0]
    shown = cli("show", kept.id[:6]).stdout
    assert "note: a note" in shown and "class ModelNew:" in shown and "float32[64]" in shown
    assert cli("show", "0000").returncode == 2
    assert cli("forget").returncode == 2  # an id or --all
    assert cli("forget", kept.id[:6]).returncode == 0 and cli("list", "--json").stdout == ""
    path.write_bytes(b"not a database at all" * 100)  # a damaged file: a clear error, no traceback
    damaged = cli("list")
    assert damaged.returncode == 2 and "cannot be read as an experience library" in damaged.stderr
    assert "Traceback" not in damaged.stderr
