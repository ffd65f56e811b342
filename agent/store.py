"""The run folder: one SQLite database and content-addressed files.

``run.sqlite`` holds LangGraph's checkpoints (its own tables) and ours: ``meta`` (the run's
configuration and state), ``candidates`` (id = SHA-256 of the source, parent, strategy),
``evaluations`` (one verdict per candidate and kind: ``search`` or ``final``) and ``events`` (the
reasoning trace). Sources live in ``candidates/<id>.py``; verdicts and events hold ids and metrics.
A write is committed at once, so a ``kill -9`` loses nothing that was recorded.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from kernelevo.sandbox.models import Verdict

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    id TEXT PRIMARY KEY, parent TEXT, strategy TEXT NOT NULL, cell TEXT NOT NULL, note TEXT,
    generation INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (
    candidate TEXT NOT NULL, kind TEXT NOT NULL, correct INTEGER NOT NULL, runtime_ms REAL, speedup REAL,
    reason TEXT, verdict TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (candidate, kind));
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, type TEXT NOT NULL, candidate TEXT, data TEXT NOT NULL);
"""

STATES = ("running", "interrupted", "finished", "failed")


def source_id(source: str) -> str:
    """Content address of a candidate: duplicates share an id."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class RunStore:
    """Read and write one run folder. Safe to share between the graph's worker threads."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self.db_path = run_dir / "run.sqlite"
        (run_dir / "candidates").mkdir(parents=True, exist_ok=True)
        # one connection shared by the islands' threads: sqlite3 refuses a statement on a connection
        # that another thread is stepping through ("bad parameter or other API misuse"), so every
        # statement, reads included, runs under this lock
        self._lock = threading.RLock()
        self.db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        self._lock_file: Any = None

    def close(self) -> None:
        self.release()
        with self._lock:
            self.db.close()

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        with self._lock:
            return self.db.execute(sql, params).fetchone()

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.db.execute(sql, params).fetchall()

    # the run's own lock: held by the process working on it --------------------------------------
    def acquire(self) -> bool:
        """Take the run's lock; False if another process holds it."""
        handle = open(self.dir / "lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle
        return True

    def release(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    def held_elsewhere(self) -> bool:
        """Whether some other process holds the run's lock (i.e. is working on the run)."""
        path = self.dir / "lock"
        if not path.exists():
            return False
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False

    # meta -------------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default: Any = None) -> Any:
        row = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(row[0]) if row else default

    def set_state(self, state: str, reason: str | None = None) -> None:
        assert state in STATES
        self.set_meta("state", state)
        self.set_meta("state_reason", reason)

    def state(self) -> str:
        """The run's state; a run marked running whose process is gone reads as interrupted."""
        state = self.meta("state", "interrupted")
        if state == "running" and not self.held_elsewhere() and self._lock_file is None:
            return "interrupted"
        return state

    # candidates and evaluations ---------------------------------------------------------------
    def add_candidate(self, source: str, parent: str | None, strategy: str, cell: str, note: str,
                      generation: int) -> tuple[str, bool]:
        """Store a candidate's source; returns (id, new) where ``new`` is False for a duplicate."""
        cid = source_id(source)
        path = self.dir / "candidates" / f"{cid}.py"
        with self._lock:
            exists = self.db.execute("SELECT 1 FROM candidates WHERE id = ?", (cid,)).fetchone()
            if exists:
                return cid, False
            tmp = path.with_suffix(".tmp")
            tmp.write_text(source)
            tmp.replace(path)
            self.db.execute("INSERT INTO candidates VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (cid, parent, strategy, cell, note, generation, time.time()))
        return cid, True

    def source_path(self, cid: str) -> Path:
        return self.dir / "candidates" / f"{cid}.py"

    def candidate(self, cid: str) -> dict[str, Any] | None:
        row = self._one("SELECT id, parent, strategy, cell, note, generation FROM candidates WHERE id = ?",
                        (cid,))
        if row is None:
            return None
        return dict(zip(("id", "parent", "strategy", "cell", "note", "generation"), row))

    def record_evaluation(self, cid: str, kind: str, verdict: Verdict) -> None:
        with self._lock:
            self.db.execute(
                "INSERT OR REPLACE INTO evaluations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, kind, int(verdict.correct), verdict.runtime_ms, verdict.speedup, verdict.reason,
                 verdict.model_dump_json(), time.time()))

    def evaluation(self, cid: str, kind: str = "search") -> Verdict | None:
        row = self._one("SELECT verdict FROM evaluations WHERE candidate = ? AND kind = ?", (cid, kind))
        return Verdict.model_validate_json(row[0]) if row else None

    def fastest_runtimes(self, n: int, kind: str = "search") -> list[float]:
        """The ``n`` fastest times of correct verdicts of ``kind``, fastest first."""
        rows = self._all("SELECT runtime_ms FROM evaluations WHERE kind = ? AND correct = 1 AND runtime_ms "
                         "IS NOT NULL ORDER BY runtime_ms LIMIT ?", (kind, n))
        return [float(r[0]) for r in rows]

    def count_evaluations(self, kind: str = "search") -> int:
        row = self._one("SELECT COUNT(*) FROM evaluations WHERE kind = ?", (kind,))
        return row[0] if row else 0

    def candidates(self) -> list[dict[str, Any]]:
        """Every candidate with its search verdict's figures, oldest first."""
        rows = self._all(
            "SELECT c.id, c.parent, c.strategy, c.generation, e.correct, e.runtime_ms, e.speedup, e.reason "
            "FROM candidates c LEFT JOIN evaluations e ON e.candidate = c.id AND e.kind = 'search' "
            "ORDER BY c.created")
        keys = ("id", "parent", "strategy", "generation", "correct", "runtime_ms", "speedup", "reason")
        result = []
        for row in rows:
            item = dict(zip(keys, row))
            item["correct"] = None if item["correct"] is None else bool(item["correct"])
            result.append(item)
        return result

    # the trace --------------------------------------------------------------------------------
    def event(self, type_: str, candidate: str | None = None, **data: Any) -> None:
        with self._lock:
            self.db.execute("INSERT INTO events (ts, type, candidate, data) VALUES (?, ?, ?, ?)",
                            (time.time(), type_, candidate, json.dumps(data, default=str)))

    def events(self) -> list[dict[str, Any]]:
        rows = self._all("SELECT seq, ts, type, candidate, data FROM events ORDER BY seq")
        return [{"seq": s, "ts": ts, "type": t, "candidate": c, **json.loads(d)} for s, ts, t, c, d in rows]
