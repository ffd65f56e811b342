"""What this machine offers kernelevo: GPU, driver, CUDA, compilers, profilers, Triton mode, Docker,
and the isolation the process sandbox can enforce. Every probe degrades to "not available"."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel

from kernelevo.sandbox.isolation import cgroups, namespaces


class Probe(BaseModel):
    item: str
    available: bool
    detail: str


def _version(cmd: list[str], pattern: str) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out.stdout + out.stderr)
    return match.group(1) if match else None


def _gpu() -> list[Probe]:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        names = []
        for i in range(count):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else name)
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        return [Probe(item="GPU", available=count > 0, detail=", ".join(f"{i}: {n}" for i, n in enumerate(names))),
                Probe(item="driver", available=True, detail=f"NVIDIA {driver} (NVML works)")]
    except Exception as exc:
        reason = type(exc).__name__
        return [Probe(item="GPU", available=False, detail=f"none found (NVML: {reason})"),
                Probe(item="driver", available=False, detail="no NVIDIA driver")]


def _torch() -> list[Probe]:
    try:
        import torch
    except ImportError:
        return [Probe(item="torch", available=False, detail="not installed")]
    cuda = torch.version.cuda
    usable = torch.cuda.is_available()
    probes = [Probe(item="torch", available=True,
                    detail=f"{torch.__version__}" + (f", CUDA {cuda} build" if cuda else ", CPU build"))]
    probes.append(Probe(item="CUDA", available=usable,
                        detail=f"usable from torch (CUDA {cuda})" if usable else "not usable from torch"))
    try:
        import triton

        mode = ("compiles for the GPU" if usable else
                "runs kernels on the CPU interpreter (TRITON_INTERPRET=1); timings mean nothing")
        probes.append(Probe(item="Triton", available=True, detail=f"{triton.__version__}: {mode}"))
    except ImportError:
        probes.append(Probe(item="Triton", available=False, detail="not installed"))
    return probes


def _tools() -> list[Probe]:
    from kernelevo.sandbox.advice.cuda_gate import find_nvcc

    probes = []
    nvcc = find_nvcc()
    version = _version([nvcc, "--version"], r"release ([\d.]+)") if nvcc else None
    probes.append(Probe(item="nvcc", available=bool(version),
                        detail=f"{version} at {nvcc}" if version else "not found: CUDA candidates cannot compile"))
    ncu = shutil.which("ncu")
    version = _version([ncu, "--version"], r"Version ([\d.]+)") if ncu else None
    probes.append(Probe(item="ncu", available=bool(version),
                        detail=f"{version} at {ncu}" if version else "not found: no Nsight Compute metrics"))
    return probes


def _docker() -> Probe:
    try:
        import docker

        from kernelevo.sandbox.isolation.docker import IMAGE

        client = docker.from_env(timeout=5)
        version = client.version().get("Version", "?")
        try:
            client.images.get(IMAGE)
            image = f"image {IMAGE} present (--sandbox auto uses Docker)"
        except Exception:
            image = f"no image {IMAGE}: `kernelevo sandbox build`"
        return Probe(item="Docker engine", available=True, detail=f"{version} reachable; {image}")
    except Exception as exc:
        return Probe(item="Docker engine", available=False, detail=f"not reachable ({type(exc).__name__})")


def _cuda_confined() -> str | None:
    """Where this machine has CUDA: why it does not start in a process confined as this machine's
    candidate jobs are (without namespaces: its own folders, the host devices a job may write, its
    own /proc; with them, where /dev is the sandbox's own, all of /dev); None where it does, or where
    there is no GPU to try."""
    import sys
    import tempfile

    import torch

    from kernelevo.sandbox.child import confine
    from kernelevo.sandbox.isolation import confinement

    if not torch.cuda.is_available():
        return None
    start = "import torch; torch.empty(1, device='cuda')"
    with tempfile.TemporaryDirectory() as scratch:
        allowed = (confinement.allowed_folders(Path(scratch), [], True, Path(scratch), private_proc=False)
                   if namespaces.tier() == "none" else [scratch, "/dev", confinement.PROC_OWN])
        env = {**os.environ, confine.WRITABLE_ENV: os.pathsep.join(allowed), "TMPDIR": scratch}
        try:
            done = subprocess.run([sys.executable, "-m", "kernelevo.sandbox.child.confine", sys.executable, "-c",
                                   start], env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return "starting CUDA took over 120 s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else f"exit {done.returncode}")[:300]


def _isolation() -> list[Probe]:
    tier = namespaces.tier()
    user = (f"uid {namespaces.SANDBOX_UID} (nobody)" if os.geteuid() == 0 else f"your own uid {os.geteuid()}")
    words = {
        "bwrap": f"bubblewrap: user, net, pid, ipc, uts and mount namespaces; jobs run as {user} with no capabilities; "
                 "only /usr, /etc, /sys, Python and kernelevo visible (read-only); no /run, no host /tmp or sockets",
        "unshare": "unshare only: net and pid namespaces; the host's files and /run are visible "
                   "(install bubblewrap)",
        "none": "NO ISOLATION: candidates share the network, /proc, sockets and files (install bubblewrap)",
    }
    group = cgroups.Cgroup.create(64 * 1024 * 1024, 64)
    if group is not None:
        limits = f"cgroup v{group.version}: memory and process limits enforced by the kernel"
        group.remove()
    else:
        limits = "no writable cgroups: memory and process limits are polled"
    from kernelevo.sandbox.child import confine
    from kernelevo.sandbox.isolation import confinement

    abi = confine.abi_version()
    writes = (f"Landlock ABI {abi}: candidate processes write only their outbox, compile cache and temporary "
              "folders, and ncu's trace is out of their reach" if abi and confinement.wanted() else
              f"not confined: {'turned off' if abi else 'this kernel has no Landlock'}; a candidate writes wherever "
              "its user may, ncu's forensic trace included")
    broken = _cuda_confined() if abi and confinement.wanted() else None
    if broken:
        writes = (f"Landlock ABI {abi}, but CUDA does not start in a confined process ({broken}): every GPU "
                  f"candidate would fail; {confinement.OFF_ENV}=0 turns the confinement off")
    return [Probe(item="isolation", available=tier == "bwrap", detail=words[tier]),
            Probe(item="writes", available=bool(abi) and confinement.wanted() and not broken, detail=writes),
            Probe(item="limits", available=group is not None, detail=limits),
            Probe(item="user", available=True, detail="root" if os.geteuid() == 0 else f"uid {os.geteuid()}")]


def probe_environment() -> list[Probe]:
    """Every probe, in the order ``kernelevo doctor`` shows them."""
    return [*_gpu(), *_torch(), *_tools(), _docker(), *_isolation()]
