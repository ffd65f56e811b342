"""The run folder's store is shared by the islands' threads. Python's sqlite3 may be built for a
SQLite in multi-thread mode (one connection, one thread at a time), where two threads on one
connection get "bad parameter or other API misuse": the store must never let two statements, reads
included, run on its connection at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelevo.agent.store import RunStore


class OneAtATime:
    """A connection stand-in that fails when two threads are inside it at once (the window widened
    by a short sleep), as a multi-thread-mode SQLite does."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.inside = 0
        self.guard = threading.Lock()

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        with self.guard:
            self.inside += 1
            overlapping = self.inside > 1
        try:
            assert not overlapping, f"two statements at once on one connection: {sql}"
            time.sleep(0.0005)
            return self.connection.execute(sql, params)
        finally:
            with self.guard:
                self.inside -= 1

    def close(self) -> None:
        self.connection.close()


def test_threads_reading_and_writing_at_once_never_share_the_connection(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.db = OneAtATime(store.db)  # type: ignore[assignment]
    rounds = 60

    def work(worker: int) -> None:
        for i in range(rounds):
            store.set_meta(f"w{worker}", i)
            assert store.meta(f"w{worker}") == i
            store.event("note", None, worker=worker, i=i)
            store.count_evaluations()
            store.candidate("none")
            store.evaluation("none")
            store.candidates()

    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(work, w) for w in range(4)]:
            future.result()
    assert len(store.events()) == 4 * rounds
    assert [store.meta(f"w{w}") for w in range(4)] == [rounds - 1] * 4
    store.close()
