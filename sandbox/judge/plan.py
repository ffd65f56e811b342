"""What a judging session is given (``Plan``), how it stops (``Stop``), and how it greets the
processes it talks to: the vocabulary shared by the session and its phases."""

from __future__ import annotations

import json
import os
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelevo.sandbox import wire
from kernelevo.sandbox.isolation.protocol import Job
from kernelevo.sandbox.judge import rules
from kernelevo.sandbox.judge.record import Record
from kernelevo.sandbox.models import TimingPolicy
from kernelevo.tasks.task import Task

CONNECT_TIMEOUT_S = 180.0
"""How long a process may take to start (Python, torch and Triton imports) and connect."""



def trace_line(variable: str, fields: dict[str, Any]) -> None:
    """With the environment variable ``variable`` naming a file, append ``fields`` to it as a JSON line:
    what benchmarks ask of a session (``KERNELEVO_TIMING_TRACE``: each timed call's parts;
    ``KERNELEVO_SESSION_TRACE``: each request's round trip). Nothing reads it back."""
    path = os.environ.get(variable)
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(fields) + "\n")

class Stop(Exception):
    """The session cannot go on: ``who`` ("worker" or "oracle") failed during ``phase``;
    ``task_error``: the task itself is unusable (its reference raised or is not finite); ``broken``:
    the channel itself failed (a timeout, a closed socket), so no later request can be trusted."""

    def __init__(self, who: str, phase: str, detail: str, task_error: bool = False, broken: bool = False,
                 out_of_memory: dict[str, int] | None = None, disk_full: bool = False) -> None:
        super().__init__(detail)
        self.who, self.phase, self.detail, self.task_error, self.broken = who, phase, detail, task_error, broken
        self.out_of_memory = out_of_memory
        """The oracle ran out of device memory: the GPU's total, free and the oracle's own bytes."""
        self.disk_full = disk_full
        """The oracle could not write a file: no space left on the disk (or the user's quota)."""


def hello(job: Job, who: str) -> None:
    """Read a kept or new process's greeting (once), and its identity from the host's /proc."""
    if job.greeted:
        return
    job.phase = "starting"
    try:
        greeting = job.channel(CONNECT_TIMEOUT_S).recv(timeout=min(CONNECT_TIMEOUT_S, job.remaining()))
    except wire.ChannelError as exc:
        raise Stop(who, "starting", str(exc)) from None
    job.greeted = True
    if who == "worker":  # sent before the process imported any candidate code
        job.isolation.writes = str(greeting.get("confined", "not reported"))[:400]
    uid, caps = job.identity()
    job.isolation.uid, job.isolation.capabilities = uid, caps


def oracle_asker(oracle: Any, timeout_s: float) -> Any:
    """``ask(message, phase)`` for a kept oracle outside a session (the baselines)."""
    hello(oracle.job, "oracle")

    def ask(message: dict[str, Any], phase: str) -> dict[str, Any]:
        oracle.job.phase = phase
        try:
            reply = oracle.job.channel(CONNECT_TIMEOUT_S).request(message, timeout=min(timeout_s,
                                                                                       oracle.job.remaining()))
        except wire.ChannelError as exc:
            raise Stop("oracle", phase, str(exc)) from None
        if not reply.get("ok"):
            raise Stop("oracle", phase, str(reply.get("error")), bool(reply.get("task_error")),
                       out_of_memory=reply.get("out_of_memory"))
        return reply

    return ask


@dataclass
class Plan:
    """What to judge and how."""

    task: Task
    task_path: Path
    candidate_path: Path
    device: str
    timing: TimingPolicy
    checked_sets: int = rules.CHECKED_SETS
    init_seed: int = field(default_factory=lambda: secrets.randbits(64))
    """Seeds the parameters of both models, drawn in secret per session from the whole 64-bit range, as
    an unseeded torch process draws its own: a candidate that reads torch's seed in ``__init__``
    cannot tell a judge's construction from a user's."""
    strict_layout: bool = False
    worker_outbox: Path | None = None
    oracle_task_path: Path | None = None
    """The oracle's own copy of the task file (it cannot see the candidate's folder)."""
    forensic: bool = False
    """The forensic pass: the reference's constructor and a marker kernel before the candidate is
    imported, inputs as files from the oracle, checked calls only (``forensic.py``)."""
    oracle_outbox: Path | None = None
    oracle_timeout_s: float = 1200.0
    """The longest the oracle may take to answer one request."""
    cuda_graph: bool = False
    """Also time the candidate and the reference replayed as CUDA graphs, beside the plain calls."""
    eager_ms: float | None = None
    """The reference's cached eager time (its baseline), for the judge's-clock check of each round."""
    eager_peak_bytes: int | None = None
    """The task's own footprint on the GPU (``device_memory``), to say who ran the GPU out of memory."""


def fresh_seed() -> int:
    return secrets.randbelow(2**31 - 1) + 1


class SessionPart:
    """What each part of ``Session`` (its correctness and timing phases) may use of the whole."""

    plan: Plan
    record: Record
    oracle: Job
    worker: Job
    rng: random.Random
    reference_bytes: int
    ask: Callable[[Job, str, str, dict[str, Any]], dict[str, Any]]
    expect: Callable[[str, dict[str, Any]], dict[str, Any]]
    key: Callable[[], str]
    tolerance: Callable[[str], dict[str, Any]]
    _compare: Callable[..., dict[str, Any]]
    _delete_outputs: Callable[[dict[str, Any]], None]
    _timed_precision: Callable[[dict[str, Any], dict[str, Any]], None]
