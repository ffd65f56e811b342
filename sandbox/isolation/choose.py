"""Pick where jobs run: ``process``, ``docker``, or ``auto`` (Docker when an engine and the image are
there, otherwise the process sandbox, with a warning that says why)."""

from __future__ import annotations

from kernelevo.sandbox.isolation.process import ProcessSandbox
from kernelevo.sandbox.isolation.protocol import Sandbox

CHOICES = ("auto", "docker", "process")


def make_sandbox(choice: str) -> tuple[Sandbox, str | None]:
    """The sandbox for ``choice`` and a warning (None if none). ``docker`` without an engine or image
    raises ``DockerUnavailable`` (the CLI's exit code 3)."""
    if choice == "process":
        return ProcessSandbox(), None
    from kernelevo.sandbox.isolation.docker import DockerSandbox, DockerUnavailable

    if choice == "docker":
        return DockerSandbox(), None
    try:
        return DockerSandbox(), None
    except DockerUnavailable as exc:
        return ProcessSandbox(), f"warning: {exc}; using the process sandbox"
