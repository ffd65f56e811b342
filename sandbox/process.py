"""The process sandbox: one fresh, isolated process per job; its end is observed from outside.

A job is spawned (never forked) as a new session in its own folder, with a scrubbed environment,
inside the best namespaces the machine offers and a cgroup with memory and process limits. A
wall-clock timeout kills the whole group. How the process ended (exit code, signal, timeout,
out of memory, too many processes) comes from the kernel, not from the process; the harness's
result comes back through a file, signed with a key sent on stdin.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

from kernelevo.sandbox import isolation
from kernelevo.sandbox.models import HarnessResult, Isolation, JobOutcome

_SIGNAL_WORDS = {
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "abort",
    "SIGBUS": "bus error",
    "SIGFPE": "floating-point exception",
    "SIGILL": "illegal instruction",
    "SIGKILL": "killed",
}


def describe_signal(number: int) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
    word = _SIGNAL_WORDS.get(name)
    return f"{name} ({word})" if word else name


@dataclass
class RunSpec:
    """One process to run in the sandbox."""

    cmd: list[str]
    job_dir: Path
    result_path: Path
    timeout_s: float
    memory_bytes: int | None = None
    memory_text: str | None = None
    pids_limit: int | None = 512
    env: dict[str, str] = field(default_factory=dict)
    writable: list[Path] = field(default_factory=list)
    hidden: list[Path] = field(default_factory=list)
    device_lock: Path | None = None
    """A lock file for the job's GPU. The process starts (Python, torch, triton) at once, then waits
    on its stdin until this sandbox holds the lock, and runs its GPU work while the lock is held:
    jobs that share a GPU, from any kernelevo process on the machine, never overlap on it, and no
    job's timeout counts the wait. Candidate code runs only after the lock is taken and cannot
    release it: the lock belongs to this (trusted) process."""


def take_lock(path: Path, give_up: Callable[[], bool] = lambda: False) -> tuple[Any, float]:
    """Hold an exclusive flock on ``path`` (waiting while another job holds it); stop waiting when
    ``give_up()`` says so (e.g. the job died, killed by a stop). Returns the open file (closing it
    releases the lock) and the seconds waited."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held until the job ends
    began = time.monotonic()
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle, time.monotonic() - began
        except BlockingIOError:
            if give_up():
                return handle, time.monotonic() - began
            time.sleep(0.02)


def finish_outcome(outcome: JobOutcome, spec: RunSpec, log_path: Path, key: str) -> JobOutcome:
    """What every sandbox reads after its job ended: a signal behind an exit code above 128 (when no
    result came back), the log's tail, the last phase announced, and the signed result."""
    code = outcome.returncode
    if outcome.signal is None and code is not None and code > 128 and not spec.result_path.exists():
        outcome.signal = describe_signal(code - 128)
    outcome.log_tail = _tail(log_path)
    progress = spec.job_dir / "progress"
    outcome.phase = progress.read_text().strip() if progress.exists() else None
    outcome.result, outcome.result_problem, outcome.payload = _read_result(spec.result_path, key)
    return outcome


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _rss_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
    return total


class ProcessSandbox:
    """Runs jobs in fresh isolated processes (the default sandbox)."""

    name = "process"

    def __init__(self) -> None:
        isolation.cleanup_stale_cgroups()
        self._active: dict[int, tuple[subprocess.Popen, isolation.Cgroup | None]] = {}
        self._active_lock = threading.Lock()

    def kill_all(self) -> None:
        """Kill every job in flight (used when a run is stopped by a signal)."""
        with self._active_lock:
            active = list(self._active.values())
        for proc, cgroup in active:
            self._kill(proc, cgroup)

    def run(self, spec: RunSpec) -> JobOutcome:
        spec.job_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(32)
        iso = Isolation(sandbox="process", timeout_s=spec.timeout_s, memory_limit=spec.memory_text,
                        pids_limit=spec.pids_limit)
        tier = isolation.tier()
        cmd = list(spec.cmd)
        if tier == "bwrap":
            cmd = isolation.bwrap_command(cmd, spec.job_dir, [spec.job_dir, *spec.writable], spec.hidden)
            iso.namespaces = ["net", "pid", "ipc", "uts", "mount"]
            iso.read_only_root = iso.private_tmp = iso.home_hidden = True
            iso.network = "none"
        elif tier == "unshare":
            cmd = isolation.unshare_command(cmd)
            iso.namespaces = ["net", "pid", "mount"]
            iso.network = "none"
            iso.warnings.append("no bubblewrap: the root file system is writable and $HOME readable")
        else:
            iso.warnings.append("no namespaces: candidate code shares this machine's network, /proc and files")
        cgroup = isolation.Cgroup.create(spec.memory_bytes, spec.pids_limit)
        env = dict(spec.env)
        if cgroup is not None:
            iso.memory_enforced_by = f"cgroup v{cgroup.version}" if spec.memory_bytes else None
            if spec.pids_limit and cgroup.pids is None:
                iso.warnings.append("no pids controller: the process count is polled")
            env_cg = " ".join(str(p) for p in cgroup.procs)
            cmd = ["/bin/sh", "-c", 'for f in $KE_CG; do echo $$ > "$f" || exit 97; done; unset KE_CG; exec "$@"',
                   "sh", *cmd]
            env["KE_CG"] = env_cg
        else:
            iso.memory_enforced_by = "polling" if spec.memory_bytes else None
            iso.warnings.append("no cgroups: memory and process limits are polled, not enforced by the kernel")
        log_path = spec.job_dir / "harness.log"
        spec.result_path.unlink(missing_ok=True)
        began = time.monotonic()
        watch = _Watch(spec, cgroup)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=spec.job_dir, env=env, start_new_session=True)
            watch.start(proc.pid)
            with self._active_lock:
                self._active[proc.pid] = (proc, cgroup)
            lock = None
            try:
                assert proc.stdin is not None
                proc.stdin.write((key + "\n").encode())
                proc.stdin.flush()
                if spec.device_lock is not None:
                    iso.device_lock = str(spec.device_lock)
                    lock, waited = take_lock(spec.device_lock, give_up=lambda: proc.poll() is not None)
                    iso.device_lock_wait_s = round(waited, 3)
                proc.stdin.write(b"go\n")
                proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                returncode = proc.wait(timeout=spec.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                returncode = None
            finally:
                watch.stop()
                self._kill(proc, cgroup)
                with self._active_lock:
                    self._active.pop(proc.pid, None)
                if lock is not None:
                    lock.close()  # closing the file releases the flock
            if returncode is None:
                returncode = proc.wait()
        # The wall time the job itself took: start-up, then everything after it was let onto the GPU.
        wall = time.monotonic() - began - (iso.device_lock_wait_s or 0.0)
        outcome = JobOutcome(returncode=returncode, timed_out=timed_out, wall_s=wall, isolation=iso)
        if cgroup is not None:
            outcome.out_of_memory = cgroup.oom_killed()
            outcome.too_many_processes = cgroup.pids_exhausted()
            cgroup.remove()
        outcome.out_of_memory |= watch.over_memory
        outcome.too_many_processes |= watch.over_pids
        if returncode is not None and returncode < 0:
            outcome.signal = describe_signal(-returncode)
        return finish_outcome(outcome, spec, log_path, key)

    @staticmethod
    def _kill(proc: subprocess.Popen, cgroup: isolation.Cgroup | None) -> None:
        for pid in _process_tree(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL) if pid != proc.pid or proc.poll() is None else None
            except OSError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if cgroup is not None:
            cgroup.kill_all()


class _Watch:
    """Polls memory and process counts where no cgroup enforces them."""

    def __init__(self, spec: RunSpec, cgroup: isolation.Cgroup | None) -> None:
        self.memory = spec.memory_bytes if cgroup is None else None
        self.pids = spec.pids_limit if cgroup is None or cgroup.pids is None else None
        self.over_memory = self.over_pids = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, pid: int) -> None:
        if self.memory or self.pids:
            self._thread = threading.Thread(target=self._loop, args=(pid,), daemon=True)
            self._thread.start()

    def _loop(self, pid: int) -> None:
        while not self._stop.wait(0.1):
            tree = _process_tree(pid)
            if self.pids and len(tree) > self.pids:
                self.over_pids = True
            elif self.memory and _rss_bytes(tree) > self.memory:
                self.over_memory = True
            else:
                continue
            for member in tree:
                try:
                    os.kill(member, signal.SIGKILL)
                except OSError:
                    pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return ""
    return data.decode(errors="replace")


def _read_result(path: Path, key: str) -> tuple[HarnessResult | None, str | None, str | None]:
    """(harness result, why none, verified payload)."""
    if not path.exists():
        return None, "the harness wrote no result", None
    try:
        envelope = json.loads(path.read_text())
        payload, signature = envelope["payload"], envelope["signature"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, "the result file is unreadable", None
    expected = hmac.new(key.encode(), str(payload).encode(), sha256).hexdigest()
    if not hmac.compare_digest(expected, str(signature)):
        return None, "the result file is not signed by the harness: something other than the harness wrote it", None
    try:
        return HarnessResult.model_validate_json(payload), None, payload
    except ValueError as exc:
        return None, f"the result file does not parse: {exc}", payload
