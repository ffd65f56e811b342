"""What a judging session found, before it becomes a verdict (plain data, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelevo.sandbox.judge.timing import Block
from kernelevo.sandbox.models import Check, Isolation, JobOutcome

PART_ELEMENTS = 4096
"""Outputs at least this large are held to the precision rule on their own too: their sums are over
enough values not to hang on one value's luck."""


@dataclass
class PrecisionSums:
    """Sums over every checked output that has a float64 reference (``rules.precision_problem``)."""

    err_candidate: float = 0.0
    err_eager: float = 0.0
    magnitude: float = 0.0
    outputs: int = 0
    parts: list[tuple[float, float, float]] = field(default_factory=list)
    """Each large output of each set on its own (err_candidate, err_eager, magnitude), which the rule
    holds in half precision: one set on which eager itself is far off (statistics that overflowed on
    large values) would otherwise carry the sums of every set."""

    def add(self, stats: dict) -> None:
        if stats.get("err_candidate") is None:
            return
        self.err_candidate += stats["err_candidate"]
        self.err_eager += stats["err_eager"]
        self.magnitude += stats["magnitude"]
        self.outputs += 1
        if int(stats.get("elements") or 0) >= PART_ELEMENTS:
            self.parts.append((stats["err_candidate"], stats["err_eager"], stats["magnitude"]))


class HarnessFault(Exception):
    """The judge could not judge (its sandbox kept the device out): no verdict, the run stops and says why."""


@dataclass
class Record:
    """One session: the checks it ran, the times it saw, and how its processes ended."""

    device: str
    checks: list[Check] = field(default_factory=list)
    compiled: bool = False
    first_call_ms: float | None = None
    reference_fingerprints: list = field(default_factory=list)
    """A digest of the reference's outputs per checked set: all equal, the reference ignores its inputs."""
    max_abs_error: float = 0.0
    """The largest |candidate - eager| over every checked output."""
    launches: dict[str, int] = field(default_factory=dict)
    torch_ops: dict[str, int] = field(default_factory=dict)
    precision: PrecisionSums = field(default_factory=PrecisionSums)
    timed_precision: PrecisionSums = field(default_factory=PrecisionSums)
    precision_by_mode: dict[str, PrecisionSums] = field(default_factory=dict)
    """The checked sets of values as the task makes them (not scaled up, not shifted), summed apart by
    how they were called (gradients on or off, inputs made anew or refilled): a kernel less precise in
    one way of calling alone would hide in the sums of every set, which the far sets carry."""
    """The same sums over the timed calls that were checked (and the forensic pass's calls)."""
    blocks: list[Block] = field(default_factory=list)
    """The candidate's timed blocks (two on a GPU)."""
    reference_block: Block | None = None
    """The reference, re-timed in the oracle through the same protocol between the candidate's blocks."""
    clock_retry: str | None = None
    """Why the first round of timed calls was timed again: its calls took more wall time beyond their
    reported times than the judge's clock allows (``timing.clock_problem``). Only the second round's
    blocks are kept."""
    clock_first: dict | None = None
    """The first round's clock figures (``timing.clock_figures``) where it was timed again."""
    graph_block: Block | None = None
    """``--cuda-graph``: the candidate's replays of its captured forward."""
    graph_reference_block: Block | None = None
    graph_note: str | None = None
    """Why there is no CUDA-graph time (capture failed, replays wrong, no GPU)."""
    oracle_unfit: bool = False
    """The oracle did something this session that another must not inherit (a CUDA-graph capture)."""
    telemetry: dict | None = None
    phases: dict[str, float] = field(default_factory=dict)
    worker: JobOutcome | None = None
    oracle: JobOutcome | None = None
    worker_isolation: Isolation | None = None
    failure: str | None = None
    """Why the session could not finish: the candidate's process ended, hung, or broke the protocol."""
    reference_error: str | None = None
    """The task's own reference failed (not the candidate's fault)."""
    reference_failed_beside: bool = False
    """The reference stopped answering (a timeout, a lost channel) while the candidate's process ran
    beside it: a reference that had worked before may have been starved (a GPU or host kept busy)."""
    harness_error: str | None = None
    """The candidate's process could not do its work before any candidate code ran (CUDA did not start
    in its sandbox): the judge's fault, never the candidate's."""
    worker_end: str | None = None
    """How the candidate's process ended, in words, where CUDA did not start in it."""
    cuda_start_failed: bool = False
    """The harness error is CUDA not starting (or the process ending while it started): no candidate code
    had run, so the session may be tried again in a fresh process."""
    worker_modules: list[str] = field(default_factory=list)
    peak_bytes: dict[str, int] = field(default_factory=dict)
    """Peak device memory of the oracle and (as reported) the candidate's process."""
    worker_folder: Path | None = None
    worker_outbox: Path | None = None
    worker_trace: Path | None = None
    exact_note: str | None = None
    """The first note on a float64 reference: made on the host (no room on the GPU), or missing (the
    model cannot run in float64)."""

    def add(self, name: str, passed: bool, detail: str = "", compared: bool = False) -> bool:
        self.checks.append(Check(name=name, passed=passed, detail=detail, compared=compared))
        return passed

    @property
    def ok(self) -> bool:
        return self.failure is None and self.reference_error is None and all(c.passed for c in self.checks)
