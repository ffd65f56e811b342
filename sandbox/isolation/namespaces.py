"""What the process sandbox can enforce on this machine, and how.

Tiers, best first:

- ``bwrap``: bubblewrap. Network, PID, IPC, UTS and cgroup namespaces; a new root that holds only what
  a job needs, read-only: /usr and the library links, /etc, /sys, the Python installation and
  kernelevo's sources, the GPU's device nodes; a private /proc, /tmp, /var/tmp and /dev/shm; the
  job's own folder and its compile cache writable. Nothing else of the host: not /run (no Docker
  socket, no host sockets), not the host's /tmp or /var/tmp, not $HOME, not the run folders or the
  reference cache. The job runs as an unprivileged user with no capabilities and ``no_new_privs``:
  when kernelevo runs as root, bubblewrap builds the sandbox as root (so it can bind what root can
  read) and the job then switches to uid 65534 inside it; otherwise bubblewrap runs in a user
  namespace as the user who started kernelevo.
- ``unshare``: network and PID namespaces with a private /proc, then the unprivileged user.
- ``none``: the unprivileged user at most, with a warning.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

SANDBOX_UID = 65534
"""The host user a sandboxed process runs as when kernelevo runs as root (nobody)."""

# The only environment variables that reach candidate code; nothing else of the parent's does.
ENV_ALLOWLIST = (
    "PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_HOME", "CUDA_PATH",
    "TORCH_CUDA_ARCH_LIST", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH",
    "TRITON_LIBCUDA_PATH", "NVIDIA_DRIVER_CAPABILITIES", "MAX_JOBS", "CC", "CXX",
)
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


def scrubbed_env(extra: dict[str, str]) -> dict[str, str]:
    """The allowlisted variables of this process plus ``extra``; never anything that looks secret."""
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env.update(extra)
    return {k: v for k, v in env.items() if not any(m in k.upper() for m in _SECRET_MARKERS)}


def _runs(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def drop_privileges() -> list[str]:
    """A command prefix that runs what follows as the unprivileged sandbox user (empty unless root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--no-new-privs",
                "--bounding-set=-all", "--inh-caps=-all"]
    code = (f"import os,sys,ctypes;os.setgroups([]);os.setgid({SANDBOX_UID});os.setuid({SANDBOX_UID});"
            "ctypes.CDLL(None).prctl(38,1,0,0,0);os.execvp(sys.argv[1],sys.argv[1:])")  # 38: PR_SET_NO_NEW_PRIVS
    return [sys.executable, "-c", code]


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    path = os.environ.get("KERNELEVO_BWRAP") or shutil.which("bwrap")
    return path if path and _runs([path, "--version"]) else None


def _probe(path: str) -> bool:
    return _runs(bwrap_command(["true"], Path("/"), [], [], gpu=False, bwrap=path))


@functools.lru_cache(maxsize=1)
def bwrap_works() -> bool:
    path = bwrap_path()
    return bool(path) and _probe(path)


@functools.lru_cache(maxsize=1)
def disable_userns_supported() -> bool:
    path = bwrap_path()
    return bool(path) and os.geteuid() != 0 and _runs([path, *_system_binds(), "--unshare-all", "--uid",
                                                       str(SANDBOX_UID), "--disable-userns", "--cap-drop", "ALL",
                                                       "true"])


@functools.lru_cache(maxsize=1)
def tmpfs_size_supported() -> bool:
    """Does this bubblewrap size a tmpfs (``--size``: 0.7 and later, and not setuid)?"""
    path = bwrap_path()
    return bool(path) and _runs([path, *_system_binds(), "--size", str(1 << 20), "--tmpfs", "/tmp", "true"])


@functools.lru_cache(maxsize=1)
def unshare_works() -> bool:
    path = shutil.which("unshare")
    return bool(path) and _runs([path, "--net", "--pid", "--fork", "--mount-proc", "true"])


def tier() -> str:
    """The namespace tier this machine offers: ``bwrap``, ``unshare`` or ``none``."""
    wanted = os.environ.get("KERNELEVO_ISOLATION")
    if wanted == "bwrap" and bwrap_works() or wanted == "unshare" and unshare_works() or wanted == "none":
        return wanted
    if bwrap_works():
        return "bwrap"
    return "unshare" if unshare_works() else "none"


def _system_binds() -> list[str]:
    """The system's programs and libraries, read-only, with the merged-/usr links as the host has them."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    return args


def python_paths() -> list[Path]:
    """Folders a job must read: the interpreter, its packages and kernelevo's sources."""
    import kernelevo.agent
    import kernelevo.sandbox
    import kernelevo.tasks

    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent}
    paths |= _package_folders()
    # kernelevo's sources (the agent's too: a reassembled network imports its run-time half)
    paths |= {Path(m.__file__).parent for m in (kernelevo.sandbox, kernelevo.tasks, kernelevo.agent)}
    return [q for p in _outermost(sorted(p.resolve() for p in paths)) for q in _enterable(p)]


def _package_folders() -> set[Path]:
    """The entries of ``sys.path`` a job may read: package folders (``site-packages``,
    ``dist-packages``), folders inside the interpreter's installation, and folders a ``.pth`` file in
    a package folder adds (torch built from source, say). Nothing else: not the working folder
    (``python -m`` puts it first), not a driver script's own folder (``python /somewhere/run.py`` puts
    that first, and it may be the project's checkout with its ``.env``, or all of /tmp), not a
    ``PYTHONPATH`` entry of the user's. Candidates import only what the allowlist names, and all of it
    lives in the folders kept."""
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    entries = [Path(e).resolve() for e in sys.path if e and Path(e).is_dir()]
    packages = {p for p in entries if p.name in ("site-packages", "dist-packages")}
    added = {q for p in packages for q in _pth_folders(p)}
    return {p for p in entries if p in packages or p in added or any(p.is_relative_to(x) for x in prefixes)}


def _pth_folders(packages: Path) -> set[Path]:
    """Folders the ``.pth`` files in ``packages`` add to ``sys.path`` (lines that name a folder; an
    ``import`` line runs code and adds nothing by itself)."""
    found: set[Path] = set()
    for pth in packages.glob("*.pth"):
        try:
            lines = pth.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if not line or line.startswith(("#", "import ", "import\t")):
                continue
            folder = (packages / line).resolve()
            if folder.is_dir():
                found.add(folder)
    return found


def _enterable(folder: Path) -> list[Path]:
    """``folder``, or where others may not enter it (a checkout in a private ``mktemp -d`` folder, or
    in a home), its sub-folders instead: a bind keeps the host's permissions, and the sandbox's user
    could not pass through it, while the parents bwrap creates for the sub-folders are open."""
    if folder.stat().st_mode & 0o001:
        return [folder]
    return [child for child in sorted(folder.iterdir()) if child.is_dir() and not child.is_symlink()]


TOOLS = ("gcc", "g++", "cc", "c++", "ld", "as", "nvcc", "ptxas", "ninja")


def toolchain_paths() -> list[Path]:
    """Install folders of the compilers a job may call (load_inline builds, Triton's launcher), where
    they live outside /usr (/opt/gcc, a CUDA toolkit under /opt, ...), and the library folders the
    environment points at."""
    found: set[Path] = set()
    names = [shutil.which(t) for t in TOOLS] + [os.environ.get(v) for v in ("CC", "CXX", "TRITON_PTXAS_PATH")]
    for name in names:
        if name:
            binary = Path(shutil.which(name) or name).resolve()
            found.add(binary.parent.parent if binary.parent.name == "bin" else binary.parent)
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            found.add(Path(os.environ[variable]).resolve())
    for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if entry and os.path.isabs(entry):  # a relative entry names the working folder, not a toolchain
            found.add(Path(entry).resolve())
    # Never a home folder (a compiler in ~/.local/bin would otherwise bind all of ~/.local, or $HOME).
    homes = {Path.home().resolve(), Path("/root"), Path("/home")}
    return [p for p in found if p.is_dir() and not p.is_relative_to("/usr") and p != Path("/")
            and not any(p == h or p.is_relative_to(h) for h in homes)]


def _outermost(paths: list[Path]) -> list[Path]:
    kept: list[Path] = []
    for p in sorted(set(paths), key=lambda q: len(q.parts)):
        if not any(p == k or p.is_relative_to(k) for k in kept):
            kept.append(p)
    return kept


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes a GPU job needs (control, each GPU, UVM, capabilities)."""
    dev = Path("/dev")
    return sorted(str(p) for p in dev.glob("nvidia*")) if dev.is_dir() else []


_HOST_TREES = (Path("/usr"), Path("/etc"), Path("/sys"), Path("/proc"), Path("/dev"))


def _parents(folders: list[Path]) -> list[str]:
    """``--dir`` for every folder above a bind that no host tree provides, traversable by the job's
    user (bubblewrap would copy the host's modes, and /root or a mkdtemp folder is 0700) but not
    listable: a listing would name the folders bound beside the job's (another job's outbox, the
    oracle's), and a path the job is handed needs no listing to be reached."""
    args, made = [], {Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")}
    for folder in folders:
        for parent in reversed(folder.parents):
            if parent in made or any(parent.is_relative_to(t) for t in _HOST_TREES):
                continue
            made.add(parent)
            args += ["--perms", "0111", "--dir", str(parent)]
    return args


PRIVATE_TMPFS = ("/dev/shm", "/tmp", "/var/tmp")
TMPFS_SHARE_OF_MEMORY = 4
"""Each private tmpfs holds at most this fraction (1/4) of the job's memory limit. A tmpfs lives in
memory that no process's resident size shows, so where limits are polled instead of enforced by a
cgroup, files written there would escape the limit; the three together stay under it."""


def bwrap_command(cmd: list[str], job_dir: Path, writable: list[Path], readable: list[Path], gpu: bool,
                  bwrap: str | None = None, moved: list[tuple[Path, str]] | None = None,
                  memory_bytes: int | None = None) -> list[str]:
    """Wrap ``cmd`` in bubblewrap (see the module's docstring for what the job sees); ``moved``: host
    folders bound writable at another path inside; ``memory_bytes``: the job's memory limit, which
    bounds its private tmpfs mounts."""
    path = bwrap or bwrap_path()
    assert path
    args = [path, *_system_binds(), "--ro-bind", "/etc", "/etc", "--ro-bind-try", "/sys", "/sys", "--proc", "/proc",
            "--dev", "/dev"]
    for private in PRIVATE_TMPFS:
        size = ["--size", str(max(memory_bytes // TMPFS_SHARE_OF_MEMORY, 1 << 20))] \
            if memory_bytes and tmpfs_size_supported() else []
        args += ["--perms", "1777", *size, "--tmpfs", private]
    for device in gpu_devices() if gpu else []:
        args += ["--dev-bind", device, device]
    # /dev itself is a tmpfs of bubblewrap's: read-only, or a job run by an ordinary user (who owns it
    # inside its user namespace) could fill it, memory outside every limit; the mounts in it stay as made
    args += ["--remount-ro", "/dev"]
    reads = [f for f in _outermost([*python_paths(), *toolchain_paths(), *readable])
             if not any(f.is_relative_to(t) for t in _HOST_TREES)]
    args += _parents(_outermost([*reads, *writable]))
    for folder in reads:
        args += ["--ro-bind", str(folder), str(folder)]
    for folder in writable:
        args += ["--bind", str(folder), str(folder)]
    for folder, inside in moved or []:
        args += ["--bind", str(folder), inside]
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
             "--hostname", "sandbox", "--die-with-parent", "--new-session", "--chdir", str(job_dir)]
    if os.geteuid() == 0:  # built as root; the job itself switches to the unprivileged user
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
                 "--", *drop_privileges()]
    else:
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
        args += ["--disable-userns"] if disable_userns_supported() else []
        args += ["--"]
    return args + cmd


def unshare_command(cmd: list[str], drop: bool = True) -> list[str]:
    """``cmd`` in new network and PID namespaces (and, with ``drop``, as the unprivileged user)."""
    path = shutil.which("unshare")
    assert path
    return [path, "--net", "--pid", "--fork", "--mount-proc", "--kill-child", *(drop_privileges() if drop else []),
            *cmd]


def hand_over(folder: Path) -> None:
    """Let the sandbox's user write ``folder`` (as root: make it that user's; otherwise it is ours).

    Once handed over, the folder is the sandboxed user's to shape, and another job of the same user
    may plant links in it: a link where the folder should be is removed, never followed, and the
    ownership is changed through the folder's own handle, entry by entry, without following links."""
    if folder.is_symlink():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for _, dirs, files, here in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            for name in [*dirs, *files]:
                try:
                    os.chown(name, SANDBOX_UID, SANDBOX_UID, dir_fd=here, follow_symlinks=False)
                except OSError:
                    pass
        os.fchown(top, SANDBOX_UID, SANDBOX_UID)
    finally:
        os.close(top)


def closed_ancestor(folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` (itself included) that the sandbox's user cannot enter:
    not enterable by others and not that user's. None when every step is open."""
    folder = folder.resolve()
    for step in [*reversed(folder.parents), folder]:
        try:
            info = os.stat(step)
        except OSError:
            return None  # not made yet: the folders made for it are opened to the sandbox's user
        if not info.st_mode & 0o001 and info.st_uid != SANDBOX_UID:
            return step
    return None


def read_no_follow(path: Path, limit: int | None = None) -> str:
    """The text of a file in a folder a sandboxed user can write (a job's log, ncu's CSV), read the way
    the trusted side must read it: never through a link, never a hard-linked or special file (the
    reader may be root, and what it reads may end up in a verdict). Its last ``limit`` bytes if given;
    "" where it is missing or is not such a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return ""
        if limit is not None and info.st_size > limit:
            os.lseek(fd, info.st_size - limit, os.SEEK_SET)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if limit is None else handle.read(limit)
    finally:
        os.close(fd)
    return data.decode(errors="replace")


def keep_tail(path: Path, keep: int) -> None:
    """Cut a job's log down to its last ``keep`` bytes once its process has ended: a candidate may print
    gigabytes, and its log must not hold the disk for the verdicts after its own. Never through a link,
    never a file linked elsewhere; never raises."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_size > keep:
            last = os.pread(fd, keep, info.st_size - keep)
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"[... the log's start is cut: it was " + str(info.st_size).encode() + b" bytes]\n" + last, 0)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_tree(folder: Path) -> None:
    """Remove ``folder`` and all beneath it, as a candidate may have filled it: links are removed, not
    followed, and no depth of folders makes it fail (``rm`` walks with handles and a stack of its own,
    where Python's walks recurse once a level). Never raises."""
    import subprocess

    try:
        if os.geteuid() != 0 and not os.path.islink(folder):
            # a candidate of the judge's own user may have closed folders to their owner (``chmod 0``):
            # open them again first (``chmod -R`` neither follows links nor changes them)
            subprocess.run(["chmod", "-R", "u+rwx", "--", str(folder)], capture_output=True, timeout=120,
                           check=False)
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(folder)], capture_output=True, timeout=120,
                       check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass


def keep_private(folder: Path, mode: int = 0o700) -> None:
    """Make ``folder`` the invoking user's alone (``mode``; 0o711 lets others enter a known name but
    not list or write): for the judge's own jobs where the sandbox cannot hide them from candidates.
    A link where the folder should be is removed, never followed."""
    if folder.is_symlink():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if os.geteuid() == 0:
            os.fchown(top, 0, 0)
        os.fchmod(top, mode)
    finally:
        os.close(top)


def write_into(folder: Path, name: str, data: bytes) -> Path:
    """Write ``data`` as ``folder/name``, replacing whatever is there, without following a link: the
    trusted side writes into folders a sandboxed user owns, where a link may have been planted to make
    it overwrite a host file. Raises OSError if the folder itself is a link, or a link races back in."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        with os.fdopen(out, "wb") as handle:
            handle.write(data)
    finally:
        os.close(fd)
    return folder / name


def open_log(path: Path) -> int:
    """A fresh log file at ``path`` for a job's output (a file descriptor), made as ``write_into`` makes
    files: a link planted there is removed, never followed."""
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            os.unlink(path.name, dir_fd=fd)
        except FileNotFoundError:
            pass
        return os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
    finally:
        os.close(fd)


def process_identity(pid: int) -> tuple[int | None, str | None]:
    """(uid, effective capabilities in hex) of a process, read from the host's /proc."""
    uid = caps = None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
            elif line.startswith("CapEff:"):
                caps = line.split()[1]
    except (OSError, ValueError, IndexError):
        pass
    return uid, caps
