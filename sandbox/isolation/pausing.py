"""Holding a job's processes still, and letting them go: the judge pauses the candidate's process while
the oracle re-times the reference. The job's cgroup is frozen where it has a freezer (a frozen task is
not thawed by SIGCONT, and what it starts is frozen too); otherwise each process gets SIGSTOP, pass
after pass, until a pass sees every one stopped and none new. Either way the release says whether
anything ran meanwhile."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from kernelevo.sandbox.isolation.cgroups import Cgroup

PAUSE_TIMEOUT_S = 2.0
"""How long pausing a job without a freezer may take: passes of SIGSTOP until every process is seen
stopped and no new one appears (an honest job settles in one or two)."""


class PauseFailed(RuntimeError):
    """A job's processes could not all be held stopped."""


def held(pid: int) -> bool:
    """Is process ``pid`` stopped, a zombie, or gone (nothing of it can run)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("T", "t", "Z", "X")


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class Pause:
    """One pause of the job whose processes ``processes()`` lists, in ``cgroup`` if it has one."""

    def __init__(self, processes: Callable[[], set[int]], cgroup: Cgroup | None) -> None:
        self.processes, self.cgroup = processes, cgroup
        self.frozen = False
        self.stopped: set[int] = set()

    def hold(self) -> None:
        """Freeze the cgroup, or stop every process; raises :class:`PauseFailed` where the SIGSTOP passes
        do not settle within ``PAUSE_TIMEOUT_S``: only the job's own processes (forking without end,
        waking each other) keep them from settling."""
        if self.cgroup is not None and self.cgroup.freeze():
            self.frozen = True
            return
        deadline = time.monotonic() + PAUSE_TIMEOUT_S
        while time.monotonic() < deadline:
            found = self.processes()
            running = {pid for pid in found if not held(pid)}
            self.stopped |= found
            if not running:
                return
            _signal(running, signal.SIGSTOP)
            time.sleep(0.001)
        self.release(alive=True)
        raise PauseFailed(f"its processes could not all be stopped within {PAUSE_TIMEOUT_S:.0f} s (processes "
                          "kept starting or waking each other)")

    def release(self, alive: bool) -> bool:
        """Let the processes go on; False where one of them ran while paused (one the pause did not stop,
        a new one, or one woken by another). ``alive``: the job still runs (once it has ended, its pids may
        be another's, and nothing is signalled)."""
        if self.frozen:
            still = self.cgroup is not None and self.cgroup.frozen()
            if self.cgroup is not None:
                self.cgroup.thaw()
            return still
        if not self.stopped or not alive:
            return True
        found = self.processes()
        still = found <= self.stopped and all(held(pid) for pid in found)
        _signal(self.stopped | found, signal.SIGCONT)
        return still
