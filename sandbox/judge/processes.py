"""The processes an Evaluator keeps: one oracle per task, alive across its evaluations, and a spare
candidate process, started ahead so that the next evaluation does not wait for Python, torch and
Triton to import. On a GPU the spare starts only between evaluations: a process that imports while
another is timed takes host time from it, which the timed calls and the judge's clock would count
against an honest candidate. On the CPU, where the interpreter's times mean nothing, it starts
while the current evaluation runs.

Both are safe to keep. The oracle never runs candidate code: candidates' outputs reach it only as
files it reads as data, from one folder of outboxes that it may read and each candidate's process
sees only its own part of. A spare candidate process has run nothing of any candidate; it is handed
exactly one, then discarded.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelevo.sandbox.isolation.confinement import LAUNCHER_FOLDER
from kernelevo.sandbox.isolation.namespaces import hand_over, keep_private, remove_tree, write_into
from kernelevo.sandbox.isolation.protocol import Job
from kernelevo.tasks.task import Task

KEPT_ORACLES = 2
"""Oracles kept alive at once (a run judges one task; a model run's end, two)."""
IDLE_S = 24 * 3600.0
"""A kept process's deadline while it waits; a candidate's own timeout starts when it is handed one."""


@dataclass
class Worker:
    """A started candidate process and its folders."""

    job: Job
    folder: Path
    outbox: Path
    cache: Path
    """Its compile cache, the only part of the run's it may write (``compile_caches.py``)."""
    trace: Path | None = None
    """Where the launcher (ncu) writes what the candidate's process may not (the kernel trace)."""


@dataclass
class Oracle:
    job: Job
    folder: Path
    outbox: Path
    key: tuple


class Processes:
    """Oracles by task and one spare worker, for one Evaluator (``ev``)."""

    def __init__(self, ev: Any) -> None:
        self.ev = ev
        self.outboxes = ev.workspace / "outboxes"
        # Ours, passable by all and listable by none: each candidate process writes only the outbox
        # handed to it inside, and cannot rename, replace or add outboxes. Where jobs share the host's
        # file system and one user (no bubblewrap), an outbox is named at random, so a candidate cannot
        # find the spare process's outbox (made before its candidate is) to plant files or links in.
        keep_private(self.outboxes, 0o711)
        self._oracles: dict[tuple, Oracle] = {}
        self._spare: Worker | None = None
        self._traced: tuple[tuple, Worker] | None = None
        """A spare process started under a launcher (ncu) ahead of the forensic pass, with its key."""
        self._count = 0

    def close(self) -> None:
        for oracle in self._oracles.values():
            _end(oracle.job)
        self._oracles.clear()
        if self._spare is not None:
            _discard(self._spare)
            self._spare = None
        if self._traced is not None:
            _discard(self._traced[1])
            self._traced = None

    # oracles ----------------------------------------------------------------------------------
    def oracle(self, task: Task, readable: list[Path]) -> Oracle:
        """The task's oracle (started, with its own copy of the task file), reused while it lives."""
        key = (task.sha256, task.size, task.dtype, tuple(str(p) for p in readable))
        found = self._oracles.get(key)
        if found is not None and found.job.alive():
            self._oracles[key] = self._oracles.pop(key)  # the most recently used goes last
            return found
        if found is not None:
            self.drop_oracle(found)
        while len(self._oracles) >= KEPT_ORACLES:  # the least recently used goes
            self.drop_oracle(next(iter(self._oracles.values())))
        folder = self.ev.job_dir("oracle")
        outbox = folder / "out"
        outbox.mkdir(parents=True, exist_ok=True)
        write_into(folder, "task.py", task.path.read_bytes())
        spec = self.ev.spec("kernelevo.sandbox.judge.oracle", folder, IDLE_S, trusted=True,
                            readable=[self.outboxes, *readable])
        oracle = Oracle(job=self.ev.sandbox.start(spec), folder=folder, outbox=outbox, key=key)
        self._oracles[key] = oracle
        return oracle

    def drop_oracle(self, oracle: Oracle) -> Any:
        """An oracle that failed is not reused; returns how it ended."""
        self._oracles.pop(oracle.key, None)
        return _end(oracle.job)

    # candidate processes ----------------------------------------------------------------------
    def warm(self) -> None:
        """Start the spare candidate process now, unless one is alive."""
        if self._spare is None or not self._spare.job.alive():
            if self._spare is not None:
                _discard(self._spare)
            self._spare = self._start([], None)

    def warm_traced(self, readable: list[Path], launcher: Callable[[Path], list[str]]) -> None:
        """Start a spare process under ``launcher`` now, for a forensic pass that may follow: ncu and the
        process's imports are then done before that pass begins (they hold no GPU)."""
        key = _traced_key(readable, launcher)
        if self._traced is not None and self._traced[0] == key and self._traced[1].job.alive():
            return
        if self._traced is not None:
            _discard(self._traced[1])
        self._traced = (key, self._start(readable, launcher))

    def worker(self, readable: list[Path], launcher: Callable[[Path], list[str]] | None = None) -> Worker:
        """A candidate process for one evaluation: the spare when it suits, else a new one; on the CPU a
        new spare is started at once for the next evaluation (on a GPU, :meth:`warm` after it). Under a
        launcher, the spare :meth:`warm_traced` started when it was started for the same folders."""
        worker = None
        if launcher is not None and self._traced is not None:
            key, traced = self._traced
            self._traced = None
            if key == _traced_key(readable, launcher) and traced.job.alive():
                worker = traced
            else:
                _discard(traced)
        if launcher is None and not readable and self._spare is not None and self._spare.job.alive():
            worker, self._spare = self._spare, None
        elif self._spare is not None and not self._spare.job.alive():
            _discard(self._spare)
            self._spare = None
        if worker is None:
            worker = self._start(readable, launcher)
        if launcher is None and self._spare is None and self.ev.device == "cpu":
            self._spare = self._start([], None)
        worker.job.set_deadline(self.ev.config.timeout_s * (2 if launcher else 1))
        return worker

    def _start(self, readable: list[Path], launcher: Callable[[Path], list[str]] | None) -> Worker:
        """A new candidate process; under ``launcher`` (ncu, given the folder for its trace), that folder
        is the launcher's alone: the candidate's process is confined away from it."""
        self._count += 1
        folder = self.ev.job_dir("worker")
        name = f"{self._count:04d}-{secrets.token_hex(8)}"
        outbox = self.outboxes / name
        hand_over(outbox)
        trace = self.outboxes / f"{name}-trace" if launcher else None
        cache = self.ev.caches.scratch()
        spec = self.ev.spec("kernelevo.sandbox.child.worker", folder, IDLE_S, trusted=False, readable=readable,
                            extra_writable=[outbox], folder_writable=False, compile_cache=cache)
        if trace is not None:
            spec.launcher, spec.launcher_folder = launcher(Path(LAUNCHER_FOLDER)), trace
        return Worker(job=self.ev.sandbox.start(spec), folder=folder, outbox=outbox, cache=cache, trace=trace)


def _traced_key(readable: list[Path], launcher: Callable[[Path], list[str]]) -> tuple:
    return tuple(str(p) for p in readable), tuple(launcher(Path(LAUNCHER_FOLDER)))


def _discard(worker: Worker) -> None:
    """End a candidate process that was never handed a candidate, and remove its compile cache."""
    _end(worker.job)
    remove_tree(worker.cache)


def _end(job: Job) -> Any:
    """Kill and reap ``job``: its outcome (None if it cannot be had)."""
    try:
        if job.alive():
            job.kill()
        return job.wait(10)
    except Exception:  # a process already gone: nothing to end
        return None
