"""The command a candidate's job runs as: its launcher (ncu), then the Landlock confiner, then the job.

The confiner (``sandbox/child/confine.py``) restricts the job to writing beneath the folders the
sandbox lets it write, whoever owns the rest; a launcher runs outside that restriction, so ncu can
write the kernel trace where the candidate's process cannot. The judge's own jobs are not confined.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kernelevo.sandbox.child import confine
from kernelevo.sandbox.isolation import namespaces

PRIVATE_FOLDERS = ("/tmp", "/var/tmp", "/dev")
"""Written by every job where the sandbox makes them its own (bubblewrap, Docker): its temporary
folders and devices (/dev/null, the GPU's nodes, /dev/shm)."""

HOST_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
"""The host's devices a job may write where /dev is the host's (no bubblewrap), besides the GPU's
nodes: not /dev/shm, which every user of the host shares."""

PROC_PRIVATE, PROC_OWN = "/proc", "/proc/self"
"""What of /proc a job may write. The CUDA driver writes there as it starts (without it every CUDA
call fails with error 304, "OS call failed"). A job may write its own process's entry: the confiner
opens ``/proc/self``, which names its PID, and becomes the job. A job whose children use CUDA too (ncu
inside the confinement, starting its target) may write all of /proc where its PID namespace is its
own (bubblewrap, unshare, Docker), which shows its processes and the launcher's only; never where
/proc is the host's."""

LAUNCHER_FOLDER = "{launcher_folder}"
"""Stands in the launcher's arguments for its folder as the job sees it."""

LAUNCHER_FOLDER_INSIDE = "/kernelevo-launcher"
"""Where bubblewrap and Docker mount the launcher's folder: beneath none of the folders the job may
write (a run folder often lies in /tmp, which the job may write), so confinement keeps it out."""

CACHE_INSIDE = "/kernelevo-cache"
"""Where bubblewrap and Docker mount a candidate's job's compile cache: one path for every process, so
that build files naming their folder (a torch extension's) stay valid when the judge carries a cache
from one process to the next; and beneath none of the folders the job may write, so that the rule for
its private /tmp does not also cover the run's cache when the run's folder lies in /tmp."""

LAUNCHER_EXPOSED = "the launcher's folder is within the candidate's reach"
"""The isolation warning that says a launcher's output (ncu's trace) could be the candidate's writing."""

OFF_ENV = "KERNELEVO_LANDLOCK"
"""``0`` turns confinement off (a kernel or driver where it breaks a job); verdicts then say so."""


def cache_as_seen(cache: Path | None, env: dict[str, str], mounted: bool) -> list[str]:
    """The job's compile cache as the job sees it (none, or one folder); where the sandbox ``mounted``
    it at ``CACHE_INSIDE``, the variables in ``env`` that name it are rewritten to match."""
    if cache is None:
        return []
    if not mounted:
        return [str(cache)]
    prefix = str(cache)
    for name, value in env.items():
        if value == prefix or value.startswith(prefix + "/"):
            env[name] = CACHE_INSIDE + value[len(prefix):]
    return [CACHE_INSIDE]


def wanted() -> bool:
    return os.environ.get(OFF_ENV, "1") != "0"


def allowed_folders(job_dir: Path, writable: list[Path], folder_writable: bool,
                    private_tmp: Path | None = None, *, private_proc: bool) -> list[str]:
    """Where a job may write: its folder if it may, its writable folders, and either the sandbox's
    private /tmp, /var/tmp and /dev, or, where those are the host's, ``private_tmp`` and the devices
    it needs; /proc as ``private_proc`` (the job's own PID namespace) allows."""
    own = [*([str(job_dir)] if folder_writable else []), *(str(p) for p in writable),
           PROC_PRIVATE if private_proc else PROC_OWN]
    if private_tmp is None:
        return [*own, *PRIVATE_FOLDERS]
    return [*own, str(private_tmp), *HOST_DEVICES, *namespaces.gpu_devices()]


def private_tmp_for(job_dir: Path) -> Path:
    """A candidate's job's temporary folder where /tmp is the host's: beside its folder, not in it
    (which holds what the next process imports)."""
    return job_dir.with_name(job_dir.name + "-tmp")


def command(cmd: list[str], launcher: list[str], allowed: list[str], trusted: bool,
            python: str = sys.executable, launcher_folder: str = "",
            shares_host: bool = False) -> tuple[list[str], dict[str, str]]:
    """``(argv, extra environment)`` for a job: ``launcher + confiner + cmd`` for a candidate's job;
    ``launcher_folder``: the launcher's folder as the job sees it; ``shares_host``: the job shares the
    host's PID and network namespaces, so it is also kept from signalling or reaching the abstract
    sockets of processes outside it."""
    launcher = [part.replace(LAUNCHER_FOLDER, launcher_folder) for part in launcher]
    if trusted:
        return [*launcher, *cmd], {}
    if not wanted():
        return [*launcher, *cmd], {confine.STATUS_ENV: f"not confined: turned off ({OFF_ENV}=0)"}
    return ([*launcher, python, "-m", "kernelevo.sandbox.child.confine", *cmd],
            {confine.WRITABLE_ENV: os.pathsep.join(allowed), **({confine.SCOPE_ENV: "1"} if shares_host else {})})


def within_reach(folder: str, allowed: list[str]) -> bool:
    """Whether ``folder`` lies beneath a folder the job may write (so confinement cannot keep it out)."""
    return any(Path(folder).is_relative_to(a) for a in allowed)
