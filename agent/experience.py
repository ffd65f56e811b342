"""The experience library: verified kernels from earlier runs, kept per user, found again by task.

One SQLite file (``experience.sqlite`` in the cache folder unless a run names another). A run adds
its final best when it ends, and only that: a kernel the harness re-judged with fresh secret seeds
and found correct, with its times, its task's signature and the reflection notes the run wrote on
the way. Nothing a model merely claimed is kept. A later run on a similar task reads the nearest
entries back: into the model's prompt (source, times, notes) and, for the same task signature, as a
first candidate that the harness judges like any other.

A task's signature: the operations its reference names (``relu``, ``softmax``, ``Conv2d``, ``matmul``:
calls and modules in its source), its inputs' shapes and dtypes (as the baseline, measured in the
oracle, describes them), the device, and a hash of the reference's code. Similarity mixes the first
three; only an entry of the very same reference is a seed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from kernelevo.sandbox.judge.cache import default_cache_dir
from kernelevo.tasks.task import Task

FILE_NAME = "experience.sqlite"
GENERIC_NAMES = frozenset({
    "size", "shape", "view", "reshape", "contiguous", "to", "float", "half", "cuda", "cpu", "dim", "numel",
    "super", "__init__", "forward", "get_inputs", "get_init_inputs", "Module", "Parameter", "tensor", "randn",
    "rand", "zeros", "ones", "empty", "arange", "manual_seed", "append", "range", "len", "int", "list", "tuple",
    "isinstance", "print", "format", "item", "type", "clone", "detach", "unsqueeze", "squeeze", "permute",
    "transpose", "expand", "flatten", "no_grad", "device", "dtype", "randint", "ModuleList", "Sequential"})
"""Names in a reference that say nothing about the work it does."""
SAME_TASK = 0.95
"""At or above this similarity an entry is a seed (its source judged as a first candidate)."""
IN_PROMPT = 0.5
"""At or above this similarity an entry is shown to the model."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id TEXT PRIMARY KEY, task TEXT, signature TEXT, source TEXT, runtime_ms REAL, speedup REAL,
    vs_compile REAL, device TEXT, notes TEXT, run_dir TEXT, created REAL);
"""


class Signature(BaseModel):
    ops: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)
    """Each input as ``dtype[shape]`` (a scalar as its Python type)."""
    device: str = "cpu"
    reference: str = ""
    """A hash of the reference's code (its syntax tree: comments and layout aside). Only an entry of the
    same reference is a seed; tasks that differ in a ``dim=`` or a constant share ops and shapes."""


class Entry(BaseModel):
    id: str
    task: str
    signature: Signature
    source: str
    runtime_ms: float
    speedup: float | None = None
    vs_compile: float | None = None
    device: str
    notes: list[str] = Field(default_factory=list)
    run_dir: str = ""
    created: float = 0.0
    similarity: float | None = None


def reference_ops(source: str) -> list[str]:
    """The operations a reference's source names: called functions and methods, and module classes,
    less the generic ones (shapes, construction, Python built-ins)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                continue  # a submodule's call (self.proj(x)): its class is named where it is built
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name and name not in GENERIC_NAMES and not name.startswith("_"):
                names.add(name)
    return sorted(names)


def reference_hash(source: str) -> str:
    try:
        text = ast.dump(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        text = source
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def signature_of(task: Task, device: str, inputs: list[str]) -> Signature:
    """``inputs``: the baseline's description of the task's inputs (measured in the oracle: the task's
    file never runs in this process)."""
    source = task.path.read_text()
    return Signature(ops=reference_ops(source), inputs=list(inputs), device=device, reference=reference_hash(source))


def is_seed(entry: Entry, signature: Signature) -> bool:
    """The kernel of this very task: the same reference code and inputs, on the same device."""
    return ((entry.similarity or 0.0) >= SAME_TASK and entry.signature.reference == signature.reference
            and bool(signature.reference))


def similarity(a: Signature, b: Signature) -> float:
    """0 to 1: mostly the overlap of the operations named, then the inputs, then the device."""
    ops_a, ops_b = set(a.ops), set(b.ops)
    ops = len(ops_a & ops_b) / len(ops_a | ops_b) if ops_a | ops_b else 0.0
    if a.inputs == b.inputs:
        inputs = 1.0
    else:  # same count, dtypes and ranks: the same kind of problem at another size
        kinds = [(i.split("[")[0], i.count(",")) for i in a.inputs], [(i.split("[")[0], i.count(",")) for i in b.inputs]
        inputs = 0.5 if kinds[0] == kinds[1] else 0.0
    return round(0.7 * ops + 0.2 * inputs + 0.1 * (a.device == b.device), 4)


def entry_id(source: str, signature: Signature) -> str:
    """The same kernel for the same kind of task is one entry."""
    return hashlib.sha256((source + signature.model_dump_json()).encode()).hexdigest()[:16]


def keep_final(path: Path, task: Task, store: Any, device: str, inputs: list[str],
               final: dict[str, Any]) -> Entry | None:
    """Add a finished run's best to the library: only a kernel the final re-judge found correct."""
    verdict = store.evaluation(final["id"], "final")
    if verdict is None or not verdict.correct or verdict.runtime_ms is None:
        return None
    source = store.source_path(final["id"]).read_text()
    signature = signature_of(task, device, inputs)
    entry = Entry(id=entry_id(source, signature), task=task.name, signature=signature, source=source,
                  runtime_ms=verdict.runtime_ms, speedup=verdict.speedup, vs_compile=verdict.speedup_vs_compile,
                  device=device, notes=list(store.meta("notes", []))[-6:], run_dir=str(store.dir), created=time.time())
    with Library(path) as library:
        library.add(entry)
    return entry


def default_path() -> Path:
    return default_cache_dir() / FILE_NAME


class Library:
    """One experience file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, entry: Entry) -> None:
        """Keep ``entry`` (a verified kernel). The same kernel for the same task again keeps the faster
        of the two times and the notes of both."""
        old = self.get(entry.id)
        if old is not None:
            faster = entry if entry.runtime_ms < old.runtime_ms else old
            notes = old.notes + [n for n in entry.notes if n not in old.notes]
            entry = faster.model_copy(update={"notes": notes[-12:], "created": max(old.created, entry.created)})
        self.db.execute(
            "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry.id, entry.task, entry.signature.model_dump_json(), entry.source, entry.runtime_ms,
             entry.speedup, entry.vs_compile, entry.device, json.dumps(entry.notes), entry.run_dir,
             entry.created or time.time()))

    def entries(self) -> list[Entry]:
        rows = self.db.execute("SELECT * FROM entries ORDER BY created").fetchall()
        return [self._entry(row) for row in rows]

    def get(self, prefix: str) -> Entry | None:
        """The entry whose id starts with ``prefix`` (None if none; a ValueError if several)."""
        rows = self.db.execute("SELECT * FROM entries WHERE substr(id, 1, ?) = ?", (len(prefix), prefix)).fetchall()
        if not prefix:
            rows = []
        if len(rows) > 1:
            raise ValueError(f"{prefix!r} names {len(rows)} entries; give more of the id")
        return self._entry(rows[0]) if rows else None

    def forget(self, prefix: str | None) -> int:
        """Remove the entry ``prefix`` names, or every entry (None); returns how many went."""
        if prefix is None:
            return self.db.execute("DELETE FROM entries").rowcount
        entry = self.get(prefix)
        return self.db.execute("DELETE FROM entries WHERE id = ?", (entry.id,)).rowcount if entry else 0

    def nearest(self, signature: Signature, k: int = 3, least: float = IN_PROMPT) -> list[Entry]:
        """Up to ``k`` entries at least ``least`` similar to ``signature``, most similar (then fastest
        relative to their reference) first."""
        scored = []
        for entry in self.entries():
            entry.similarity = similarity(signature, entry.signature)
            if entry.similarity >= least:
                scored.append(entry)
        scored.sort(key=lambda e: (-(e.similarity or 0.0), -(e.speedup or 0.0)))
        return scored[:k]

    @staticmethod
    def _entry(row: tuple[Any, ...]) -> Entry:
        keys = ("id", "task", "signature", "source", "runtime_ms", "speedup", "vs_compile", "device", "notes",
                "run_dir", "created")
        data = dict(zip(keys, row))
        data["signature"] = Signature.model_validate_json(data["signature"])
        data["notes"] = json.loads(data["notes"] or "[]")
        return Entry.model_validate(data)
