"""The seam between judging and where a job runs: any Sandbox runs a RunSpec and reports its end."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable
from pathlib import Path
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


def receive_key_and_go() -> bytes:
    """The child's side of a sandbox's start: the signing key, from a file the Docker sandbox names
    (deleted at once) or from the first line on stdin; then, on stdin, wait for "go" (the sandbox
    holds the GPU's lock from then on). Call it before any candidate code is imported."""
    key_file = os.environ.pop("KERNELEVO_KEY_FILE", None)
    if key_file:
        key = Path(key_file).read_text().strip().encode()
        Path(key_file).unlink(missing_ok=True)
        return key
    import sys

    key = sys.stdin.readline().strip().encode()
    sys.stdin.readline()
    return key


def signed_writer(key: bytes) -> Callable[[Path, str], None]:
    """A function that writes a payload where the sandbox reads it back (``process._read_result``):
    ``{"payload", "signature"}``, HMAC-SHA256 with ``key``, replaced atomically. Make it before any
    candidate code is imported: it keeps its own references to what it signs with."""
    new, sha256, dumps = hmac.new, hashlib.sha256, json.dumps

    def write(path: Path, payload: str) -> None:
        signature = new(key, payload.encode(), sha256).hexdigest()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(dumps({"payload": payload, "signature": signature}))
        tmp.replace(path)

    return write
