"""Confine a job to writing where it may, then become it: ``python -m kernelevo.sandbox.child.confine CMD...``.

Runs inside the sandbox, before any candidate code, and imports nothing but the standard library.
Folders and user ids alone cannot keep a candidate's process from writing a file its own user may
write: a job run without root shares its user with every folder the run made, and ncu, which writes
the forensic kernel trace, runs as the candidate's user. Landlock, the kernel's unprivileged access
control, can: this process restricts itself to writing beneath the folders named in
``KERNELEVO_WRITABLE`` (its outbox, its compile cache, its private temporary folders, /dev, and its
/proc, where the CUDA driver writes as it starts), and the restriction holds for every process it
becomes or starts, irrevocably. A confined process also cannot trace or read the memory and open
files of a process outside its domain (ncu, which starts it).

Reading is not restricted: what a job may read is the sandbox's business (bubblewrap binds, Docker
mounts). Where the kernel has no Landlock the command runs unconfined, and ``KERNELEVO_CONFINED``
says why, for the verdict to report.
"""

from __future__ import annotations

import ctypes
import os
import sys

WRITABLE_ENV = "KERNELEVO_WRITABLE"
STATUS_ENV = "KERNELEVO_CONFINED"
SCOPE_ENV = "KERNELEVO_SCOPE"
"""``1``: also keep the job from signalling, or connecting to abstract sockets of, processes outside
it (where it shares the host's PID and network namespaces)."""

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on x86-64 and arm64
_VERSION_FLAG, _RULE_PATH_BENEATH, _PR_SET_NO_NEW_PRIVS = 1, 1, 38

# Access rights to the file system (linux/landlock.h). Only writing is handled; reading, running
# programs and device ioctls (the GPU's) stay as the sandbox allows them.
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # from ABI 2 and 3
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # from ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """Landlock's ABI version on this kernel; 0 where it has none (or a seccomp filter refuses it)."""
    try:
        found = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG))
    except (OSError, AttributeError):
        return 0
    return max(int(found), 0)


def handled_rights(abi: int) -> int:
    return (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE | (_REFER if abi >= 2 else 0)
            | (_TRUNCATE if abi >= 3 else 0))


def restrict_writes(allowed: list[str], scope: bool = False) -> str:
    """Let this process (and all it becomes or starts) write beneath ``allowed`` only; with ``scope``
    (and ABI 6), signal and reach abstract sockets only within itself. Returns what was enforced, in
    words: "landlock ABI N: ..." or "not confined: why"."""
    abi = abi_version()
    if abi < 1:
        return "not confined: this kernel has no Landlock"
    libc, handled = _libc(), handled_rights(abi)
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if scope and abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"not confined: creating the ruleset failed ({os.strerror(ctypes.get_errno())})"
    kept = []
    try:
        for path in allowed:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not there: nothing to allow
            pinned = False
            try:
                rights = handled if os.path.isdir(path) else handled & (_WRITE_FILE | _TRUNCATE)
                rule = _PathBeneath(rights, fd)
                if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) == 0:
                    kept.append(path)
                    # A rule holds an inode, and procfs makes a new one for /proc/<pid> once memory
                    # pressure evicts the old: an open descriptor, kept across the exec, keeps it.
                    pinned = path.startswith("/proc/")
                    if pinned:
                        os.set_inheritable(fd, True)
            finally:
                if not pinned:
                    os.close(fd)
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"not confined: restricting itself failed ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    scope_words = "; signals and abstract sockets only within the job" if scoped else ""
    return f"landlock ABI {abi}: writes only beneath {', '.join(kept) or 'nothing'}{scope_words}"


def close_inherited_writers(allowed: list[str]) -> list[str]:
    """Close the files this process inherited open for writing beneath no folder in ``allowed`` (a log
    its launcher opened before starting it, say): Landlock checks a path when it is opened, so such a
    descriptor would still write where the job may not. Returns the paths closed."""
    import fcntl
    import stat

    closed = []
    try:
        numbers = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return closed
    for fd in numbers:
        try:
            if fd <= 2 or not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                continue
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if not any(path == a or path.startswith(a.rstrip("/") + "/") for a in allowed):
            os.close(fd)
            closed.append(path)
    return closed


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m kernelevo.sandbox.child.confine CMD [ARGS...]", file=sys.stderr)
        return 2
    allowed = [p for p in os.environ.pop(WRITABLE_ENV, "").split(os.pathsep) if p]
    closed = close_inherited_writers(allowed)
    os.environ[STATUS_ENV] = restrict_writes(allowed, os.environ.pop(SCOPE_ENV, "") == "1") + (
        f"; closed {len(closed)} inherited file(s) open for writing elsewhere" if closed else "")
    if argv[0] == sys.executable:
        # the same interpreter, through the link the kernel keeps to it: its path may run through a
        # folder the job's user cannot search (a Python installed under /root), which the first
        # start was let through and a second lookup by name would not be
        os.execv("/proc/self/exe", argv)
    os.execvp(argv[0], argv)
    return 127  # exec raises rather than returns


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
