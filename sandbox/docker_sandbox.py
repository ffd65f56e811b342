"""The Docker sandbox: each job is the command of a fresh container with no network, a read-only
root, a tmpfs /tmp, memory, process and CPU limits, no capabilities and a non-root user.

The default image is built from local files, with no registry (``kernelevo sandbox build``): an
almost empty root filesystem imported with ``docker import``. The toolchain is bind-mounted read-only
at the same paths as on the host: /usr (with the merged-/usr links), the Python installation, the
virtual environment and kernelevo's own source folders. Nothing else of the host is visible: not
$HOME, not /tmp, not the run folders, not the reference cache. Files go in and out through the
job's own folder, bind-mounted read-write; the harness's signing key goes in as a file that the
harness deletes before it imports the candidate.
"""

from __future__ import annotations

import io
import os
import secrets
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from kernelevo.sandbox.models import Isolation, JobOutcome
from kernelevo.sandbox.process import RunSpec, finish_outcome, take_lock

IMAGE = "kernelevo-sandbox:local"
LABEL = "org.kernelevo.job"
USER = "65534:65534"  # nobody
SELF_CONTAINED = "org.kernelevo.self-contained"
TMPFS_SIZE = "4g"


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

    paths = {"/usr", sys.base_prefix, sys.prefix}
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
    """Remove containers of earlier runs (labelled, no longer running); returns how many."""
    try:
        c = client()
    except DockerUnavailable:
        return 0
    removed = 0
    for container in c.containers.list(all=True, filters={"label": LABEL}):
        owner = container.labels.get("org.kernelevo.owner", "")
        alive = owner.isdigit() and Path(f"/proc/{owner}").exists() and container.status == "running"
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
        self._active: dict[str, Any] = {}
        self._lock = threading.Lock()
        remove_leftovers()

    def kill_all(self) -> None:
        with self._lock:
            active = list(self._active.values())
        for container in active:
            try:
                container.kill()
            except Exception:
                pass

    def run(self, spec: RunSpec) -> JobOutcome:
        from docker.types import DeviceRequest

        spec.job_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(32)
        key_file = spec.job_dir / "harness.key"
        key_file.write_text(key)
        # The container's user (nobody) writes its results and logs here, and in the compile caches.
        for folder in (spec.job_dir, *spec.writable):
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o777)
        key_file.chmod(0o644)
        env = dict(spec.env, KERNELEVO_KEY_FILE=str(key_file), HOME="/tmp")
        volumes = {p: {"bind": p, "mode": "ro"} for p in self.binds}
        volumes[str(spec.job_dir)] = {"bind": str(spec.job_dir), "mode": "rw"}
        for w in spec.writable:
            volumes[str(w)] = {"bind": str(w), "mode": "rw"}
        requests = []
        gpu = env.get("CUDA_VISIBLE_DEVICES", "")
        if gpu:
            requests = [DeviceRequest(device_ids=[gpu], capabilities=[["gpu"]])]
            env["CUDA_VISIBLE_DEVICES"] = "0"  # the container sees only its GPU, as device 0
        iso = Isolation(sandbox="docker", namespaces=["net", "pid", "ipc", "uts", "mount"],
                        read_only_root=True, private_tmp=True, home_hidden=True, network="none",
                        memory_limit=spec.memory_text, memory_enforced_by="docker (cgroup)" if spec.memory_bytes
                        else None, pids_limit=spec.pids_limit, timeout_s=spec.timeout_s)
        lock = None
        if spec.device_lock is not None:  # held around the whole container (no start-up overlap here)
            iso.device_lock = str(spec.device_lock)
            lock, waited = take_lock(spec.device_lock)
            iso.device_lock_wait_s = round(waited, 3)
        spec.result_path.unlink(missing_ok=True)
        began = time.monotonic()
        container = None
        timed_out = False
        returncode: int | None = None
        oom = False
        pids_hit = False
        log = b""
        try:
            command = list(spec.cmd)
            if self.self_contained and command and command[0] == sys.executable:
                command[0] = "python"
            container = self.client.containers.run(
                self.image, command=command, detach=True, network_disabled=True, read_only=True,
                tmpfs={"/tmp": f"rw,exec,nosuid,size={TMPFS_SIZE},mode=1777"}, volumes=volumes,
                working_dir=str(spec.job_dir), mem_limit=spec.memory_bytes or None,
                memswap_limit=spec.memory_bytes or None, pids_limit=spec.pids_limit or None,
                nano_cpus=int(self.cpus * 1e9), cap_drop=["ALL"], security_opt=["no-new-privileges"], user=USER,
                environment=env, labels={LABEL: "1", "org.kernelevo.owner": str(os.getpid())},
                device_requests=requests, ipc_mode="private", shm_size="1g")
            with self._lock:
                self._active[container.id] = container
            try:
                returncode = int(container.wait(timeout=spec.timeout_s)["StatusCode"])
            except Exception:  # the wait timed out (or the engine dropped the call)
                timed_out = True
                try:
                    container.kill()
                except Exception:
                    pass
            container.reload()
            state = container.attrs.get("State", {})
            oom = bool(state.get("OOMKilled"))
            if returncode is None:
                returncode = state.get("ExitCode")
            pids_hit = _pids_exhausted(container.id)
            log = container.logs(stdout=True, stderr=True)
        finally:
            if container is not None:
                with self._lock:
                    self._active.pop(container.id, None)
                try:
                    container.remove(force=True)
                except Exception:
                    pass
            if lock is not None:
                lock.close()
            key_file.unlink(missing_ok=True)
        wall = time.monotonic() - began
        log_path = spec.job_dir / "harness.log"
        log_path.write_bytes(log)
        outcome = JobOutcome(returncode=returncode, timed_out=timed_out, wall_s=wall, isolation=iso,
                             out_of_memory=oom, too_many_processes=pids_hit)
        return finish_outcome(outcome, spec, log_path, key)


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
