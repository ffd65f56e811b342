"""Values that cross the process boundary between kernelevo and the sandboxed harness."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel as _PydanticModel
from pydantic import ConfigDict, Field


class BaseModel(_PydanticModel):
    """Models that round-trip NaN and Inf through JSON (a wrong output is often NaN)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")

HarnessMode = Literal["reference", "candidate"]


class Check(BaseModel):
    """One check the harness ran, and what it found, in words a user understands."""

    name: str
    passed: bool
    detail: str = ""


class TimingPolicy(BaseModel):
    """How the harness times on a GPU: warm-up, then until ``budget_s`` is spent (within the bounds)."""

    warmup: int = 3
    warmup_s: float = 0.25
    """Warm up for at least this long: an idle GPU's clocks take a while to ramp up."""
    min_runs: int = 25
    max_runs: int = 200
    budget_s: float = 1.0
    """Seconds of timed runs per block; each of the three blocks (candidate, reference, candidate)."""
    spot_checks: int = 3
    """Outputs of this many timed runs, chosen at random, are compared with the reference."""


class Job(BaseModel):
    """What the harness is asked to do; written to ``job.json`` in the job's own folder."""

    mode: HarnessMode
    task_path: Path
    size: Literal["small", "full"]
    dtype: str | None = None
    atol: float | None = None
    rtol: float | None = None
    allow_partial: bool = False
    declared_flops: float | None = None
    declared_bytes: float | None = None
    candidate_path: Path | None = None
    seeds: list[int] = Field(default_factory=lambda: [1, 2, 3, 4, 5])
    init_seed: int = 42
    sample_seed: int = 1234
    """Seeds the positions of the reference samples that the judge compares out of process."""
    device: Literal["cuda", "cpu"] = "cpu"
    timing: TimingPolicy = Field(default_factory=TimingPolicy)
    measure_ceilings: bool = False
    measure_compile: bool = True
    result_path: Path
    excess: list[list[float]] = Field(default_factory=list)
    """Candidate jobs: the reference's excess error per input set and output (from the clean process)."""


class TensorPrint(BaseModel):
    """A fingerprint of one output tensor: enough for a judge outside the candidate's process."""

    shape: list[int]
    dtype: str
    finite: bool
    sum: float
    abs_sum: float
    sample: list[float]
    """Values at positions drawn from ``Job.sample_seed``."""
    excess: float = 0.0
    """Reference prints only: how far eager itself strays from a float64 run of the same model on the
    same inputs beyond ``atol + rtol*|ref|`` (largest excess over the elements; 0 for nearly every
    task, large where fp32 sums cancel). See ``compare.SLACK_FACTOR``."""


class TimingStats(BaseModel):
    median_ms: float
    mean_ms: float
    min_ms: float
    p10_ms: float
    p90_ms: float
    runs: int

    @property
    def iqr_fraction(self) -> float:
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms > 0 else 0.0


class Ceilings(BaseModel):
    """Measured limits of one GPU: device-to-device copy bandwidth and matmul peaks per dtype."""

    device: str
    copy_gbps: float
    """Bytes read plus bytes written per second of a large device-to-device copy, in GB/s."""
    matmul_tflops: dict[str, float]
    """Peak of a large torch matmul per dtype; ``tf32`` is the fastest way to fp32 accuracy (3xTF32)."""


class ReferenceResult(BaseModel):
    """What the clean reference process measured (no candidate code ever ran in it)."""

    device: str
    output_prints: list[list[TensorPrint] | None] = Field(default_factory=list)
    """Fingerprints of the outputs per input set; None where the reference itself was not finite."""
    flops: float
    bytes: float
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    compile_error: str | None = None
    ceilings: Ceilings | None = None
    telemetry: dict | None = None
    torch_version: str
    triton_version: str | None = None
    phases: dict[str, float] = Field(default_factory=dict)
    started_at: float | None = None


class CandidateResult(BaseModel):
    """What the candidate process observed; the judge turns it into a verdict."""

    device: str
    compiled: bool
    checks: list[Check]
    output_prints: list[list[TensorPrint] | None] = Field(default_factory=list)
    """Fingerprints of the candidate's outputs per input set, for the judge outside this process."""
    reference_prints: list[list[TensorPrint] | None] = Field(default_factory=list)
    """Fingerprints of the reference as computed in the candidate's process (tamper check)."""
    launches: dict[str, int] = Field(default_factory=dict)
    torch_ops: dict[str, int] = Field(default_factory=dict)
    first_call_ms: float | None = None
    timing: Literal["cuda-events", "cpu-interpreter", "cpu"] | None = None
    candidate: TimingStats | None = None
    candidate_blocks: list[float] = Field(default_factory=list)
    """Median of each timed candidate block; their spread is the noise of this run."""
    reference: TimingStats | None = None
    telemetry: dict | None = None
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds spent in each harness phase."""
    started_at: float | None = None
    """Wall-clock time (epoch seconds) when the harness's main began: process start cost is before it."""


class HarnessResult(BaseModel):
    """The file the harness writes; ``payload`` is signed with a key the parent passed on stdin."""

    mode: HarnessMode
    reference: ReferenceResult | None = None
    candidate: CandidateResult | None = None
    error: str | None = None
    """The harness could not run the job at all (e.g. the task's reference raised)."""


class Isolation(BaseModel):
    """What the sandbox enforced for one job: reported with every verdict."""

    sandbox: str = "process"
    namespaces: list[str] = Field(default_factory=list)
    read_only_root: bool = False
    private_tmp: bool = False
    home_hidden: bool = False
    network: str = "host"
    memory_limit: str | None = None
    memory_enforced_by: str | None = None
    pids_limit: int | None = None
    timeout_s: float | None = None
    env: str = "scrubbed"
    device_lock: str | None = None
    """The GPU lock the job ran under (jobs sharing it never overlap on the GPU)."""
    device_lock_wait_s: float | None = None
    """Seconds the started process waited for that lock (not counted in its timeout or wall time)."""
    warnings: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        parts = [self.sandbox]
        if self.namespaces:
            parts.append("namespaces " + ",".join(self.namespaces))
        if self.read_only_root:
            parts.append("read-only root")
        parts.append(f"network {self.network}")
        if self.memory_limit:
            parts.append(f"memory {self.memory_limit} ({self.memory_enforced_by})")
        if self.pids_limit:
            parts.append(f"pids {self.pids_limit}")
        return "; ".join(parts)


class JobOutcome(BaseModel):
    """How the sandboxed process ended, seen from outside it."""

    returncode: int | None
    signal: str | None = None
    timed_out: bool = False
    out_of_memory: bool = False
    too_many_processes: bool = False
    wall_s: float
    result: HarnessResult | None = None
    result_problem: str | None = None
    """Why no trustworthy result came back (missing, unreadable, or not signed by the harness)."""
    payload: str | None = None
    """The result file's payload when its signature checked out, whatever it holds (side jobs such
    as a model's end-to-end check sign theirs too; ``result`` is set only for a harness result)."""
    log_tail: str = ""
    phase: str | None = None
    """The last phase the harness announced (for a timeout or a crash)."""
    isolation: Isolation


class Verdict(BaseModel):
    """The judgement of one candidate against one task: the contract of ``kernelevo eval --json``."""

    task: str
    candidate: str
    size: str
    compiled: bool
    correct: bool
    reason: str | None
    checks: list[Check]
    runtime_ms: float | None = None
    reference_runtime_ms: float | None = None
    compile_runtime_ms: float | None = None
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    timing: str | None = None
    device: str
    isolation: dict
    noise_pct: float | None = None
    first_call_ms: float | None = None
    flops: float | None = None
    bytes: float | None = None
    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    roofline_fraction: float | None = None
    bound: str | None = None
    launches: dict[str, int] = Field(default_factory=dict)
    telemetry: dict | None = None
    harness_overhead_s: float | None = None
    """Wall time of the candidate's job minus its own import, first call (compile) and timed runs."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds the harness spent in each phase of the candidate's job."""
    wall_s: float | None = None
    diagnosis: str | None = None
    """For an accepted candidate: its roofline and GPU state in one line (``sandbox/diagnosis.py``)."""


class KernelMetrics(BaseModel):
    """One kernel of a candidate as Nsight Compute measured it (its launches in the profiled call folded)."""

    name: str
    launches: int = 1
    duration_us: float
    """Total GPU time of its launches under ncu (clocks left alone; replay makes this a guide, not a timing)."""
    dram_pct: float | None = None
    """DRAM throughput, % of the peak sustained while it ran."""
    sm_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    l2_hit_pct: float | None = None
    dram_bytes: float | None = None
    block: str = ""
    grid: str = ""
    stalls: dict[str, float] = Field(default_factory=dict)
    """Warps stalled per issue, by reason (ncu's smsp__average_warps_issue_stalled_*)."""

    def top_stalls(self, n: int = 2) -> list[tuple[str, float]]:
        """The largest stall reasons; ``selected`` (the warp issued) is not a stall."""
        real = [(k, v) for k, v in self.stalls.items() if k != "selected" and v > 0]
        return sorted(real, key=lambda kv: -kv[1])[:n]


class Profile(BaseModel):
    """What the profile tool and ``kernelevo profile`` report for one candidate: advice, never a verdict."""

    task: str
    candidate: str
    device: str
    runtime_ms: float | None = None
    timing: str | None = None
    bound: str | None = None
    roofline_fraction: float | None = None
    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    telemetry: dict | None = None
    compiler: list[dict] = Field(default_factory=list)
    """Per compiled kernel: registers, spills and shared memory from ptxas (Triton gate or nvcc)."""
    kernels: list[KernelMetrics] = Field(default_factory=list)
    unavailable: dict[str, str] = Field(default_factory=dict)
    """Sections that could not be collected ("ncu", "nvml", "compiler", "timing") and why."""
    diagnosis: str = ""
    ncu_seconds: float | None = None
