"""Memory and process limits through cgroups (v2, or v1 memory and pids controllers), where this
process may create them; the sandbox polls memory and process counts where it may not. The same
cgroup freezes a job (v2's ``cgroup.freeze``, or the v1 freezer) while the judge must know that none
of its processes runs: a frozen task is not thawed by SIGCONT, and what it starts is frozen too."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path(os.environ.get("KERNELEVO_CGROUP_ROOT", "/sys/fs/cgroup"))
CGROUP_PREFIX = "kernelevo"
FREEZE_TIMEOUT_S = 2.0
"""How long a freeze may take to reach every task (each must leave the kernel at a safe point)."""


@dataclass
class Cgroup:
    """A cgroup (v2, or v1 memory+pids) for one job; ``procs`` are the files to join it through."""

    version: int
    dirs: list[Path]
    memory_bytes: int | None
    pids: int | None
    procs: list[Path] = field(default_factory=list)
    freezer: Path | None = None
    """The folder whose state freezes the job (None where neither freezer is available)."""

    @classmethod
    def create(cls, memory_bytes: int | None, pids: int | None) -> Cgroup | None:
        """A new cgroup with the limits, or None where this process may not make one."""
        name = f"{CGROUP_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            if (CGROUP_ROOT / "memory").is_dir() and (CGROUP_ROOT / "memory" / "cgroup.procs").exists():
                return cls._create_v1(name, memory_bytes, pids)
            if (CGROUP_ROOT / "cgroup.controllers").exists():
                return cls._create_v2(name, memory_bytes, pids)
        except OSError:
            return None
        return None

    @classmethod
    def _create_v1(cls, name: str, memory_bytes: int | None, pids: int | None) -> Cgroup:
        dirs = []
        mem = CGROUP_ROOT / "memory" / name
        mem.mkdir()
        dirs.append(mem)
        try:
            if memory_bytes:
                (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
                swap = mem / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(str(memory_bytes))
            if pids and (CGROUP_ROOT / "pids").is_dir():
                pid_dir = CGROUP_ROOT / "pids" / name
                pid_dir.mkdir()
                dirs.append(pid_dir)
                (pid_dir / "pids.max").write_text(str(pids))
            has_pids = len(dirs) > 1
            freezer = None
            if (CGROUP_ROOT / "freezer").is_dir():
                freezer = CGROUP_ROOT / "freezer" / name
                freezer.mkdir()
                dirs.append(freezer)
        except OSError:
            for d in reversed(dirs):
                d.rmdir()
            raise
        return cls(1, dirs, memory_bytes, pids if has_pids else None, [d / "cgroup.procs" for d in dirs], freezer)

    @classmethod
    def _create_v2(cls, name: str, memory_bytes: int | None, pids: int | None) -> Cgroup:
        parent = CGROUP_ROOT / CGROUP_PREFIX
        parent.mkdir(exist_ok=True)
        wanted = {"memory", "pids"} & set((CGROUP_ROOT / "cgroup.controllers").read_text().split())
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted)))
        group = parent / name
        group.mkdir()
        if memory_bytes:
            (group / "memory.max").write_text(str(memory_bytes))
            if (group / "memory.swap.max").exists():
                (group / "memory.swap.max").write_text("0")
        if pids:
            (group / "pids.max").write_text(str(pids))
        freezer = group if (group / "cgroup.freeze").exists() else None
        return cls(2, [group], memory_bytes, pids, [group / "cgroup.procs"], freezer)

    def members(self) -> list[int]:
        found: set[int] = set()
        for procs in self.procs:
            try:
                found |= {int(p) for p in procs.read_text().split()}
            except OSError:
                pass
        return sorted(found)

    def freeze(self, timeout_s: float = FREEZE_TIMEOUT_S) -> bool:
        """Freeze every task of the cgroup; True once the kernel says all are frozen."""
        if not self._set_frozen(True):
            return False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.frozen():
                return True
            time.sleep(0.002)
        self.thaw()  # half frozen (a task that would not leave the kernel): the caller holds it otherwise
        return False

    def frozen(self) -> bool:
        try:
            if self.version == 2:
                return "frozen 1" in (self.freezer / "cgroup.events").read_text().splitlines()
            return (self.freezer / "freezer.state").read_text().strip() == "FROZEN"
        except (OSError, TypeError):
            return False

    def thaw(self) -> None:
        self._set_frozen(False)

    def _set_frozen(self, frozen: bool) -> bool:
        """Ask the freezer for ``frozen``; False where there is none or it refused."""
        if self.freezer is None:
            return False
        name, value = ("cgroup.freeze", "1" if frozen else "0") if self.version == 2 else \
            ("freezer.state", "FROZEN" if frozen else "THAWED")
        try:
            (self.freezer / name).write_text(value)
        except OSError:
            return False
        return True

    def kill_all(self) -> None:
        self.thaw()  # a task frozen by the v1 freezer takes its SIGKILL only once thawed
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            try:
                (self.dirs[0] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for _ in range(50):
            members = self.members()
            if not members:
                return
            for pid in members:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer struck inside this cgroup."""
        try:
            if self.version == 2:
                events = (self.dirs[0] / "memory.events").read_text()
            else:
                events = (self.dirs[0] / "memory.oom_control").read_text()
                if int((self.dirs[0] / "memory.failcnt").read_text() or 0) > 0 and "oom_kill " not in events:
                    return True
        except OSError:
            return False
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value) > 0:
                return True
        return False

    def pids_exhausted(self) -> bool:
        for d in self.dirs:
            events = d / "pids.events"
            try:
                if events.exists() and int(events.read_text().split()[-1]) > 0:
                    return True
            except (OSError, ValueError, IndexError):
                pass
        return False

    def remove(self) -> None:
        self.kill_all()
        # A killed process leaves its cgroup a moment after it dies (EBUSY until then): retry briefly.
        deadline = time.monotonic() + 2.0
        for d in reversed(self.dirs):
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill_all()
                    time.sleep(0.02)


def cleanup_stale_cgroups() -> int:
    """Remove cgroups left by kernelevo processes that no longer run; returns how many."""
    removed = 0
    folders = [CGROUP_ROOT / "memory", CGROUP_ROOT / "pids", CGROUP_ROOT / "freezer", CGROUP_ROOT / CGROUP_PREFIX]
    candidates = [d for folder in folders for d in folder.glob(f"{CGROUP_PREFIX}-*")]
    for d in candidates:
        try:
            owner = int(d.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue  # a live process's (ours included: another sandbox in this process may be starting a job)
        version = 2 if d.parent.name == CGROUP_PREFIX else 1
        group = Cgroup(version, [d], None, None, [d / "cgroup.procs"],
                       d if d.parent.name in (CGROUP_PREFIX, "freezer") else None)
        group.remove()
        removed += not d.exists()
    return removed


def parse_size(text: str) -> int:
    """``2g``, ``512m``, ``1.5G``, ``1048576`` -> bytes."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
    value = text.strip().lower().removesuffix("b").removesuffix("i")
    try:
        scale = units.get(value[-1], 1)
        number = float(value[:-1] if value[-1] in units else value)
    except (IndexError, ValueError):
        raise ValueError(f"a memory size looks like 2g, 512m or 1048576, not {text!r}") from None
    if number <= 0:
        raise ValueError(f"a memory size must be positive, not {text!r}")
    return int(number * scale)
