"""The seam between judging and where a job runs: any Sandbox runs a RunSpec and reports its end."""

from __future__ import annotations

from typing import Protocol

from kernelevo.sandbox.models import JobOutcome
from kernelevo.sandbox.process import RunSpec


class Sandbox(Protocol):
    name: str

    def run(self, spec: RunSpec) -> JobOutcome:
        """Run ``spec.cmd`` isolated, within its limits, and report how it ended."""
        ...

    def kill_all(self) -> None:
        """Kill every job in flight (a run being stopped)."""
        ...
