"""The seam between judging and where a job runs: a Sandbox starts a RunSpec as a Job, which talks
over its channel (if it has one) and reports how it ended."""

from __future__ import annotations

from typing import Protocol

from kernelevo.sandbox import wire
from kernelevo.sandbox.isolation.process import RunSpec
from kernelevo.sandbox.models import Isolation, JobOutcome


class Job(Protocol):
    isolation: Isolation
    greeted: bool
    """Whether the job's greeting on its channel has been read (kept processes greet once)."""
    phase: str | None
    """What the job is doing, set by whoever drives it: an outcome reports it."""

    def channel(self, timeout: float = 120.0) -> wire.Channel:
        """The job's connected channel."""
        ...

    def alive(self) -> bool: ...

    def remaining(self) -> float:
        """Seconds left before the job's deadline."""
        ...

    def extend(self, seconds: float) -> None:
        """Move the deadline (time spent waiting for the GPU is not the job's)."""
        ...

    def set_deadline(self, seconds: float) -> None:
        """A new deadline, ``seconds`` from now."""
        ...

    def identity(self) -> tuple[int | None, str | None]:
        """The uid and effective capabilities of the job's process, as the host sees them."""
        ...

    def host_pids(self) -> set[int]:
        """The job's processes as the host numbers them (empty once it has ended)."""
        ...

    def pause(self) -> None:
        """Stop every process of the job until :meth:`resume` (its GPU work already queued goes on);
        ``pausing.PauseFailed`` where the job's own processes keep that from holding."""
        ...

    def resume(self) -> bool:
        """Let the job go on; False where any of its processes ran while it was paused."""
        ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> JobOutcome:
        """Wait for the end (killing the job at its deadline) and say how it ended."""
        ...


class Sandbox(Protocol):
    name: str
    trusted_as_sandbox_user: bool
    """The judge's own jobs (the reference's oracle) run as the sandbox's unprivileged user too, each in a
    file system of its own, so their folders are handed to that user; otherwise they keep the invoking
    user and their folders stay out of the candidates' reach."""

    def start(self, spec: RunSpec) -> Job:
        """Start ``spec.cmd`` isolated, within its limits."""
        ...

    def run(self, spec: RunSpec) -> JobOutcome:
        """Start, then wait for the end."""
        ...

    def kill_all(self) -> None:
        """Kill every job in flight (a run being stopped)."""
        ...
