"""Values that cross a process boundary: from the oracle and the sandboxes to the judge, and the verdict
to users and the agent. Pydantic, so that what a sandboxed process sends is validated, never trusted."""

from __future__ import annotations

from pydantic import BaseModel as _PydanticModel
from pydantic import ConfigDict, Field


class BaseModel(_PydanticModel):
    """Models that round-trip NaN and Inf through JSON (a wrong output is often NaN)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")

class Check(BaseModel):
    """One check the judge ran, and what it found, in words a user understands."""

    name: str
    passed: bool
    detail: str = ""
    compared: bool = False
    """The check compared the candidate's outputs with the reference's (a failure is a wrong output,
    not a crash, a broken rule or a time)."""


class TimingPolicy(BaseModel):
    """How candidates and baselines are timed on a GPU: warm-up, then timed calls until ``budget_s``
    is spent (within the bounds), in two candidate blocks around a re-timing of the reference."""

    warmup: int = 3
    warmup_s: float = 0.25
    """Warm up for at least this long: an idle GPU's clocks take a while to ramp up."""
    min_runs: int = 25
    max_runs: int = 200
    budget_s: float = 1.0
    """Seconds of timed calls per block (candidate, reference, candidate)."""
    calls_per_request: int = Field(default=1, ge=1, le=8)
    """Timed calls made in one request, one after another, each on fresh inputs with its output
    digested and kept, held together to the judge's clock (each call keeps the clock's whole fixed
    allowance, ``timing.UNEXPLAINED_MS``: the gap it allows was measured per call). Fewer where the
    reference's output is large: the candidate's process keeps every output of a request until the
    session has drawn which to check (``timed_calls.KEPT_OUTPUT_BYTES``). On a GPU each call counts as
    its request's mean, one call of every request is checked and ``min_runs`` counts requests: work
    skipped in one call of each request escapes with chance (1 - 1/K)^min_runs at most (K = 4:
    under 0.1%; K = 8: 3.5%)."""
    spot_checks: int = 3
    """Each timed call's output is shipped and checked by the oracle with chance ``spot_checks`` in
    ``min_runs``, drawn after the call and apart from every other draw (so the candidate cannot know in
    advance); a block goes on until it has at least this many checks."""
    sample_from_bytes: int = Field(default=64 << 20, ge=0)
    """A checked timed call whose reference output is at least this large ships ``sampled_leaves``
    leaves of each output, drawn after the call and tied to its digest, instead of the whole output
    (``judge/sampled.py``): at gigabytes a whole output costs seconds a check."""
    sampled_leaves: int = Field(default=128, ge=1)
    whole_share: float = Field(default=0.25, ge=0.0, le=1.0)
    """The share of checks above ``sample_from_bytes`` that still ship whole outputs (drawn after the
    call); besides, one call among each block's ``min_runs``, drawn in secret, is checked whole."""


class OutputStats(BaseModel):
    """The oracle's comparison of one candidate output with the reference's (raw tensors, in a
    process no candidate code ran in)."""

    problem: str | None = None
    """Why the output is wrong, in words; None when it matches within the tolerance."""
    elements: int = 0
    eager_error: float = 0.0
    """How far eager itself strays from a float64 run on the same inputs (its largest error)."""
    sensitivity: float = 0.0
    """How far eager's output moves when every input moves by one unit in its last place."""
    max_abs_error: float = 0.0
    """The largest |candidate - eager| over the elements."""
    err_candidate: float | None = None
    """Sum of |candidate - float64 reference| over the elements (None without a float64 reference)."""
    err_eager: float | None = None
    """Sum of |eager - float64 reference|."""
    magnitude: float | None = None
    """Sum of |float64 reference|."""

class TimingStats(BaseModel):
    median_ms: float
    """The median of the timed calls."""
    mean_ms: float
    min_ms: float
    p10_ms: float
    p90_ms: float
    runs: int
    pace_ms: float | None = None
    """Per call in a loop of back-to-back calls (GPU only; ``sandbox/judge/timing.py``): reported,
    not counted."""

    @property
    def iqr_fraction(self) -> float:
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms > 0 else 0.0


class Ceilings(BaseModel):
    """Measured limits of one GPU: device-to-device copy bandwidth and matmul peaks per dtype."""

    device: str
    copy_gbps: float
    """Bytes read plus bytes written per second of a large device-to-device copy, in GB/s."""
    matmul_tflops: dict[str, float]
    """Peak of a large torch matmul per dtype; ``tf32`` bounds fp32-accurate products on tensor cores
    (split into bf16 or TF32 parts, several products per fp32 one)."""
    sms: int | None = None
    """Streaming multiprocessors (what a grid must fill)."""
    shared_bytes_per_sm: int | None = None
    l2_bytes: int | None = None
    capability: str | None = None
    """Compute capability, e.g. ``9.0``."""


class ReferenceResult(BaseModel):
    """Baselines measured in a clean process (no candidate code ever ran in it), cached per task:
    the work one call does, eager and ``torch.compile`` times, and the GPU's ceilings."""

    device: str
    flops: float
    bytes: float
    output_dtypes: list[str] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)
    """Each input as ``dtype[shape]`` (a tensor) or its type's name."""
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    compile_error: str | None = None
    ceilings: Ceilings | None = None
    telemetry: dict | None = None
    torch_version: str
    triton_version: str | None = None
    phases: dict[str, float] = Field(default_factory=dict)
    eager_peak_bytes: int | None = None
    """Peak device memory of one eager call, its inputs and outputs included (GPU only): the task's own
    footprint, against which the judge's is measured."""
    device_total_bytes: int | None = None
    """The GPU's memory, as the driver reports it (GPU only)."""


class Isolation(BaseModel):
    """What the sandbox enforced for one process: reported with every verdict."""

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
    uid: int | None = None
    """The process's user id as the host sees it (read from /proc by the sandbox, not reported by
    the process)."""
    capabilities: str | None = None
    """Its effective capability set (hex, /proc/PID/status CapEff); 0 means none."""
    writes: str | None = None
    """Where the candidate's process may write, as its confiner enforced it before any candidate code
    ran (Landlock), or why it is not confined."""
    device_lock: str | None = None
    """The GPU lock the job ran under (jobs sharing it never overlap on the GPU)."""
    device_lock_wait_s: float | None = None
    """Seconds the job waited for that lock (not counted in its timeout or wall time)."""
    warnings: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        parts = [self.sandbox]
        if self.namespaces:
            parts.append("namespaces " + ",".join(self.namespaces))
        if self.uid is not None:
            parts.append(f"uid {self.uid}, capabilities {self.capabilities or '?'}")
        if self.read_only_root:
            parts.append("read-only root")
        if self.writes:
            parts.append("writes confined" if self.writes.startswith("landlock") else self.writes)
        parts.append(f"network {self.network}")
        if self.memory_limit:
            parts.append(f"memory {self.memory_limit} ({self.memory_enforced_by})")
        if self.pids_limit:
            parts.append(f"pids {self.pids_limit}")
        return "; ".join(parts)


class JobOutcome(BaseModel):
    """How a sandboxed process ended, seen from outside it."""

    returncode: int | None
    signal: str | None = None
    timed_out: bool = False
    out_of_memory: bool = False
    too_many_processes: bool = False
    too_many_files: bool = False
    """Killed for creating more files in its writable folders than ``file_watch.FILES_LIMIT``."""
    wall_s: float
    log_tail: str = ""
    phase: str | None = None
    """What the process was doing when it ended (for a timeout or a crash)."""
    killed_by_judge: bool = False
    """The judge ended it while it ran (after it broke the protocol, say): its SIGKILL is no crash."""
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
    assurance: str = ""
    """How far the verdict can be trusted: ``forensic`` (on a GPU, the kernel trace taken outside the
    candidate's Python agrees), or why not (``interpreter: not forensic``, ``gpu: not forensic ...``)."""
    runtime_ms: float | None = None
    reference_runtime_ms: float | None = None
    compile_runtime_ms: float | None = None
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    timing: str | None = None
    device: str
    isolation: dict
    noise_pct: float | None = None
    graph_runtime_ms: float | None = None
    """``--cuda-graph``: the median replay of the candidate's forward captured as a CUDA graph, beside
    ``runtime_ms`` (never instead of it)."""
    graph_reference_ms: float | None = None
    """The reference's forward replayed as a CUDA graph, timed the same way."""
    graph_note: str | None = None
    """Why a CUDA-graph time asked for is missing or doubtful."""
    host_ms: float | None = None
    """Median host time of the candidate's ``forward`` in its timed calls (for information: the
    timed figure counts host time only where it kept the GPU waiting)."""
    pace_ms: float | None = None
    """Per call in a loop of back-to-back calls, as the candidate's process reported it (GPU only):
    for information, never counted (``sandbox/judge/timing.py``, ``host_bound``)."""
    host_bound: bool = False
    """``pace_ms`` exceeds ``runtime_ms`` by more than ``timing.PACE_MARGIN``: by its own report,
    ``forward``'s host work, not its kernels, would set the pace in a loop of its calls."""
    reference_pace_ms: float | None = None
    """The same for the eager reference, from its baseline (measured by the oracle)."""
    memory: dict[str, int] | None = None
    """Peak device memory in bytes (GPU only): ``eager`` (one eager call, the task's footprint),
    ``oracle`` (the judge's process for this evaluation) and ``candidate`` (as its process reported it)."""
    first_call_ms: float | None = None
    max_abs_error: float | None = None
    """The largest |candidate - eager| over every checked output."""
    precision_ratio: float | None = None
    """The candidate's summed error against float64 over eager's, on the checked outputs that have a
    float64 reference (None where none has): near 1 for a kernel as exact as eager, tens for three bf16
    products per fp32 one, thousands for TF32 (``judge/rules.py``)."""
    flops: float | None = None
    bytes: float | None = None
    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    roofline_fraction: float | None = None
    bound: str | None = None
    launches: dict[str, int] = Field(default_factory=dict)
    telemetry: dict | None = None
    forensic: dict | None = None
    """The forensic pass's findings (kernels seen, their time per call) where one ran."""
    clock: dict | None = None
    """What the judge's clock check decided from (``timing.clock_figures``): the wall time per timed call
    left unexplained beyond the reference's, the allowance, the median call (ms); where a first round
    was doubted and timed again, its figures too (``first_round``)."""
    harness_overhead_s: float | None = None
    """Wall time of the evaluation minus the candidate's import, first call and timed calls."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Seconds the evaluation spent in each phase."""
    wall_s: float | None = None
    log: str | None = None
    """The candidate's process's log (its stdout and stderr), where the workspace is kept."""
    diagnosis: str | None = None
    """For an accepted candidate: its roofline and GPU state in one line (``advice/diagnosis.py``)."""

    @property
    def wrong_output(self) -> bool:
        """Rejected because an output disagreed with the reference's (not a crash, a rule, or a time)."""
        return any(not c.passed and c.compared for c in self.checks)


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
