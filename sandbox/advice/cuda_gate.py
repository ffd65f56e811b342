"""A compile gate for CUDA candidates on machines without a GPU: nvcc on the candidate's sources.

``nvcc -cubin -Xptxas -v`` for Hopper (sm_90a) reports registers, spills and shared memory per
kernel. It proves the sources compile; judging the candidate still needs a GPU. nvcc runs in the
process sandbox, as the candidate's process does: an ``#include`` of a host file would otherwise put
its first lines into an error message the model reads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

from kernelevo.sandbox.models import Check

_PTXAS = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def find_nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "nvcc"
    return shutil.which("nvcc") or (str(candidate) if candidate.exists() else None)


def summarize_ptxas(text: str) -> str:
    """'3 kernels: 40-64 registers, no spills' from ptxas -v output."""
    registers = [int(m) for m in _PTXAS.findall(text)]
    spills = [int(a) + int(b) for a, b in _SPILL.findall(text)]
    if not registers:
        return "no kernel reported by ptxas"
    spill = "no spills" if not any(spills) else f"spills up to {max(spills)} bytes"
    span = f"{min(registers)}-{max(registers)}" if min(registers) != max(registers) else str(registers[0])
    return f"{len(registers)} kernel(s): {span} registers, {spill}"


def _sandboxed(cmd: list[str], workdir: Path, includes: list[str]) -> list[str]:
    """``cmd`` in the best sandbox this machine offers, with ``workdir`` writable and the includes readable."""
    from kernelevo.sandbox.isolation import namespaces

    namespaces.hand_over(workdir)
    tier = namespaces.tier()
    if tier == "bwrap":
        nvcc_root = Path(cmd[0]).resolve().parent.parent
        return namespaces.bwrap_command(cmd, workdir, [workdir], [nvcc_root, *map(Path, includes)], gpu=False)
    if tier == "unshare":
        return namespaces.unshare_command(cmd)
    return [*namespaces.drop_privileges(), *cmd]


def compile_gate(cuda_sources: list[str], workdir: Path, arch: str = "sm_90a", timeout_s: float = 600) -> Check:
    """Compile the candidate's CUDA sources to a cubin; the check says what ptxas reported."""
    nvcc = find_nvcc()
    if nvcc is None:
        return Check(name="cuda compile gate", passed=False, detail="nvcc not found (set CUDA_HOME)")
    if not cuda_sources:
        return Check(name="cuda compile gate", passed=False,
                     detail="no CUDA source found statically: pass cuda_sources= a string literal "
                     "or a module-level string")
    import torch
    from torch.utils.cpp_extension import include_paths

    from kernelevo.sandbox.isolation.namespaces import keep_private, write_into

    # ``workdir`` stays ours; nvcc, as the sandbox's user, writes only ``build`` inside it, and the
    # headers we write for it sit beside, where no candidate can put a link in their place.
    keep_private(workdir, 0o755)
    build = workdir / "build"
    build.mkdir(exist_ok=True)
    source = write_into(build, "candidate_kernels.cu", "\n".join(cuda_sources).encode())
    compute = arch.replace("sm_", "compute_")
    cmd = [nvcc, "-cubin", f"-gencode=arch={compute},code={arch}", "-std=c++17", "-O3", "-Xptxas", "-v",
           "--expt-relaxed-constexpr", "-DTORCH_EXTENSION_NAME=kernelevo_gate",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
           "-I", sysconfig.get_paths()["include"], "-o", str(build / "candidate_kernels.cubin"), str(source)]
    paths = include_paths()
    # A CPU build of torch ships c10/cuda headers but not this generated one; CUDA builds define
    # only the shared-library switch in it, so a one-line shim stands in for the compile gate.
    if not any((Path(p) / "c10/cuda/impl/cuda_cmake_macros.h").exists() for p in paths):
        shim = workdir / "shim"
        for level in (shim, shim / "c10", shim / "c10" / "cuda", shim / "c10" / "cuda" / "impl"):
            keep_private(level, 0o755)
        write_into(level, "cuda_cmake_macros.h", b"#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        paths = [*paths, str(shim)]
    for path in paths:
        cmd[1:1] = ["-I", path]
    try:
        done = subprocess.run(_sandboxed(cmd, build, paths), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Check(name="cuda compile gate", passed=False, detail=f"nvcc took longer than {timeout_s:.0f} s")
    output = done.stdout + done.stderr
    if done.returncode != 0:
        errors = [line for line in output.splitlines() if "error" in line.lower()][:8]
        return Check(name="cuda compile gate", passed=False,
                     detail="nvcc failed: " + ("\n".join(errors) or output[-1500:]))
    return Check(name="cuda compile gate", passed=True, detail=f"nvcc {arch}: {summarize_ptxas(output)}")
