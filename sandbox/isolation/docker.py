"""The Docker sandbox: each job is the command of a fresh container with no network, a read-only
root, a tmpfs /tmp, memory, process and CPU limits, no capabilities and a non-root user.

The default image is built from local files, with no registry (``kernelevo sandbox build``): an
almost empty root filesystem imported with ``docker import``. The toolchain is bind-mounted read-only
at the same paths as on the host: /usr (with the merged-/usr links), the Python installation, the
virtual environment and kernelevo's own source folders. Nothing else of the host is visible: not
$HOME, not /tmp, not the run folders, not the reference cache. Files go in and out through the
job's own folder, bind-mounted read-write and handed to the container's user; the job talks over a
socket in that folder.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from kernelevo.sandbox import wire
from kernelevo.sandbox.isolation import confinement
from kernelevo.sandbox.isolation.file_watch import FileWatch, watched_folders
from kernelevo.sandbox.isolation.namespaces import hand_over, keep_private, process_identity, write_into
from kernelevo.sandbox.isolation.process import Deadline, RunSpec, describe_signal, tail, take_lock
from kernelevo.sandbox.models import Isolation, JobOutcome

IMAGE = "kernelevo-sandbox:local"
LABEL = "org.kernelevo.job"
USER = "65534:65534"  # nobody
SELF_CONTAINED = "org.kernelevo.self-contained"
TMPFS_SIZE = "4g"
LOG_TAIL_LINES = 2000
"""Lines of a container's output kept as its log (the engine itself keeps its last megabyte)."""


class DockerUnavailable(Exception):
    """No Docker engine (or no image); the message says how to fix it."""


def client() -> Any:
    """A docker SDK client, or DockerUnavailable with how to start an engine."""
    try:
        import docker

        c = docker.from_env(timeout=30)
        c.ping()
        return c
    except Exception as exc:
        raise DockerUnavailable(
            "no Docker engine is reachable (" + str(exc).splitlines()[0][:120] + "): start one (e.g. "
            "`sudo apt-get install -y docker.io && sudo dockerd &`) or use --sandbox process") from None


def toolchain_paths() -> list[str]:
    """Host paths the container needs, bind-mounted read-only at the same place."""
    import importlib

    from kernelevo.sandbox.isolation.namespaces import toolchain_paths as compilers

    paths = {"/usr", sys.base_prefix, sys.prefix, *(str(p) for p in compilers())}
    for extra in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"):
        if os.path.exists(extra):
            paths.add(extra)
    # kernelevo's subpackages (an editable install maps each to its own folder)
    for name in ("agent", "tools", "sandbox", "prompts", "tasks"):
        module = importlib.import_module(f"kernelevo.{name}")
        for location in getattr(module, "__path__", []):
            paths.add(str(Path(location).resolve()))
    # keep only the outermost of nested paths
    ordered = sorted(paths, key=len)
    kept: list[str] = []
    for p in ordered:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


def _rootfs_tar() -> bytes:
    """An almost empty root filesystem: mount points, merged-/usr links, /tmp, a traversable /root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
            tar.addfile(info)

        def add_link(name: str, target: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, int(time.time())
            tar.addfile(info)

        def add_file(name: str, text: str) -> None:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))

        for d in ("usr", "etc", "proc", "sys", "dev", "run", "var", "home", "work", "opt", "mnt"):
            add_dir(d)
        add_dir("root", 0o755)  # paths under /root (e.g. pyenv) are bind-mounted; let others traverse
        add_dir("tmp", 0o1777)
        add_dir("var/tmp", 0o1777)
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
            add_link(link, target)
        add_file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/false\n")
        add_file("etc/group", "root:x:0:\nnogroup:x:65534:\n")
        add_file("etc/hosts", "127.0.0.1 localhost\n")
    return buffer.getvalue()


def build_image(tag: str = IMAGE) -> str:
    """Import the default image from local files (no registry); returns its id."""
    c = client()
    repository, _, version = tag.partition(":")
    try:
        previous = c.images.get(tag).id
    except Exception:
        previous = None
    c.api.import_image_from_data(_rootfs_tar(), repository=repository, tag=version or "latest")
    built = c.images.get(tag).id
    if previous and previous != built:
        try:  # the image this one replaces, now untagged: remove it unless a container still uses it
            c.images.remove(previous)
        except Exception:
            pass
    return built


def image_present(tag: str = IMAGE) -> bool:
    try:
        client().images.get(tag)
        return True
    except Exception:
        return False


def remove_leftovers() -> int:
    """Remove containers of runs that ended (labelled, their owning process gone); returns how many."""
    try:
        c = client()
    except DockerUnavailable:
        return 0
    removed = 0
    for container in c.containers.list(all=True, filters={"label": LABEL}):
        owner = container.labels.get("org.kernelevo.owner", "")
        # a live run's container (starting, running, paused by its judge or ended and being read) is its
        # own to remove
        alive = owner.isdigit() and Path(f"/proc/{owner}").exists()
        if not alive:
            try:
                container.remove(force=True)
                removed += 1
            except Exception:
                pass
    return removed


class DockerSandbox:
    """Runs jobs as containers (``--sandbox docker``)."""

    name = "docker"
    trusted_as_sandbox_user = True  # every job, the oracle too, is a container of its own

    def __init__(self, image: str = IMAGE, cpus: float | None = None) -> None:
        self.client = client()
        try:
            found = self.client.images.get(image)
        except Exception:
            raise DockerUnavailable(f"the image {image} is missing: run `kernelevo sandbox build`") from None
        self.image = image
        self.cpus = cpus or float(os.cpu_count() or 1)
        # An image built from sandbox/Dockerfile carries its own Python and kernelevo; the default
        # image borrows the host's, read-only, at the same paths.
        self.self_contained = (found.labels or {}).get(SELF_CONTAINED) == "1"
        self.binds = [] if self.self_contained else toolchain_paths()
        self._active: dict[str, DockerJob] = {}
        self._lock = threading.Lock()
        remove_leftovers()

    def kill_all(self) -> None:
        with self._lock:
            active = list(self._active.values())
        for job in active:
            job.kill()

    def start(self, spec: RunSpec) -> DockerJob:
        job = DockerJob(self, spec)
        with self._lock:
            self._active[job.container.id] = job
        return job

    def run(self, spec: RunSpec) -> JobOutcome:
        return self.start(spec).wait()

    def _forget(self, job: DockerJob) -> None:
        with self._lock:
            self._active.pop(job.container.id, None)


class DockerJob:
    """One container: its channel (a socket in the bind-mounted job folder), deadline and end."""

    def __init__(self, owner: DockerSandbox, spec: RunSpec) -> None:
        from docker.types import DeviceRequest, LogConfig

        self.owner, self.spec, self.phase = owner, spec, None
        # The container's user (nobody) reads its job folder and writes it where the job may; its
        # other writable folders (the compile cache, the outbox) were handed over by their makers.
        keep_private(spec.job_dir, 0o755)
        launcher_folder = [spec.launcher_folder] if spec.launcher_folder is not None else []
        for folder in ([spec.job_dir] if spec.folder_writable else []) + launcher_folder:
            hand_over(folder)
        env = dict(spec.env, HOME="/tmp")
        self.listener = None
        if spec.channel:
            self.listener = wire.Listener(spec.job_dir)
            env[wire.CHANNEL_ENV] = self.listener.env_value
        volumes = {p: {"bind": p, "mode": "ro"} for p in owner.binds}
        for folder in spec.readable:
            volumes[str(folder)] = {"bind": str(folder), "mode": "ro"}
        for folder in (spec.job_dir, *spec.writable):
            volumes[str(folder)] = {"bind": str(folder), "mode": "rw"}
        for folder in launcher_folder:
            volumes[str(folder)] = {"bind": confinement.LAUNCHER_FOLDER_INSIDE, "mode": "rw"}
        cache = confinement.cache_as_seen(spec.compile_cache, env, mounted=True)
        if spec.compile_cache is not None:
            volumes[str(spec.compile_cache)] = {"bind": confinement.CACHE_INSIDE, "mode": "rw"}
        requests = []
        gpu = env.get("CUDA_VISIBLE_DEVICES", "")
        if spec.gpu and gpu:
            requests = [DeviceRequest(device_ids=[gpu], capabilities=[["gpu"]])]
            env["CUDA_VISIBLE_DEVICES"] = "0"  # the container sees only its GPU, as device 0
        self.isolation = Isolation(
            sandbox="docker", namespaces=["net", "pid", "ipc", "uts", "mount"], read_only_root=True,
            private_tmp=True, home_hidden=True, network="none", memory_limit=spec.memory_text,
            memory_enforced_by="docker (cgroup)" if spec.memory_bytes else None, pids_limit=spec.pids_limit,
            timeout_s=spec.timeout_s)
        self.lock = None
        if spec.device_lock is not None:
            self.isolation.device_lock = str(spec.device_lock)
            self.lock, waited = take_lock(spec.device_lock)
            self.isolation.device_lock_wait_s = round(waited, 3)
        python = "python" if owner.self_contained else sys.executable
        allowed = confinement.allowed_folders(spec.job_dir, [*spec.writable, *cache], spec.folder_writable,
                                              private_proc=spec.proc_children)
        command, extra = confinement.command([python if part == sys.executable else part for part in spec.cmd],
                                             spec.launcher, allowed, spec.trusted, python,
                                             launcher_folder=confinement.LAUNCHER_FOLDER_INSIDE)
        env.update(extra)
        self.began = time.monotonic()
        self.timed_out = False
        self.killed_alive = False
        self._channel: wire.Channel | None = None
        self.greeted = False
        self.outcome: JobOutcome | None = None
        self.container = owner.client.containers.run(
            owner.image, command=command, detach=True, network_disabled=True, read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,size={TMPFS_SIZE},mode=1777"}, volumes=volumes,
            working_dir=str(spec.job_dir), mem_limit=spec.memory_bytes or None,
            memswap_limit=spec.memory_bytes or None, pids_limit=spec.pids_limit or None,
            nano_cpus=int(owner.cpus * 1e9), cap_drop=["ALL"], security_opt=["no-new-privileges"], user=USER,
            environment=env, labels={LABEL: "1", "org.kernelevo.owner": str(os.getpid())},
            device_requests=requests, ipc_mode="private", shm_size="1g",
            # the engine keeps a container's output on the host's disk: a candidate may print gigabytes
            log_config=LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}))
        self.deadline = Deadline(spec.timeout_s, self._on_deadline)
        self._files = FileWatch(watched_folders(spec.job_dir, spec.writable, spec.compile_cache, spec.folder_writable,
                                                spec.trusted), self.kill).start()

    def _on_deadline(self) -> None:
        if self.alive():
            self.timed_out = True
            self.kill()

    def alive(self) -> bool:
        if self.outcome is not None:
            return False
        try:
            self.container.reload()
            return self.container.status in {"created", "running", "paused"}
        except Exception:
            return False

    def remaining(self) -> float:
        return self.deadline.remaining()

    def extend(self, seconds: float) -> None:
        self.deadline.extend(seconds)

    def set_deadline(self, seconds: float) -> None:
        self.deadline.cancel()
        self.deadline = Deadline(seconds, self._on_deadline)
        self.isolation.timeout_s = seconds

    def channel(self, timeout: float = 120.0) -> wire.Channel:
        if self._channel is None:
            assert self.listener is not None, "this job was started without a channel"
            self._channel = self.listener.accept(min(timeout, self.remaining()), alive=self.alive)
        return self._channel

    def identity(self) -> tuple[int | None, str | None]:
        try:
            self.container.reload()
            pid = int(self.container.attrs.get("State", {}).get("Pid") or 0)
        except Exception:
            return None, None
        return process_identity(pid) if pid else (None, None)

    def host_pids(self) -> set[int]:
        try:
            top = self.container.top(ps_args="-o pid")
            column = top["Titles"].index("PID")
            return {int(row[column]) for row in top["Processes"]}
        except Exception:  # ended, or the engine cannot say
            return set()

    def pause(self) -> None:
        """Freeze the container (the engine's cgroup freezer: SIGCONT does not thaw it)."""
        self._paused = False
        if not self.alive():
            return
        try:
            self.container.pause()
            self._paused = True
        except Exception as exc:  # the engine refused: the judge's trouble, not the candidate's
            self.isolation.warnings.append(f"the container could not be paused: {str(exc)[:200]}")

    def resume(self) -> bool:
        if not getattr(self, "_paused", False):
            return True
        self._paused = False
        try:
            self.container.unpause()
        except Exception:
            pass
        return True

    def kill(self) -> None:
        self.killed_alive = self.killed_alive or self.outcome is None and self.alive()
        try:
            self.container.kill()
        except Exception:
            pass

    def wait(self, timeout: float | None = None) -> JobOutcome:
        if self.outcome is not None:
            return self.outcome
        returncode: int | None = None
        try:
            returncode = int(self.container.wait(timeout=timeout if timeout is not None else self.remaining() + 5)
                             ["StatusCode"])
        except Exception:  # the wait timed out (or the engine dropped the call)
            self.timed_out = self.timed_out or timeout is None
            self.kill()
        self.deadline.cancel()
        self._files.stop()
        oom = pids_hit = False
        log = b""
        try:
            self.container.reload()
            state = self.container.attrs.get("State", {})
            oom = bool(state.get("OOMKilled"))
            if returncode is None:
                returncode = state.get("ExitCode")
            pids_hit = _pids_exhausted(self.container.id)
            log = self.container.logs(stdout=True, stderr=True, tail=LOG_TAIL_LINES)
        except Exception as exc:  # removed by someone else, or the engine went away: say so, end as killed
            log = f"the container could not be read after it ended: {str(exc)[:200]}".encode()
        finally:
            self.owner._forget(self)
            try:
                self.container.remove(force=True)
            except Exception:
                pass
            for closable in (self._channel, self.listener, self.lock):
                if closable is not None:
                    closable.close()
        # the job's folder may be the job's to shape (side jobs): never write through a link put there
        log_path = write_into(self.spec.job_dir, "process.log", log)
        outcome = JobOutcome(returncode=returncode, timed_out=self.timed_out, killed_by_judge=self.killed_alive,
                             wall_s=time.monotonic() - self.began,
                             isolation=self.isolation, out_of_memory=oom, too_many_processes=pids_hit,
                             too_many_files=self._files.over, phase=self.phase, log_tail=tail(log_path))
        if returncode is not None and returncode > 128 and not oom:
            outcome.signal = describe_signal(returncode - 128)
        self.outcome = outcome
        return outcome


def _pids_exhausted(container_id: str) -> bool:
    """Did the container hit its pids limit? (the cgroup's pids.events, v1 or v2; False if unreadable)."""
    for path in (f"/sys/fs/cgroup/pids/docker/{container_id}/pids.events",
                 f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/pids.events",
                 f"/sys/fs/cgroup/docker/{container_id}/pids.events"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("max ") and int(line.split()[1]) > 0:
                return True
    return False
