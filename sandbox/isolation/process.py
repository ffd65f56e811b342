"""The process sandbox: one fresh, isolated process per job; its end is observed from outside.

A job is spawned (never forked) as a new session in its own folder, with a scrubbed environment,
inside the best namespaces the machine offers (``namespaces.py``), as an unprivileged user, in a
cgroup with memory and process limits. A watchdog kills the whole group at the job's deadline. How
the process ended (exit code, signal, timeout, out of memory, too many processes) comes from the
kernel, not from the process. A job that talks does so over its channel, a socket in its own folder.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevo.sandbox import wire
from kernelevo.sandbox.isolation import cgroups, confinement, namespaces, pausing
from kernelevo.sandbox.isolation.file_watch import FileWatch, watched_folders
from kernelevo.sandbox.models import Isolation, JobOutcome

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
    """One process to run in a sandbox."""

    cmd: list[str]
    job_dir: Path
    timeout_s: float
    memory_bytes: int | None = None
    memory_text: str | None = None
    pids_limit: int | None = 512
    env: dict[str, str] = field(default_factory=dict)
    writable: list[Path] = field(default_factory=list)
    """Folders besides ``job_dir`` the job may write (its compile cache, its outbox). Whoever made them
    has handed them to the sandbox's user; the sandbox hands over none of them, since a folder may hold
    others' folders that must stay the judge's (a compile cache's root)."""
    readable: list[Path] = field(default_factory=list)
    """Folders the job may read that no other job of the evaluation may (another process's outbox)."""
    gpu: bool = False
    device_lock: Path | None = None
    """A lock file for the job's GPU, held from the job's start to its end (side jobs: the compile gate,
    the ncu pass). An evaluation session takes the lock itself, after its processes have started."""
    channel: bool = False
    """Listen on ``job_dir/channel.sock`` for the job to connect to (``KERNELEVO_CHANNEL``)."""
    trusted: bool = False
    """The judge's own process (the reference's oracle), never a candidate's."""
    folder_writable: bool = True
    """The job may write its own folder. A candidate's process may not: it writes its outbox, its
    compile cache and its private /tmp only, so that it cannot plant modules, bytecode or links for
    the processes and readers that use its folder after it."""
    compile_cache: Path | None = None
    """The job's own compile cache (a candidate's job), writable like ``writable``; where the sandbox
    mounts folders it appears at ``confinement.CACHE_INSIDE``, and the variables naming it say so."""
    launcher: list[str] = field(default_factory=list)
    """A trusted tool that starts ``cmd`` and writes where ``cmd`` may not (ncu and its kernel trace);
    ``confinement.LAUNCHER_FOLDER`` in its arguments names ``launcher_folder`` as the job sees it."""
    launcher_folder: Path | None = None
    """The folder only the launcher writes: the job's own processes are confined away from it."""
    proc_children: bool = False
    """Processes the job starts use CUDA too (ncu run inside the confinement starts its target): where
    the job has a PID namespace of its own, it may write all of that namespace's /proc, not only its
    own process's entry (which the CUDA driver writes as it starts)."""


def take_lock(path: Path, give_up: Callable[[], bool] = lambda: False) -> tuple[Any, float]:
    """Hold an exclusive flock on ``path`` (waiting while another job holds it); stop waiting when
    ``give_up()`` says so. Returns the open file (closing it releases the lock) and the seconds waited."""
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


class Deadline:
    """Calls ``on_expiry`` once ``seconds`` have passed, unless cancelled first; ``extend`` moves it
    (a job waiting for the GPU's lock does not spend its own time)."""

    def __init__(self, seconds: float, on_expiry: Callable[[], None]) -> None:
        self.at = time.monotonic() + seconds
        self.on_expiry = on_expiry
        self._cancelled = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._cancelled.wait(min(max(self.at - time.monotonic(), 0.0), 0.25)):
            if time.monotonic() >= self.at:
                self.on_expiry()
                return

    def extend(self, seconds: float) -> None:
        self.at += seconds

    def remaining(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    def cancel(self) -> None:
        self._cancelled.set()


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants, parents before children."""
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
        pid = todo.pop(0)
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


LOG_KEEP_BYTES = 1 << 20
"""A job's log keeps its last megabyte once the job has ended (what a person reads is its end)."""


def tail(path: Path, limit: int = 3000) -> str:
    """The end of a job's log (read without following a link the job may have put in its place)."""
    return namespaces.read_no_follow(path, limit)


def isolation_for(tier: str, spec: RunSpec) -> Isolation:
    iso = Isolation(sandbox="process", timeout_s=spec.timeout_s, memory_limit=spec.memory_text,
                    pids_limit=spec.pids_limit)
    if tier == "bwrap":
        iso.namespaces = ["net", "pid", "ipc", "uts", "mount", "cgroup"] + ([] if os.geteuid() == 0 else ["user"])
        iso.read_only_root = iso.private_tmp = iso.home_hidden = True
        iso.network = "none"
    elif tier == "unshare":
        iso.namespaces, iso.network = ["net", "pid", "mount"], "none"
        iso.warnings.append("no bubblewrap: the root file system is the host's, readable, and /run with the "
                            "host's sockets is visible (install bubblewrap)")
    else:
        iso.warnings.append("NO ISOLATION: candidate code shares this machine's network, /proc, sockets and "
                            "files (install bubblewrap)")
    return iso


class ProcessSandbox:
    """Runs jobs in fresh isolated processes (the default sandbox)."""

    name = "process"

    def __init__(self) -> None:
        cgroups.cleanup_stale_cgroups()
        # Without bubblewrap every job sees the host's files: candidates and the judge's own jobs can
        # only be kept apart by user, so the judge's jobs keep the invoking user (root).
        self.trusted_as_sandbox_user = namespaces.tier() == "bwrap"
        self._active: dict[int, ProcessJob] = {}
        self._active_lock = threading.Lock()
        self.stopped = threading.Event()
        """Set by ``kill_all``: jobs still waiting for the GPU's lock give up and start nothing."""

    def why_unreachable(self, folder: Path) -> str | None:
        """Why candidate jobs could not enter ``folder``, or None. Without bubblewrap they see the host's
        files as the sandbox's user, so every folder above a workspace must let that user through."""
        if self.trusted_as_sandbox_user or os.geteuid() != 0:
            return None
        closed = namespaces.closed_ancestor(folder)
        if closed is None:
            return None
        return (f"the sandbox's user (uid {namespaces.SANDBOX_UID}) cannot enter {closed} (mode "
                f"{os.stat(closed).st_mode & 0o777:o}), on the way to {folder}: without bubblewrap, candidate "
                "processes see the host's folders as that user. Use a folder it can enter (for example under "
                "/tmp) or install bubblewrap")

    def kill_all(self) -> None:
        """Kill every job in flight and stop jobs waiting to start (a run stopped by a signal)."""
        self.stopped.set()
        with self._active_lock:
            active = list(self._active.values())
        for job in active:
            job.kill()

    def start(self, spec: RunSpec) -> ProcessJob:
        job = ProcessJob(spec, self)
        with self._active_lock:
            self._active[job.pid] = job
        return job

    def run(self, spec: RunSpec) -> JobOutcome:
        """Start the job and wait for its end (a job that needs no conversation)."""
        return self.start(spec).wait()

    def _forget(self, job: ProcessJob) -> None:
        with self._active_lock:
            self._active.pop(job.pid, None)


class ProcessJob:
    """One started job: its channel, its deadline, and how it ended."""

    def __init__(self, spec: RunSpec, owner: ProcessSandbox) -> None:
        self.spec, self.owner = spec, owner
        self.phase: str | None = None
        spec.job_dir.mkdir(parents=True, exist_ok=True)
        tier = namespaces.tier()
        self.isolation = isolation_for(tier, spec)
        # A trusted job without a file system of its own stays the invoking user's: as root, its folder
        # and channel are then out of every candidate's reach (candidates run as the sandbox user).
        self.private = spec.trusted and not owner.trusted_as_sandbox_user and os.geteuid() == 0
        if self.private:
            namespaces.keep_private(spec.job_dir, 0o711)  # enterable: the forensic pass reads its outbox
        elif not spec.folder_writable:
            namespaces.keep_private(spec.job_dir, 0o755)
        else:
            namespaces.hand_over(spec.job_dir)
        if spec.launcher_folder is not None:
            namespaces.hand_over(spec.launcher_folder)
        env = dict(spec.env)
        self.listener = None
        if spec.channel:
            self.listener = wire.Listener(spec.job_dir, public=not self.private)
            env[wire.CHANNEL_ENV] = self.listener.env_value
        cmd = self._command(tier, env)
        self.cgroup = cgroups.Cgroup.create(spec.memory_bytes, spec.pids_limit)
        if self.cgroup is not None:
            self.isolation.memory_enforced_by = f"cgroup v{self.cgroup.version}" if spec.memory_bytes else None
            cmd = ["/bin/sh", "-c", 'for f in $KE_CG; do echo $$ > "$f" || exit 97; done; unset KE_CG; exec "$@"',
                   "sh", *cmd]
            env["KE_CG"] = " ".join(str(p) for p in self.cgroup.procs)
        else:
            self.isolation.memory_enforced_by = "polling" if spec.memory_bytes else None
            self.isolation.warnings.append("no cgroups: memory and process limits are polled")
        self.lock = None
        if spec.device_lock is not None:
            self.isolation.device_lock = str(spec.device_lock)
            self.lock, waited = take_lock(spec.device_lock, give_up=owner.stopped.is_set)
            self.isolation.device_lock_wait_s = round(waited, 3)
            if owner.stopped.is_set():  # stopped while waiting: start nothing (the process below exits at once)
                cmd = ["/bin/sh", "-c", "exit 143"]
        self.log_path = spec.job_dir / "process.log"
        self.began = time.monotonic()
        log = namespaces.open_log(self.log_path)
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=spec.job_dir, env=env, start_new_session=True)
        finally:
            os.close(log)
        self.pid = self.proc.pid
        self.timed_out = False
        self.killed_alive = False
        """Killed by the judge while it still ran (not at its deadline, not for memory)."""
        self._channel: wire.Channel | None = None
        self.greeted = False
        self.outcome: JobOutcome | None = None
        self._watch = _Watch(spec, self.cgroup)
        self._watch.start(self.pid)
        private_tmp = confinement.private_tmp_for(spec.job_dir)
        self._files = FileWatch(watched_folders(spec.job_dir, spec.writable, spec.compile_cache, spec.folder_writable,
                                                spec.trusted, private_tmp if private_tmp.exists() else None),
                                self.kill).start()
        self.deadline = Deadline(spec.timeout_s, self._on_deadline)

    def _command(self, tier: str, env: dict[str, str]) -> list[str]:
        spec = self.spec
        private_tmp = None
        if tier != "bwrap" and not spec.trusted:  # /tmp is the host's: the job gets a folder of its own
            private_tmp = confinement.private_tmp_for(spec.job_dir)
            namespaces.hand_over(private_tmp)
            env.update({name: str(private_tmp) for name in ("TMPDIR", "TMP", "TEMP", "HOME")})
        cache = confinement.cache_as_seen(spec.compile_cache, env, mounted=tier == "bwrap")
        allowed = confinement.allowed_folders(spec.job_dir, [*spec.writable, *cache], spec.folder_writable,
                                              private_tmp, private_proc=tier != "none" and spec.proc_children)
        moved = tier == "bwrap" and spec.launcher_folder is not None
        inside = confinement.LAUNCHER_FOLDER_INSIDE if moved else str(spec.launcher_folder or "")
        cmd, extra = confinement.command(spec.cmd, spec.launcher, allowed, spec.trusted, launcher_folder=inside,
                                         shares_host=tier == "none")
        env.update(extra)
        if spec.launcher_folder is not None and confinement.within_reach(inside, allowed):
            self.isolation.warnings.append(f"{confinement.LAUNCHER_EXPOSED} ({inside} lies where the job may "
                                           "write)")
        if tier == "bwrap":
            # a folder the job may not write is mounted read-only: without root its owner is the job's user
            writes = [spec.job_dir, *spec.writable] if spec.folder_writable else spec.writable
            reads = spec.readable if spec.folder_writable else [spec.job_dir, *spec.readable]
            mounted = [(spec.compile_cache, confinement.CACHE_INSIDE)] if spec.compile_cache else []
            return namespaces.bwrap_command(cmd, spec.job_dir, writes, reads, spec.gpu,
                                            moved=[*mounted, *([(spec.launcher_folder, inside)] if moved else [])],
                                            memory_bytes=spec.memory_bytes)
        if tier == "unshare":
            return namespaces.unshare_command(cmd, drop=not self.private)
        return cmd if self.private else [*namespaces.drop_privileges(), *cmd]

    def _on_deadline(self) -> None:
        if self.proc.poll() is None:
            self.timed_out = True
            self.kill()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def remaining(self) -> float:
        return self.deadline.remaining()

    def extend(self, seconds: float) -> None:
        self.deadline.extend(seconds)

    def set_deadline(self, seconds: float) -> None:
        """A new deadline, ``seconds`` from now (a kept process handed its work)."""
        self.deadline.cancel()
        self.deadline = Deadline(seconds, self._on_deadline)
        self.isolation.timeout_s = seconds

    def channel(self, timeout: float = 120.0) -> wire.Channel:
        """The job's connected channel (waits for it to connect, at most ``timeout`` seconds)."""
        if self._channel is None:
            assert self.listener is not None, "this job was started without a channel"
            # only the job's own processes: without bubblewrap another job's candidate can reach this
            # socket by name
            self._channel = self.listener.accept(min(timeout, self.remaining()), alive=self.alive,
                                                 peers=self.host_pids)
        return self._channel

    def identity(self) -> tuple[int | None, str | None]:
        """The uid and capabilities of the job's innermost process, read from the host's /proc."""
        tree = process_tree(self.pid) if self.alive() else []
        return namespaces.process_identity(tree[-1]) if tree else (None, None)

    def host_pids(self) -> set[int]:
        return set(process_tree(self.pid)) if self.alive() else set()

    def pause(self) -> None:
        """Stop every process of the job until :meth:`resume` (``pausing.Pause``); ``PauseFailed`` where
        the job's own processes keep that from holding."""
        self._pause = pausing.Pause(self._processes, self.cgroup) if self.alive() else None
        if self._pause is not None:
            self._pause.hold()

    def resume(self) -> bool:
        """Let the job's processes go on; False where one of them ran while paused."""
        pause, self._pause = getattr(self, "_pause", None), None
        return pause.release(self.alive()) if pause is not None else True

    def _processes(self) -> set[int]:
        return set(process_tree(self.pid)) | set(self.cgroup.members() if self.cgroup is not None else ())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.killed_alive = True
        for pid in process_tree(self.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def wait(self, timeout: float | None = None) -> JobOutcome:
        """Wait for the job's end (killing it at its deadline) and say how it ended (once; again: the same)."""
        if self.outcome is not None:
            return self.outcome
        try:
            returncode = self.proc.wait(timeout=timeout if timeout is not None else self.remaining() + 5)
        except subprocess.TimeoutExpired:
            self.kill()
            returncode = self.proc.wait()
        self.deadline.cancel()
        self._watch.stop()
        self._files.stop()
        self.kill()  # anything the job left behind
        self.owner._forget(self)
        if self._channel is not None:
            self._channel.close()
        if self.listener is not None:
            self.listener.close()
        if self.lock is not None:
            self.lock.close()
        wall = time.monotonic() - self.began
        outcome = JobOutcome(returncode=returncode, timed_out=self.timed_out, wall_s=wall,
                             isolation=self.isolation, phase=self.phase, killed_by_judge=self.killed_alive)
        if self.cgroup is not None:
            outcome.out_of_memory = self.cgroup.oom_killed()
            outcome.too_many_processes = self.cgroup.pids_exhausted()
            self.cgroup.remove()
        outcome.out_of_memory |= self._watch.over_memory
        outcome.too_many_processes |= self._watch.over_pids
        outcome.too_many_files = self._files.over
        if returncode is not None and returncode < 0:
            outcome.signal = describe_signal(-returncode)
        elif returncode is not None and returncode > 128:
            outcome.signal = describe_signal(returncode - 128)
        namespaces.keep_tail(self.log_path, LOG_KEEP_BYTES)
        private_tmp = confinement.private_tmp_for(self.spec.job_dir)
        if os.path.lexists(private_tmp):  # its /tmp where the host's is shared: nothing of it outlives the job
            namespaces.remove_tree(private_tmp)
        outcome.log_tail = tail(self.log_path)
        self.outcome = outcome
        return outcome


def meminfo_bytes(field: str) -> int | None:
    """A figure of /proc/meminfo in bytes (``MemTotal``, ``Shmem``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_shared_bytes() -> int:
    """The host's shared memory (``Shmem``: tmpfs files, memfd and System V segments); 0 where unknown."""
    return meminfo_bytes("Shmem") or 0


class _Watch:
    """Polls memory and process counts where no cgroup enforces them. Memory is the job's resident
    size plus the growth of the host's shared memory since the job began: a job's memory-backed files
    and ``memfd`` buffers that nothing maps show in no process's resident size, only there (another
    process's growth meanwhile counts against the job: a limit polled errs on the safe side)."""

    def __init__(self, spec: RunSpec, cgroup: cgroups.Cgroup | None) -> None:
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
        shared_at_start = host_shared_bytes()
        while not self._stop.wait(0.1):
            tree = process_tree(pid)
            if self.pids and len(tree) > self.pids:
                self.over_pids = True
            elif self.memory and _rss_bytes(tree) + max(host_shared_bytes() - shared_at_start, 0) > self.memory:
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
