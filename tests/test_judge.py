"""The judge's logic without a process: failures in words, times held to the judge's clock, speed
of light, reference drift."""

from __future__ import annotations

import random
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelevo.sandbox.advice.cuda_gate import summarize_ptxas
from kernelevo.sandbox.isolation.cgroups import parse_size
from kernelevo.sandbox.isolation.namespaces import scrubbed_env
from kernelevo.sandbox.judge import device_memory
from kernelevo.sandbox.judge.ceilings import speed_of_light_ms
from kernelevo.sandbox.judge.record import Record
from kernelevo.sandbox.judge.session import Plan, Session, Stop
from kernelevo.sandbox.judge.telemetry import decode_throttle_reasons, gpu_memory_of, snapshot
from kernelevo.sandbox.judge.timed_calls import CHECK_MS_PER_GB, TimedCalls
from kernelevo.sandbox.judge.timing import Block
from kernelevo.sandbox.judge.verdict import INTERPRETER, judge, process_failure
from kernelevo.sandbox.models import Ceilings, Check, Isolation, JobOutcome, ReferenceResult, TimingPolicy, TimingStats
from kernelevo.tasks.task import Task

CEILINGS = Ceilings(device="H200", copy_gbps=4300.0, matmul_tflops={"bfloat16": 790.0, "tf32": 380.0})


def stats(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, p10_ms=ms * 0.99, p90_ms=ms * 1.01, runs=50)


def task() -> Task:
    return Task(name="t", path=Path("t.py"), sha256="0", size="full")


def block(ms: float, overhead: float = 0.3, runs: int = 30) -> Block:
    """Calls of ``ms`` that the judge's clock saw take ``overhead`` ms longer (refill, flush, messages)."""
    b = Block()
    for _ in range(runs):
        b.add(ms, 0.01, ms + overhead)
    return b


def outcome(candidate_ms: float, rerun_ms: float, eager_ms: float = 2.0, device: str = "cuda",
            overhead: float = 0.3) -> tuple[ReferenceResult, Record]:
    baseline = ReferenceResult(device="H200", flops=0.0, bytes=4.3e9, eager=stats(eager_ms), compiled=stats(1.5),
                               torch_version="x")
    record = Record(device=device, checks=[Check(name="c", passed=True)], compiled=True,
                    blocks=[block(candidate_ms, overhead), block(candidate_ms, overhead)],
                    reference_block=block(rerun_ms))
    return baseline, record


def test_honest_timing_gives_speedups_and_roofline() -> None:
    baseline, record = outcome(candidate_ms=1.25, rerun_ms=2.02)
    verdict = judge(task(), "c.py", [], baseline, CEILINGS, record, None)
    assert verdict.correct, verdict.reason
    assert verdict.speedup == pytest.approx(1.6)
    assert verdict.speedup_vs_compile == pytest.approx(1.2)
    assert verdict.bound == "memory" and verdict.roofline_fraction == pytest.approx(0.8)
    assert verdict.timing == "cuda-events" and verdict.noise_pct == 0.0


def test_a_pace_is_reported_and_never_counted() -> None:
    """The pace of back-to-back calls comes from the candidate's process (a cache or a lie makes it
    fast), so it counts on neither side: a candidate reporting a fast pace gains nothing over one
    reporting its real, host-bound pace, against a reference whose own pace is host-bound too."""
    from kernelevo.sandbox.judge.timing import PACE_MARGIN, host_bound
    from kernelevo.sandbox.judge.timing import stats as timing_stats

    assert not host_bound(0.02, None) and not host_bound(0.02, 0.02 * (1 + PACE_MARGIN) * 0.99)
    assert host_bound(0.02, 0.09) and not host_bound(0.5, 0.01)
    speedups = []
    for reported in ([0.12, 0.09, 0.10], [0.0001] * 3):
        baseline, record = outcome(candidate_ms=0.02, rerun_ms=0.02, eager_ms=0.02)
        baseline.eager = timing_stats([0.02] * 9, 0.06)  # the reference's host sets its pace
        for b in record.blocks:
            b.pace_ms = list(reported)
        verdict = judge(task(), "c.py", [], baseline, None, record, None)
        assert verdict.correct, verdict.reason
        assert verdict.runtime_ms == 0.02 and verdict.reference_runtime_ms == 0.02
        assert verdict.pace_ms == min(reported) and verdict.reference_pace_ms == 0.06
        assert verdict.host_bound == (min(reported) > 0.02 * (1 + PACE_MARGIN))
        speedups.append(verdict.speedup)
    assert speedups[0] == speedups[1] == pytest.approx(1.0)


def test_peak_memory_is_reported_beside_the_tasks_own_footprint() -> None:
    baseline, record = outcome(candidate_ms=1.25, rerun_ms=2.02)
    verdict = judge(task(), "c.py", [], baseline, CEILINGS, record, None)
    assert verdict.memory is None  # nothing measured (the CPU)
    baseline.eager_peak_bytes = 3 * 2**30
    record.peak_bytes = {"oracle": 11 * 2**30, "candidate": 7 * 2**30}
    verdict = judge(task(), "c.py", [], baseline, CEILINGS, record, None)
    assert verdict.memory == {"eager": 3 * 2**30, "oracle": 11 * 2**30, "candidate": 7 * 2**30}


def test_faster_than_light_is_rejected() -> None:
    baseline, record = outcome(candidate_ms=0.2, rerun_ms=2.0)  # 4.3 GB in 0.2 ms is 21 TB/s
    verdict = judge(task(), "c.py", [], baseline, CEILINGS, record, None)
    assert not verdict.correct and verdict.reason.startswith("speed of light")


def test_tiny_calls_get_an_absolute_drift_allowance() -> None:
    baseline, record = outcome(candidate_ms=0.008, rerun_ms=0.015, eager_ms=0.010)  # +50%, but only 5 us
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct, verdict.reason


def test_a_reference_that_got_slower_keeps_its_baseline_and_the_candidate() -> None:
    """A reference whose own time moved (a convolution library picking another algorithm in the same
    process) is not the candidate's fault: accepted, its speedup against the faster of the two."""
    baseline, record = outcome(candidate_ms=1.5, rerun_ms=3.0)  # the reference got 50% slower
    verdict = judge(task(), "c.py", [], baseline, CEILINGS, record, None)
    assert verdict.correct, verdict.reason
    assert verdict.reference_runtime_ms == pytest.approx(2.0) and verdict.speedup == pytest.approx(2.0 / 1.5)
    moved = next(c for c in verdict.checks if c.name == "reference re-timed")
    assert "+50.0%" in moved.detail and "against the faster, 2 ms" in moved.detail


def test_a_reference_that_got_faster_lowers_both_speedups() -> None:
    """Faster in this evaluation than in its baseline (clocks up, or the baseline caught a slow mode):
    the candidate's speedups must not keep the slower baseline's figure."""
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=1.0)  # cached eager 2.0, compile 1.5
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct, verdict.reason
    assert verdict.speedup == pytest.approx(1.0) and verdict.reference_runtime_ms == pytest.approx(1.0)
    assert verdict.compile_runtime_ms == pytest.approx(0.75) and verdict.speedup_vs_compile == pytest.approx(0.75)


def test_the_faster_reference_sets_the_speedup_whatever_the_noise() -> None:
    """Always the faster of baseline and re-run: a bound that the candidate's own block-to-block noise
    widens does not decide which one counts."""
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=1.9)  # -5%: within any noise bound
    record.blocks[1] = block(1.3)  # a noisy candidate: 30% between its blocks
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.speedup == pytest.approx(1.9 / verdict.runtime_ms)
    assert verdict.speedup_vs_compile == pytest.approx(1.5 * 0.95 / verdict.runtime_ms)
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=2.1)  # +5%: the cached figures stand
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.speedup == pytest.approx(2.0) and verdict.speedup_vs_compile == pytest.approx(1.5)
    assert "beyond noise" not in next(c for c in verdict.checks if c.name == "reference re-timed").detail


def test_a_reference_slowed_while_re_timed_does_not_widen_the_clock_check() -> None:
    """A candidate that reports 1 ms for calls that take 4.3 ms of the judge's clock, and loads the GPU
    while the oracle re-times the reference (its calls and their refill slowed alike), so that the
    reference's own wall time beyond its events grows as much as the candidate's."""
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=2.0, overhead=3.3)
    record.reference_block = block(4.0, overhead=3.3)  # twice its baseline, and 3.3 ms beyond its events
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert not verdict.correct and verdict.reason.startswith("times agree with the judge's clock")
    # the verdict keeps what the check decided from: 3.3 beyond the calls, less the reference's 3.3 x 0.5
    assert verdict.clock == {"unexplained_ms": pytest.approx(1.65), "allowed_ms": pytest.approx(0.70 + 0.15 * 1.65),
                             "call_ms": 1.0}
    record.reference_block = block(2.0, overhead=3.3)  # the same wall time from a reference at its baseline
    record.clock_first = {"unexplained_ms": 0.9, "allowed_ms": 0.70, "call_ms": 1.0}  # a doubted first round
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct and verdict.clock["unexplained_ms"] == pytest.approx(0.0)
    assert verdict.clock["first_round"] == record.clock_first


def test_times_longer_than_the_judges_clock_are_impossible() -> None:
    baseline, record = outcome(candidate_ms=1.5, rerun_ms=2.0)
    record.blocks[1].times_ms[3] = 50.0
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.reason.startswith("times agree with the judge's clock") and "more time than passed" in verdict.reason


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_work_hidden_outside_the_timed_window_is_seen_on_the_judges_clock(device: str) -> None:
    """Reported 0.1 ms calls that the judge's clock saw take 20 ms more than the reference's did."""
    baseline, record = outcome(candidate_ms=0.1, rerun_ms=2.0, device=device, overhead=20.3)
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert not verdict.correct and "more wall time beyond its reported" in verdict.reason
    baseline, record = outcome(candidate_ms=0.1, rerun_ms=2.0, device=device, overhead=0.4)
    assert judge(task(), "c.py", [], baseline, None, record, None).correct


def test_a_round_timed_again_for_the_clock_says_so_and_decides_alone() -> None:
    """The session timed a second round after the first failed the judge's clock: the verdict judges
    the second (the record holds only it) and says why it exists."""
    baseline, record = outcome(candidate_ms=0.1, rerun_ms=2.0, overhead=0.4)
    record.clock_retry = "each timed call took 1.2 ms more wall time ..."
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    clock = next(c for c in verdict.checks if c.name == "times agree with the judge's clock")
    assert verdict.correct and "the only one kept; the first: each timed call took 1.2 ms" in clock.detail
    baseline, record = outcome(candidate_ms=0.1, rerun_ms=2.0, overhead=20.3)
    record.clock_retry = "each timed call took 20 ms more wall time ..."
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert not verdict.correct and verdict.reason.endswith("(in the second round of timed calls as in the first)")


def test_cpu_verdicts_say_they_are_not_forensic() -> None:
    baseline, record = outcome(candidate_ms=5.0, rerun_ms=1.0, device="cpu")
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct and verdict.timing == "cpu-interpreter" and verdict.speedup is None
    assert verdict.assurance == INTERPRETER and verdict.assurance.startswith("interpreter: not forensic")


def test_a_session_that_broke_off_is_explained_by_how_the_process_ended() -> None:
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=2.0)
    record.failure = "correctness call on set 2: the other side closed the channel"
    record.worker = JobOutcome(returncode=-11, signal="SIGSEGV (segmentation fault)", wall_s=1.0,
                               phase="correctness call on set 2", isolation=Isolation())
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.reason == "sandboxed run: crashed with SIGSEGV (segmentation fault) during correctness call on set 2"
    record.worker = JobOutcome(returncode=0, wall_s=1.0, isolation=Isolation(), log_tail="bye\n")
    assert "stopped answering during correctness call on set 2" in judge(task(), "c.py", [], baseline, None,
                                                                          record, None).reason


@pytest.mark.parametrize(("fields", "words"), [
    ({"timed_out": True, "phase": "timing"}, "timed out after 30 s during timing"),
    ({"out_of_memory": True}, "ran out of memory (limit 2g)"),
    ({"signal": "SIGSEGV (segmentation fault)", "returncode": -11}, "crashed with SIGSEGV"),
    ({"too_many_processes": True}, "too many processes"),
])
def test_process_failures_in_words(fields: dict, words: str) -> None:
    job = JobOutcome(returncode=fields.pop("returncode", None), wall_s=1.0,
                     isolation=Isolation(timeout_s=30, pids_limit=64), **fields)
    assert words in process_failure(job, "2g")


def test_speed_of_light_picks_the_binding_limit() -> None:
    assert speed_of_light_ms(0, 4.3e9, CEILINGS, "float32") == (pytest.approx(1.0), "memory")
    assert speed_of_light_ms(7.9e11, 1.0, CEILINGS, "bfloat16") == (pytest.approx(1.0), "compute")
    # fp32 tasks are held to the tf32 rate: 3xTF32 is the fastest way to fp32 accuracy
    assert speed_of_light_ms(3.8e11, 1.0, CEILINGS, "float32")[0] == pytest.approx(1.0)


def test_parse_size_and_env_scrubbing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_size("2g") == 2 * 1024**3 and parse_size("512M") == 512 * 1024**2 and parse_size("1.5GiB") > 0
    with pytest.raises(ValueError):
        parse_size("lots")
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = scrubbed_env({"GITHUB_TOKEN": "x", "TRITON_INTERPRET": "1"})
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert env["PATH"] == "/usr/bin" and env["TRITON_INTERPRET"] == "1"


def test_ptxas_summary() -> None:
    text = ("ptxas info    : Used 40 registers, used 1 barriers, 16 bytes cmem[0]\n"
            "ptxas info    : Used 72 registers, 0 bytes spill stores, 0 bytes spill loads\n")
    assert summarize_ptxas(text) == "2 kernel(s): 40-72 registers, no spills"
    assert "spills up to 24 bytes" in summarize_ptxas("Used 255 registers\n16 bytes spill stores, 8 bytes spill loads")


class FakeNvml:
    """Just enough of pynvml for the telemetry module, with chosen readings."""

    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwThermalSlowdown = 0x40
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, mask: int, fail: bool = False) -> None:
        self.mask, self.fail = mask, fail

    def nvmlInit(self) -> None:
        if self.fail:
            raise OSError("no driver")

    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetHandleByIndex(self, i: int) -> int: return i
    def nvmlDeviceGetName(self, h: int) -> str: return "Fake GPU"
    def nvmlDeviceGetClockInfo(self, h: int, which: int) -> int: return 1980 if which == 1 else 3201
    def nvmlDeviceGetTemperature(self, h: int, which: int) -> int: return 41
    def nvmlDeviceGetPowerUsage(self, h: int) -> int: return 350_000
    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int: return 10_000
    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int: return self.mask


def test_nvml_snapshot_decodes_throttle_reasons() -> None:
    fake = FakeNvml(mask=0x4 | 0x40)
    reading = snapshot(0, nvml=fake)
    assert reading["sm_clock_mhz"] == 1980 and reading["power_w"] == 350.0
    assert reading["throttle_reasons"] == ["software power cap", "hardware thermal slowdown"]
    assert decode_throttle_reasons(0, fake) == []


def test_nvml_unavailable_is_said_plainly() -> None:
    reading = snapshot(0, nvml=FakeNvml(0, fail=True))
    assert reading == {"available": False, "reason": "NVML not available (OSError)"}


def test_the_judges_clock_catches_short_reports_and_spares_a_loaded_host() -> None:
    from kernelevo.sandbox.judge.timing import Block, unexplained_problem

    def block(times: list[float], walls: list[float]) -> Block:
        b = Block()
        for t, w in zip(times, walls):
            b.add(t, t, w)
        return b

    reference = block([9.0, 9.1, 9.2], [11.0, 11.1, 11.3])
    loaded = block([9.7, 9.8, 9.6], [16.3, 16.5, 16.2])  # an honest call on a busy 2-core host
    assert unexplained_problem(loaded, reference, "cpu") is None
    forged = block([0.0042] * 3, [33.0, 33.5, 32.9])  # 20 ms hidden, a tiny time reported
    assert "more wall time" in unexplained_problem(forged, reference, "cpu")
    gpu_ref = block([0.10] * 5, [0.40] * 5)
    assert unexplained_problem(block([0.10] * 5, [0.45] * 5), gpu_ref, "cuda") is None
    assert unexplained_problem(block([0.02] * 5, [1.40] * 5), gpu_ref, "cuda") is not None
    # Measured on an H200 at 9M values: the refill and the digest take about 4 ms per call in the oracle
    # and 0.25-0.3 ms more in the candidate's process; a call whose real time was hidden still stands out.
    heavy_ref = block([0.0216] * 5, [4.0] * 5)
    assert unexplained_problem(block([0.0227] * 5, [4.31] * 5), heavy_ref, "cuda") is None
    assert unexplained_problem(block([0.001] * 5, [5.5] * 5), heavy_ref, "cuda") is not None
    # Honest long calls measured on an H100 (a 3.5 ms GEMM 0.57 ms past the reference's, a 10.2 ms
    # GroupNorm 0.09 ms) pass; a 10 ms call reported as 8 ms does not.
    ref = block([2.55] * 5, [3.0] * 5)
    assert unexplained_problem(block([3.54] * 5, [4.55] * 5), ref, "cuda") is None
    assert unexplained_problem(block([10.2] * 5, [10.74] * 5), ref, "cuda") is None
    assert unexplained_problem(block([8.0] * 5, [10.45] * 5), ref, "cuda") is not None


def test_a_request_of_several_calls_keeps_each_calls_allowance_and_must_answer_each_call() -> None:
    """Eight calls in one request are each allowed the fixed 0.6 ms, as one call alone is: the gap
    between the processes was measured to be each call's (it did not shrink with several calls a
    request), so sharing it would reject honest candidates. A reply that answers fewer calls than
    were asked for is the candidate's malformed answer."""
    from kernelevo.sandbox.judge.timing import Block, unexplained_figures

    def block(per_request: int, beyond: float) -> Block:
        b = Block(calls_per_request=per_request)
        for _ in range(8):
            b.add(0.05, 0.01, 0.05 + beyond)
        return b

    single = unexplained_figures(block(1, 0.5), block(1, 0.2), "cuda")
    assert single is not None and single[0] == pytest.approx(0.3) and single[1] == pytest.approx(0.605 + 0.03)
    several = unexplained_figures(block(8, 0.5), block(8, 0.2), "cuda")
    assert several == pytest.approx(single)
    hidden = unexplained_figures(block(8, 0.9), block(8, 0.2), "cuda")
    assert hidden is not None and hidden[0] > hidden[1]

    class Short(_ScriptedBlock):
        def ask(self, job, who, phase, message):  # noqa: ANN001, ANN201 - the Session's signature
            reply = super().ask(job, who, phase, message)
            if message["op"] == "timed":
                reply["calls"] = reply["calls"][:-1]
            return reply

    part = Short(output_bytes=4 << 20)
    part.plan.timing = part.plan.timing.model_copy(update={"calls_per_request": 4})
    with pytest.raises(Stop, match="not one answer for each of the 4 calls"):
        part._timed_block(None, "worker", "timed block 1")
    # on the CPU as on a GPU, each call keeps the whole fixed allowance
    cpu = unexplained_figures(block(8, 0.5), block(8, 0.2), "cpu")
    assert cpu is not None and cpu[1] == pytest.approx(0.05 + 5.0)


def test_with_several_calls_a_request_every_request_has_a_check_and_the_least_counts_requests() -> None:
    """Each call counts as its request's mean, so work skipped in one call of every request would move
    every request's time: on a GPU one call of every request is checked (drawn after it ran), and the
    block's least is counted in requests, not calls."""
    for per_request in (1, 4):
        part = _ScriptedBlock(output_bytes=4 << 20)
        part.plan.timing = part.plan.timing.model_copy(update={"calls_per_request": per_request})
        block, (checked, problems) = part._timed_block(None, "worker", "timed block 1")
        requests = len(block.times_ms) // per_request
        assert not problems and block.calls_per_request == per_request
        if per_request == 1:  # a check per call drawn with chance 2 in 6: not one in every call
            assert checked < requests
            continue
        assert requests >= part.plan.timing.min_runs and len(block.times_ms) % per_request == 0
        assert {run // per_request for run in part.checked_runs} == set(range(requests))


def test_cuda_graph_times_stand_beside_the_plain_time_and_are_held_to_the_clock() -> None:
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=2.0)
    record.graph_block, record.graph_reference_block = block(0.8), block(1.7)
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct and verdict.runtime_ms == 1.0 and verdict.speedup == 2.0  # the plain time decides
    assert verdict.graph_runtime_ms == 0.8 and verdict.graph_reference_ms == 1.7
    assert verdict.graph_note.startswith("reported by the candidate's process")  # no trace runs on replays
    forged = Block()
    for _ in range(30):
        forged.add(0.001, 0.01, 25.0)  # replays reported at 1 us that the judge's clock saw take 25 ms
    record.graph_block = forged
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct and verdict.graph_runtime_ms is None
    assert "CUDA-graph times were not kept" in verdict.graph_note
    record.graph_block = block(0.2)  # a replay faster than the roofline floor of the work
    baseline.bytes = 4.3e9  # 1 ms at 4300 GB/s
    verdict = judge(task(), "c.py", [], baseline, CEILINGS, record, None)
    assert verdict.correct and verdict.graph_runtime_ms is None and "floor" in verdict.graph_note


def test_a_forward_that_cannot_be_captured_keeps_its_verdict_with_a_note() -> None:
    baseline, record = outcome(candidate_ms=1.0, rerun_ms=2.0)
    record.graph_note = "the candidate could not be timed as a CUDA graph: capturing forward as a CUDA graph failed"
    verdict = judge(task(), "c.py", [], baseline, None, record, None)
    assert verdict.correct and verdict.runtime_ms == 1.0
    assert verdict.graph_runtime_ms is None and verdict.graph_note.startswith("the candidate could not be timed")


def test_a_task_too_large_for_the_gpu_is_refused_in_one_line_with_its_figures() -> None:
    gib = 2**30
    assert device_memory.refusal(13 * gib, 141 * gib, "NVIDIA H200") is None  # softmax over 4096 x 393216 fp32
    line = device_memory.refusal(40 * gib, 141 * gib, "NVIDIA H200")
    assert line and "\n" not in line
    assert "cannot be judged on NVIDIA H200" in line and "40.0 GiB" in line and "170.0 GiB" in line  # 4.25x
    assert device_memory.refusal(None, 141 * gib, "cpu") is None  # nothing measured: nothing refused
    assert device_memory.exact_fits(10 * gib, 20 * gib) and not device_memory.exact_fits(10 * gib, 11 * gib)


class _Worker:
    def __init__(self, pids: set[int]) -> None:
        self.pids = pids

    def host_pids(self) -> set[int]:
        return self.pids


def _oom(others_gib: int) -> Stop:
    gib = 2**30
    use = {"total": 141 * gib, "free": 141 * gib - others_gib * gib - 8 * gib, "own": 8 * gib}
    return Stop("oracle", "reference outputs for set 2", "torch.OutOfMemoryError: CUDA out of memory", out_of_memory=use)


@pytest.mark.parametrize(("others", "blamed"), [(120, "candidate"), (41, "candidate"), (39, "judge"), (30, "judge")])
def test_an_oracle_out_of_memory_is_blamed_on_whoever_held_more_than_its_share(others: int, blamed: str) -> None:
    """Where the driver cannot say what the candidate's processes hold, everything but the oracle counts,
    against the candidate's 2F, one idle kept oracle of another evaluation (F) and a GiB: 40 GiB at
    F = 13 GiB. Whatever the oracle itself needs, a process within its share is not blamed."""
    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cuda",
                timing=TimingPolicy(), eager_peak_bytes=13 * 2**30)
    session = Session(plan, None, _Worker(set()), None)
    session._out_of_memory(_oom(others))
    if blamed == "candidate":
        assert session.record.failure and f"held {others}.0 GiB" in session.record.failure
        assert session.record.reference_error is None
    else:
        assert session.record.failure is None
        assert "the judge ran out of device memory" in (session.record.reference_error or "")


def test_an_oracle_out_of_memory_says_which_allocation_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocation that failed is the cause to fix, and a GPU run is scarce: the oracle's reply names
    the innermost frames, ahead of torch's message, so the one line a verdict keeps carries it."""
    import torch

    from kernelevo.sandbox.judge import oracle as oracle_module

    def nudged_inputs(_oracle: object, _msg: object) -> dict:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 14.00 GiB")

    sent: list[dict] = []

    class Channel:
        requests = iter([{"op": "expect"}, {"op": "finish"}])

        def recv(self) -> dict:
            return next(self.requests)

        def send(self, reply: dict) -> None:
            sent.append(reply)

    monkeypatch.setitem(oracle_module.HANDLERS, "expect", nudged_inputs)
    oracle_module.serve(Channel())
    error = sent[1]["error"]
    assert error.startswith("at test_judge.py:") and "(nudged_inputs)" in error.split(":", 2)[1], error
    assert "Tried to allocate 14.00 GiB" in error and sent[1]["out_of_memory"] == {}


def test_the_drivers_count_of_the_candidates_own_memory_decides_where_it_has_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the driver's per-process figure, only the candidate's own processes count, against 2F + 1 GiB
    (27 GiB at F = 13 GiB): other evaluations' processes on the same GPU are never its fault."""
    from kernelevo.sandbox.judge import session as session_module

    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cuda",
                timing=TimingPolicy(), eager_peak_bytes=13 * 2**30)
    for own_gib, blamed in ((30, True), (20, False)):
        monkeypatch.setattr(session_module.telemetry, "gpu_memory_of",
                            lambda pids, own_gib=own_gib: own_gib * 2**30 if pids == {4242} else None)
        session = Session(plan, None, _Worker({4242}), None)
        session._out_of_memory(_oom(120))  # 120 GiB held by others, most of it not the candidate's
        assert bool(session.record.failure) is blamed, session.record
        if blamed:
            assert f"the candidate's process held {own_gib}.0 GiB" in session.record.failure


class _ConfinedWorker:
    isolation = Isolation(writes="landlock ABI 7: writes only beneath /out, /tmp, /var/tmp, /dev, /proc")


def test_cuda_that_does_not_start_before_the_candidate_is_named_is_the_judges_failure() -> None:
    """A worker whose CUDA does not start (a sandbox that keeps the driver out) says so in a round trip
    of its own, before the candidate is named: the session records the harness's failure, with the
    confinement that may be the cause, and no check against the candidate; the forensic pass stops on
    it the same way. The same words in the build's answer, which the candidate's code could have
    written, are the candidate's failure."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.record import HarnessFault

    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cuda",
                timing=TimingPolicy())
    error = "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 304: OS call failed"
    asked = []

    def answer(job, who, phase, message, fail_at="device"):  # noqa: ANN001, ANN202
        asked.append(message["op"])
        if message["op"] == fail_at:
            return {"ok": False, "device_unusable": error, "error": error}
        return {"ok": True}

    forged = Session(plan, None, _ConfinedWorker(), None)
    forged.ask = lambda *args: answer(*args, fail_at="build")
    assert not forged._build() and asked == ["device", "build"]
    assert forged.record.harness_error is None and not forged.record.checks[0].passed  # the candidate's
    session = Session(plan, None, _ConfinedWorker(), None)
    session.ask = answer
    assert not session._build()
    assert not session.record.checks and session.record.failure is None
    said = session.record.harness_error or ""
    assert said.startswith("the harness failed: CUDA did not start") and "Error 304" in said
    assert "landlock ABI 7" in said and "KERNELEVO_LANDLOCK=0" in said and "kernelevo doctor" in said
    with pytest.raises(HarnessFault, match="in the forensic pass, the harness failed"):
        forensic.read_pass(session.record)
    unconfined = Session(plan, None, _UnconfinedWorker(), None)
    unconfined.ask = answer
    assert not unconfined._build() and "turns the confinement off" not in (unconfined.record.harness_error or "")


class _UnconfinedWorker:
    isolation = Isolation(writes="not confined: turned off (KERNELEVO_LANDLOCK=0)")


def test_a_worker_that_dies_while_cuda_starts_is_the_judges_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The worker's process ending or hanging while CUDA starts, before the candidate is named, is the
    judge's failure as well, and the evaluator turns such a session into no verdict (exit 3)."""
    from kernelevo.sandbox.judge import evaluate as ev

    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cuda",
                timing=TimingPolicy())
    session = Session(plan, None, _ConfinedWorker(), None)

    def dies(*args):  # noqa: ANN002, ANN202
        raise Stop("worker", "starting CUDA", "the other side closed the channel", broken=True)

    session.ask = dies
    record = session.record
    try:
        session._build()
    except Stop as stop:  # as Session.run receives it
        session._stopped(stop)
    assert record.harness_error and "the other side closed the channel" in record.harness_error
    assert record.failure is None

    from kernelevo.sandbox.judge.compile_caches import CandidateCaches

    class FakeEvaluator(ev.Evaluator):
        def __init__(self) -> None:
            self.device, self.readable, self.caches = "cuda", [], CandidateCaches(tmp_path / "cache")

        def baseline(self, task):  # noqa: ANN001, ANN202
            return ReferenceResult(device="H200", flops=0.0, bytes=1.0, torch_version="x"), None

        def _session(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            return record

    with pytest.raises(ev.EvalError) as raised:
        (tmp_path / "c.py").write_text("class ModelNew: ...\n")
        FakeEvaluator().run_in_sandbox(task(), tmp_path / "c.py", [])
    assert raised.value.exit_code == ev.EXIT_ENVIRONMENT and "CUDA did not start" in str(raised.value)


def test_a_session_where_cuda_did_not_start_is_tried_once_more_in_a_fresh_process(tmp_path: Path) -> None:
    """No candidate code runs before CUDA starts, so a session that failed there is tried again: a second
    try that works is the verdict (its isolation says the first failed), two failures are the judge's,
    with both reasons; any other session is never repeated. How the process ended is in the words."""
    from kernelevo.sandbox.judge import evaluate as ev
    from kernelevo.sandbox.judge.session import cuda_unusable
    from kernelevo.sandbox.judge.verdict import ended_how

    def failed(n: int) -> Record:
        record = Record(device="cuda")
        record.worker_end = f"crashed with SIGSEGV: line {n}"
        record.harness_error = f"{cuda_unusable('Error 304', _ConfinedWorker.isolation)}; the process: {record.worker_end}"
        record.cuda_start_failed = True
        return record

    def worked() -> Record:
        record = Record(device="cuda")
        record.worker_isolation = Isolation()
        return record

    class Tries(ev.Evaluator):
        def __init__(self, records: list) -> None:
            self.records, self.calls = records, 0

        def _one_session(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.calls += 1
            return self.records.pop(0)

    again = Tries([failed(1), worked()])
    record = again._session(task(), tmp_path / "c.py", "cache")
    assert again.calls == 2 and record.harness_error is None
    assert any("second process" in w and "SIGSEGV: line 1" in w for w in record.worker_isolation.warnings)
    twice = Tries([failed(1), failed(2)])
    said = twice._session(task(), tmp_path / "c.py", "cache").harness_error or ""
    assert twice.calls == 2 and "twice" in said and "SIGSEGV: line 2" in said and "SIGSEGV: line 1" in said
    candidate_failed = Record(device="cuda")
    candidate_failed.failure = "importing the candidate: boom"
    once = Tries([candidate_failed, worked()])
    assert once._session(task(), tmp_path / "c.py", "cache") is candidate_failed and once.calls == 1
    killed = JobOutcome(returncode=None, wall_s=1.0, out_of_memory=True, isolation=Isolation(), phase="starting CUDA",
                        log_tail="line one\nKilled\n")
    assert ended_how(killed, "64g").startswith("ran out of memory during starting CUDA (limit 64g)")
    assert ended_how(killed, "64g").endswith("line one | Killed")
    crashed = JobOutcome(returncode=-11, signal="SIGSEGV", wall_s=1.0, isolation=Isolation())
    assert ended_how(crashed, None) == "crashed with SIGSEGV" and ended_how(None, None) == "its end could not be read"


def test_gpu_memory_of_sums_the_drivers_per_process_figures() -> None:
    class Proc:
        def __init__(self, pid: int, used: int | None) -> None:
            self.pid, self.usedGpuMemory = pid, used

    class FakeNvml:
        def nvmlInit(self) -> None: ...
        def nvmlShutdown(self) -> None: ...
        def nvmlDeviceGetCount(self) -> int: return 2
        def nvmlDeviceGetHandleByIndex(self, index: int) -> int: return index
        def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list:
            return [Proc(10, 5), Proc(11, 7), Proc(99, 100)] if handle == 0 else [Proc(11, 1), Proc(12, None)]

    assert gpu_memory_of({10, 11}, FakeNvml()) == 13
    assert gpu_memory_of({12}, FakeNvml()) == 0  # the driver hides its figure
    assert gpu_memory_of(set(), FakeNvml()) is None


def test_deleting_compared_outputs_never_follows_a_link_out_of_the_outbox(tmp_path: Path) -> None:
    """The outbox and the names are the candidate's to shape: a name with a slash, or an outbox swapped
    for a link to another folder, gets nothing outside the outbox deleted."""
    victim = tmp_path / "host"
    victim.mkdir()
    (victim / "precious.conf").write_text("keep")
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    (outbox / "set0-1-0.bin").write_bytes(b"x")
    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cpu",
                timing=TimingPolicy(), worker_outbox=outbox)
    session = Session(plan, None, None, None)
    session._delete_outputs({"outputs": [{"file": "set0-1-0.bin"}, {"file": "../host/precious.conf"}]})
    assert not (outbox / "set0-1-0.bin").exists() and (victim / "precious.conf").exists()
    outbox.rmdir()
    outbox.symlink_to(victim)  # the outbox swapped for a link
    session._delete_outputs({"outputs": [{"file": "precious.conf"}]})
    assert (victim / "precious.conf").read_text() == "keep"


def test_a_reference_that_alone_runs_out_of_device_memory_is_refused_in_one_line() -> None:
    gib = 2**30
    line = device_memory.reference_alone_refusal({"total": 141 * gib, "free": 1 * gib, "own": 140 * gib}, "NVIDIA H200")
    assert "\n" not in line and "cannot be judged on NVIDIA H200" in line and "141.0 GiB" in line
    shared = device_memory.reference_alone_refusal({"total": 141 * gib, "free": 1 * gib, "own": 20 * gib}, "H200")
    assert "other processes held 120.0 GiB" in shared and "cannot be judged" not in shared


def test_time_the_oracle_takes_is_added_to_the_candidates_deadline() -> None:
    """The candidate's process waits while the oracle works (a float64 reference on the host can take
    minutes at a real size): its deadline moves by that time, and by nothing else."""
    import time as clock

    class Channel:
        def request(self, message: dict, timeout: float, finite: bool = False) -> dict:
            clock.sleep(0.05)
            return {"ok": True}

    class StubJob:
        def __init__(self) -> None:
            self.extended, self.phase = 0.0, None

        def remaining(self) -> float:
            return 100.0

        def channel(self, timeout: float) -> Channel:
            return Channel()

        def extend(self, seconds: float) -> None:
            self.extended += seconds

    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cpu", timing=TimingPolicy())
    oracle, worker = StubJob(), StubJob()
    session = Session(plan, oracle, worker, None)
    session.ask(oracle, "oracle", "reference outputs for set 0", {"op": "expect"})
    assert worker.extended >= 0.05 and oracle.extended == 0.0
    session.ask(worker, "worker", "correctness call on set 0", {"op": "call"})
    assert worker.extended < 0.1


def _forensic_record(tmp_path: Path, failure: str | None, log: str, killed: bool = False):  # noqa: ANN202
    from types import SimpleNamespace

    (tmp_path / "ncu.csv").write_text(log)
    return SimpleNamespace(reference_error=None, worker_trace=tmp_path, checks=[], failure=failure,
                           worker=SimpleNamespace(log_tail="", killed_by_judge=killed))


def test_a_forensic_pass_tells_ncus_own_failure_from_the_candidates(tmp_path: Path) -> None:
    from kernelevo.sandbox.judge import forensic

    driver = "==PROF== Connected to process 26\n==ERROR== An error was reported by the driver:\nCUDA_ERROR_UNKNOWN\n"
    _, failure, tool_failed = forensic.read_pass(_forensic_record(tmp_path, "the process ended", driver))
    assert tool_failed and "An error was reported by the driver: CUDA_ERROR_UNKNOWN" in failure
    _, failure, tool_failed = forensic.read_pass(_forensic_record(tmp_path, "the call raised: ValueError", ""))
    assert not tool_failed and "ValueError" in failure


def test_a_correct_candidate_is_traced_again_when_ncu_itself_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """ncu failing once (a driver error) gets a second pass before a correct candidate is rejected for it;
    failing twice rejects, and a candidate's own failure is never retried."""
    from types import SimpleNamespace

    from kernelevo.sandbox.advice import ncu
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.models import Verdict

    def verdict() -> Verdict:
        return Verdict(task="t", candidate="c.py", size="small", compiled=True, correct=True, reason=None, checks=[],
                       runtime_ms=1.0, device="cuda", isolation={})

    def run(outcomes: list[forensic.Traced]) -> tuple[Verdict, int]:
        calls = []

        def run_pass(*_args: object) -> forensic.Traced:
            calls.append(1)
            return outcomes[len(calls) - 1]

        monkeypatch.setattr(forensic, "run_pass", run_pass)
        monkeypatch.setattr(forensic, "analyse", lambda *a: forensic.Findings(kernels=3, custom_share=1.0))
        monkeypatch.setattr(forensic, "owned_kernels", lambda source: forensic.Owned(triton={"k"}))
        monkeypatch.setattr(ncu, "find_ncu", lambda: "/usr/bin/ncu")
        judged = verdict()
        evaluator = SimpleNamespace(config=SimpleNamespace(forensic=True))
        task = SimpleNamespace(allow_partial=False)
        candidate = SimpleNamespace(read_text=lambda: "")
        forensic.apply(judged, evaluator, task, candidate, "0" * 32)
        return judged, len(calls)

    ncu_failed = forensic.Traced([], "under the kernel trace the candidate failed: ncu failed: driver", True, {})
    traced = forensic.Traced([{"name": "k"}], None, False, {"total": 1.0})
    judged, calls = run([ncu_failed, traced])
    assert calls == 2 and judged.correct, judged.reason
    judged, calls = run([ncu_failed, ncu_failed])
    assert calls == 2 and not judged.correct and "ncu failed" in judged.reason
    own = forensic.Traced([], "under the kernel trace the candidate failed: the call raised", False, {})
    judged, calls = run([own])
    assert calls == 1 and not judged.correct


def _trace(*names_ms: tuple[str, float]) -> list[dict]:
    marker = "at::cuda::(anonymous namespace)::spin_kernel(long)"
    return [{"name": marker, "metrics": {"gpu__time_duration.sum": 1e6}, "stream": "7"}] + [
        {"name": n, "metrics": {"gpu__time_duration.sum": ms * 1e6}, "stream": "7"} for n, ms in names_ms]


def test_the_forensic_trace_counts_a_kernel_as_the_candidates_only_by_a_name_nothing_else_prints() -> None:
    """A never-launched Triton function named like torch's softmax kernel does not make torch's kernel
    the candidate's; nor does a CUDA kernel of the same name unless it sits where the candidate put it."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned

    torch_softmax = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
                     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)")
    decoy = Owned.of(["cunn_SoftMaxForward", "copy_out"], [])
    found = forensic.analyse(_trace((torch_softmax, 0.5), ("copy_out", 0.01)) * 1, decoy, 1, True, 0.6)
    assert found.library_extra and any("library kernels did the work" in p for p in found.problems)
    cuda_decoy = Owned.of([], ["__global__ void cunn_SoftMaxForward(float* x) {}"])
    assert not cuda_decoy.owns(torch_softmax)
    honest = Owned.of(["softmax_kernel"], ["namespace mine { __global__ void rows(const float* x, int n) {} }"])
    assert honest.owns("softmax_kernel") and honest.owns("mine::rows(const float *, int)")
    assert not honest.owns("void at::native::rows(const float *, int)")
    found = forensic.analyse(_trace(("softmax_kernel", 0.5)), honest, 1, True, 0.5)
    assert not found.problems and found.custom_launches == 1


def test_work_moved_off_the_clock_is_bounded_by_the_margin_on_any_stream() -> None:
    """Zeroing done outside a timed call of 1 ms shows in the trace wherever it ran, and every stream's
    kernels are summed (the trace runs one kernel at a time: it cannot show overlap). Up to 0.25 ms
    passes the margin (1 >= 0.8 x 1.25), more is caught, on the call's own stream or another, so the
    gain is at most 1/0.8 either way (docs/EVALUATION.md). Work split over four streams is charged for
    all four, and the rejection says why."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned

    owned = Owned.of(["relu_column_kernel"], [])
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2, T3)"
    cases = [("7", 0.2, False), ("7", 0.3, True), ("9", 0.2, False), ("9", 0.3, True), ("9", 1.0, True)]
    for stream, moved_ms, caught in cases:
        trace = _trace(("relu_column_kernel", 1.0)) + [
            {"name": fill, "metrics": {"gpu__time_duration.sum": moved_ms * 1e6}, "stream": stream}]
        found = forensic.analyse(trace, owned, 1, False, 1.0)
        assert bool(found.problems) is caught, (stream, moved_ms, found.problems)
        assert found.per_call_ms == pytest.approx(1.0 + moved_ms)
    split = _trace(("relu_column_kernel", 0.1)) + [
        {"name": "relu_column_kernel", "metrics": {"gpu__time_duration.sum": 0.3e6}, "stream": s} for s in "abc"]
    found = forensic.analyse(split, owned, 1, False, 0.4)
    assert found.streams == 4 and found.per_call_ms == pytest.approx(1.0)
    assert any("on 4 streams, summed" in p for p in found.problems), found.problems
    assert not forensic.analyse(split, owned, 1, False, 0.8).problems


def test_only_the_harness_first_spin_kernel_is_the_marker() -> None:
    """A spin kernel launched after the marker (by the candidate) is counted in the per-call time."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned

    owned = Owned.of(["relu_tail"], [])
    spin = "at::cuda::(anonymous namespace)::spin_kernel(long)"
    found = forensic.analyse(_trace((spin, 5.0), ("relu_tail", 0.01)), owned, 1, False, 1.0)
    assert found.per_call_ms == pytest.approx(5.01)
    assert any("did not run these kernels" in p for p in found.problems)
    assert forensic.analyse(_trace(("relu_tail", 0.01)), Owned(), 1, False, 1.0).problems == [
        "no kernel of the candidate's own ran on the GPU"]


def test_construction_and_loading_cancel_between_two_sessions_of_different_call_counts() -> None:
    """An honest fold of a norm at build and on load: ten library kernels after the marker, then one of
    the candidate's own per call. Counted as three calls' work they break a strict task's rule and
    outweigh a 4 us call; what a 3-call session ran beyond a 1-call one is two calls of its own kernel."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned

    owned = Owned.of(["norm_kernel"], [])
    fold = [(f"at::native::elementwise_kernel<{k}>", 0.002) for k in range(10)]
    one = _trace(*fold, ("norm_kernel", 0.004))
    three = _trace(*fold, ("norm_kernel", 0.004), ("norm_kernel", 0.0041), ("norm_kernel", 0.0039))
    assert forensic.analyse(three, owned, 3, True, 0.004).problems  # the single session's count
    found = forensic.analyse_difference(one, three, owned, 1, 3, True, 0.004)
    assert found is not None and not found.problems, found.problems
    assert found.custom_launches == 2 and found.per_call_ms == pytest.approx(0.004)


def test_a_difference_of_sessions_still_sees_library_work_and_slow_calls() -> None:
    """Library work in every call stays in the difference; so do calls slower than the timed ones; and
    a short session that ran a kernel the long one did not (a candidate counting its calls) leaves the
    long session's findings standing."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned

    owned = Owned.of(["tail_kernel"], [])
    gemm = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"
    per_call = [(gemm, 0.5), ("tail_kernel", 0.01)]
    found = forensic.analyse_difference(_trace(*per_call), _trace(*per_call * 3), owned, 1, 3, True, 0.51)
    assert found is not None and found.library_extra and any("library kernels" in p for p in found.problems)
    slow = forensic.analyse_difference(_trace(("tail_kernel", 1.0)), _trace(*[("tail_kernel", 1.0)] * 3), owned,
                                       1, 3, False, 0.1)
    assert slow is not None and any("did not run these kernels" in p and "beyond a 1-call one" in p
                                    for p in slow.problems)
    counting = _trace(("tail_kernel", 0.01), (gemm, 0.5))
    assert forensic.analyse_difference(counting, _trace(*[("tail_kernel", 0.01)] * 3), owned, 1, 3, True,
                                       0.01) is None
    assert forensic.analyse_difference(_trace(), [], owned, 1, 3, True, 0.01) is None  # no marker


def test_a_short_session_padded_with_the_later_calls_kernels_hides_nothing() -> None:
    """A candidate that tells the sessions apart (a note in its compile cache) pads the short one with
    the library kernels its later calls run: out of order, the long session's findings stand; in order
    (its padding after the first call, as the long session's next calls would run them), the difference
    holds only its own kernel, but the long session's launches from its first own kernel on still show
    the library work of every call."""
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned

    owned = Owned.of(["tail_kernel"], [])
    gemm, tail = ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", 0.5), ("tail_kernel", 0.01)
    long = _trace(gemm, tail, gemm, tail, gemm, tail)
    assert forensic.analyse_difference(_trace(gemm, gemm, gemm, tail), long, owned, 1, 3, True, 0.51) is None
    padded = forensic.analyse_difference(_trace(gemm, tail, gemm, tail, gemm), long, owned, 1, 3, True, 0.51)
    assert padded is not None and any("library kernels did the work" in p for p in padded.problems)
    assert padded.library_extra


def test_the_second_session_runs_only_where_the_first_finds_a_problem_with_own_kernels(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One session for a candidate the trace agrees with, or one whose own kernels never ran; a second,
    of one call, where the count of three may be construction's; its difference decides."""
    from types import SimpleNamespace

    from kernelevo.sandbox.advice import ncu
    from kernelevo.sandbox.judge import forensic
    from kernelevo.sandbox.judge.kernel_names import Owned
    from kernelevo.sandbox.models import Verdict

    fold = [(f"at::native::elementwise_kernel<{k}>", 0.002) for k in range(10)]
    sessions = {1: _trace(*fold, ("norm_kernel", 0.004)),
                3: _trace(*fold, *[("norm_kernel", 0.004)] * 3)}

    def judge(traces: dict[int, list]) -> tuple[Verdict, list[int]]:
        asked: list[int] = []

        def run_pass(*args: object) -> forensic.Traced:
            asked.append(int(args[5]))
            return forensic.Traced(traces[int(args[5])], None, False, {"total": 1.0})

        monkeypatch.setattr(forensic, "run_pass", run_pass)
        monkeypatch.setattr(forensic, "owned_kernels", lambda *sources: Owned.of(["norm_kernel"], []))
        monkeypatch.setattr(ncu, "find_ncu", lambda: "/usr/bin/ncu")
        verdict = Verdict(task="t", candidate="c.py", size="small", compiled=True, correct=True, reason=None,
                          checks=[], runtime_ms=0.004, device="cuda", isolation={})
        forensic.apply(verdict, SimpleNamespace(config=SimpleNamespace(forensic=True)),
                       SimpleNamespace(allow_partial=False), SimpleNamespace(read_text=lambda: ""), "0" * 32)
        return verdict, asked

    verdict, asked = judge(sessions)
    assert asked == [3, 1] and verdict.correct, verdict.reason
    assert verdict.forensic["sessions"] == 2 and "1-call session's launches taken away" in verdict.checks[-1].detail
    verdict, asked = judge({3: _trace(*[("norm_kernel", 0.004)] * 3)})
    assert asked == [3] and verdict.correct and verdict.forensic["sessions"] == 1
    verdict, asked = judge({3: _trace(*fold)})
    assert asked == [3] and not verdict.correct and "no kernel of the candidate's own" in verdict.reason
    cheat = {1: _trace(("norm_kernel", 0.004), *fold), 3: _trace(*[("norm_kernel", 0.004), *fold] * 3)}
    verdict, asked = judge(cheat)
    assert asked == [3, 1] and not verdict.correct and "library kernels did the work" in verdict.reason


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "1.0", True, None])
def test_a_reported_time_must_be_a_finite_number_of_milliseconds(value: object) -> None:
    from kernelevo.sandbox.judge.timed_calls import reported_ms

    with pytest.raises(ValueError):
        reported_ms({"gpu_ms": value}, "gpu_ms")
    assert reported_ms({"gpu_ms": 0.25}, "gpu_ms") == 0.25


@pytest.mark.parametrize("rows", [
    '"x1","1","p","h","relu_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns","5"\n'
    '"2","1"\n',
    '"2","1","p","h","relu_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns","-1e12"\n',
    '"2","1","p","h","relu_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns","inf"\n',
    '"2","1","p","h","' + "A" * 200000 + '","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns","5"\n',
    '"2","1","p","h","relu_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns","n/a"\n',
    '"2","1","p","h","relu_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns",""\n',
], ids=["short-row", "negative", "infinite", "huge-field", "not-a-number", "empty"])
def test_a_malformed_kernel_trace_is_the_candidates_failure_not_the_judges(tmp_path: Path, rows: str) -> None:
    """ncu's CSV lies in the candidate's outbox, where its process may rewrite it: whatever is wrong
    with it rejects the candidate in words, and never raises in the judge."""
    from kernelevo.sandbox.judge import forensic

    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
            '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n')
    marker = ('"0","1","p","h","at::cuda::(anonymous namespace)::spin_kernel(long)","1","7","(1, 1, 1)","(1, 1, 1)",'
              '"0","9.0","s","gpu__time_duration.sum","ns","1000"\n')
    launches, failure, tool_failed = forensic.read_pass(_forensic_record(tmp_path, None, head + marker + rows))
    assert launches == [] and not tool_failed and "could not be read" in failure, failure


def test_a_kernel_trace_left_by_a_process_the_judge_had_to_kill_is_not_read(tmp_path: Path) -> None:
    """A candidate can write its own trace into its outbox and keep ncu from writing the real one at
    exit by never exiting: such a trace is the candidate's word, not ncu's."""
    from kernelevo.sandbox.judge import forensic

    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
            '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n')
    marker = ('"0","1","p","h","at::cuda::(anonymous namespace)::spin_kernel(long)","1","7","(1, 1, 1)","(1, 1, 1)",'
              '"0","9.0","s","gpu__time_duration.sum","ns","1000"\n')
    assert forensic.read_pass(_forensic_record(tmp_path, None, head + marker))[1] is None
    launches, failure, tool_failed = forensic.read_pass(_forensic_record(tmp_path, None, head + marker, killed=True))
    assert launches == [] and not tool_failed and "did not exit by itself" in failure


class _Exiting:
    """A process that exits by itself ``exits_after`` seconds after the session ends, unless killed."""

    def __init__(self, exits_after: float) -> None:
        import time

        self.ends_at, self.killed = time.monotonic() + exits_after, False

    def alive(self) -> bool:
        import time

        return not self.killed and time.monotonic() < self.ends_at

    def kill(self) -> None:
        self.killed = True

    def wait(self, timeout: float) -> None:
        import time

        while self.alive():
            time.sleep(0.01)

    def channel(self, timeout: float):  # noqa: ANN201 - the oracle's channel, answering the reset
        class Answer:
            def request(self, message: dict, timeout: float) -> dict:
                return {"ok": True}
        return Answer()


@pytest.mark.parametrize(("forensic", "failure", "broke", "killed"), [
    (False, None, False, True),          # a finished session: killed at once, its teardown is of no use
    (True, None, False, False),          # under ncu: left to exit, ncu writes its log then
    (False, "timing: closed", True, False),  # a broken channel: left to die, so its signal is seen
    (False, "timing: timed out", False, True),  # a process that stopped answering: killed
])
def test_the_candidates_process_is_ended_as_its_session_ended(forensic: bool, failure: str | None, broke: bool,
                                                              killed: bool) -> None:
    plan = Plan(task=task(), task_path=Path("t.py"), candidate_path=Path("c.py"), device="cpu",
                timing=TimingPolicy(), forensic=forensic)
    worker = _Exiting(exits_after=0.3)
    session = Session(plan, _Exiting(exits_after=60.0), worker, None)  # type: ignore[arg-type]
    session.record.failure, session._worker_broke = failure, broke
    order = []

    class Lock:  # the GPU's lock, held from the judgement's start
        def __exit__(self, *exc: object) -> None:
            order.append(("lock given back", worker.alive()))

    session._held = Lock()
    session.close()
    assert worker.killed is killed
    assert order == [("lock given back", False)]  # never while the candidate's process still runs


def test_no_job_can_find_another_by_counting(evaluator) -> None:
    """Without bubblewrap a candidate could walk from its folder to its neighbours' (the spare process's
    channel): the folder of jobs can be entered, not listed, and every job's name has a random part."""
    import re
    import stat

    first, second = evaluator.job_dir("worker"), evaluator.job_dir("worker")
    assert stat.S_IMODE(first.parent.stat().st_mode) == 0o711
    for folder in (first, second):
        assert re.fullmatch(r"\d{4}-worker-[0-9a-f]{16}", folder.name), folder.name
    assert first.name.split("-")[-1] != second.name.split("-")[-1]


def test_a_forensic_trace_within_the_candidates_reach_is_said_to_be_so() -> None:
    """The kernel trace is evidence only where the candidate's process could not write it: a verdict
    says when it could (no Landlock, or ncu's folder beneath one the candidate may write)."""
    from kernelevo.sandbox.isolation.confinement import LAUNCHER_EXPOSED
    from kernelevo.sandbox.judge.forensic import exposure
    from kernelevo.sandbox.models import Isolation

    kept_out = Isolation(writes="landlock ABI 7: writes only beneath /out, /tmp, /var/tmp, /dev")
    assert exposure(kept_out) is None
    assert exposure(Isolation(writes="not confined: this kernel has no Landlock")) == \
        "not confined: this kernel has no Landlock"
    beneath = Isolation(writes=kept_out.writes, warnings=[f"{LAUNCHER_EXPOSED} (/tmp/x lies where the job may write)"])
    assert exposure(beneath).startswith(LAUNCHER_EXPOSED)
    assert exposure(Isolation()) == "not reported"


def test_a_trace_with_lines_ncu_does_not_write_is_the_candidates_doing() -> None:
    """ncu copies the profiled process's path into its log: a path holding newlines and quotes must not
    add a table of its own, nor may a name break a row into rows. ncu's real log reads as it is."""
    from conftest import ROOT
    from kernelevo.sandbox.advice import ncu

    real = (ROOT / "tests" / "fixtures" / "ncu" / "softmax_two_kernels" / "ncu.csv").read_text()
    assert ncu.layout_problem(real) is None
    header = real.splitlines()[3]
    forged_row = '"0","575","x","h","my_kernel","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","gpu__time_duration.sum","ns","5"'
    injected = real.replace("(/usr/bin/python3.12)", f"(/tmp/a\n{header}\n{forged_row}\nz/python3.12)")
    assert "header lines" in ncu.layout_problem(injected)
    rows_only = real.replace("(/usr/bin/python3.12)", f"(/tmp/a\n{forged_row}\nz/python3.12)")
    assert "line before the table" in ncu.layout_problem(rows_only)
    assert "header lines" in ncu.layout_problem(f"{header}\n{forged_row}\n{real}")
    split = real.replace('"python3.12"', '"py\n"0","575"', 1)
    assert "not ncu's" in ncu.layout_problem(split)
    # a kernel name holding quotes and commas, written by ncu without escaping them, to end its row
    # early and add rows of its own
    name_break = real.replace('"void at::vectorized_elementwise_kernel', '"x","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0",'
                              '"s","gpu__time_duration.sum","ns","5"\n"0","575","py","h","void at::vectorized', 1)
    assert ncu.layout_problem(name_break) is not None
    first_row = real.splitlines()[4]
    assert "twice" in ncu.layout_problem(real + first_row + "\n")  # a row repeated to overwrite a launch
    # ncu's own words are its own wherever they fall, and a log without a table says no kernel ran
    assert ncu.layout_problem(real + "==PROF== Disconnected from process 575\n") is None
    assert ncu.layout_problem("==WARNING== No kernels were profiled.\n") is None
    # but no row may follow them: a name in such a line could carry one
    smuggled = real + "==PROF== Connected to process 7 (/x/a\n" + first_row.replace('"0"', '"999"', 1) + "\n"
    assert "after ncu's closing lines" in ncu.layout_problem(smuggled)
    assert "not ncu's" in ncu.layout_problem(real.replace(first_row, first_row.replace('"0"', '"\u0663"', 1)))


def test_a_forensic_process_started_ahead_is_used_only_for_the_same_folders_and_launcher(make_evaluator) -> None:
    """The forensic pass's process (under ncu) starts while nothing is timed, ahead of the candidate that
    needs it; the pass takes it only when it was started for the same folders and the same launcher,
    and otherwise ends it and starts its own."""
    ev = make_evaluator()

    def launcher(folder: Path) -> list[str]:
        return ["/bin/sh", "-c", 'exec "$@"', str(folder)]

    readable = [ev.workspace]
    ev.processes.warm_traced(readable, launcher)
    ahead = ev.processes._traced[1]
    assert ahead.trace is not None and ahead.job.alive()
    taken = ev.processes.worker(readable, launcher)
    assert taken is ahead and ev.processes._traced is None
    assert taken.job.channel(60).recv(timeout=60)["hello"] == "worker"  # it runs, under its launcher

    ev.processes.warm_traced(readable, launcher)
    stale = ev.processes._traced[1]
    other = ev.processes.worker([], launcher)  # other folders: a process of its own
    assert other is not stale and not stale.job.alive()
    assert not stale.cache.exists() and other.cache.is_dir()  # an unused process leaves no cache folder
    for worker in (taken, other):
        worker.job.kill()


def test_a_process_compiles_alone_and_only_the_judge_carries_a_sources_cache(tmp_path: Path) -> None:
    """A cubin is loaded by its kernel's key, not checked against the source: candidate A must not be
    able to leave a kernel where B's process looks. Every process gets an empty folder of its own; the
    judge keeps it, when the process has ended, under a keyed name of its source, and lends it to the
    next process of that source only; another source, another evaluator's key, or a final re-judge
    (afresh) gets none. The root and its folders are the judge's."""
    from kernelevo.sandbox.judge.compile_caches import KEPT, SCRATCH, CandidateCaches

    one, other = CandidateCaches(tmp_path / "cache"), CandidateCaches(tmp_path / "cache")
    a, b = b"class ModelNew: a", b"class ModelNew: b"
    assert one.name_for(a) == one.name_for(a) != one.name_for(b)
    assert other.name_for(a) != one.name_for(a) and one.name_for(a, afresh=True) != one.name_for(a, afresh=True)
    first = one.scratch()
    assert first.parent == tmp_path / "cache" / SCRATCH and not any(first.iterdir())
    (first / "triton").mkdir()
    (first / "triton" / "kernel.cubin").write_text("compiled from a")
    one.keep(one.name_for(a), first)
    assert not first.exists()

    def lent(caches: CandidateCaches, name: str) -> Path:
        folder = caches.scratch()
        caches.lend(name, folder)
        return folder

    assert (lent(one, one.name_for(a)) / "triton" / "kernel.cubin").read_text() == "compiled from a"
    assert not any(lent(one, one.name_for(b)).iterdir())
    assert not any(lent(one, one.name_for(a, afresh=True)).iterdir())
    assert not any(lent(other, other.name_for(a)).iterdir())
    # what the process already holds stays; a name that is not a cache's (an empty one would be the
    # folder of all kept caches) is refused
    third = one.scratch()
    (third / "triton").mkdir()
    (third / "triton" / "mine").write_text("x")
    one.keep(one.name_for(b), third)
    fourth = one.scratch()
    (fourth / "triton").mkdir()
    one.lend(one.name_for(b), fourth)
    assert not any((fourth / "triton").iterdir())
    for bad in ("", "..", "kept", "0" * 31):
        with pytest.raises(ValueError):
            one.lend(bad, fourth)
        with pytest.raises(ValueError):
            one.keep(bad, fourth)
    for folder in (tmp_path / "cache", tmp_path / "cache" / KEPT, tmp_path / "cache" / SCRATCH, one.kept_root):
        assert folder.stat().st_mode & 0o777 == 0o711
    one.close()
    assert not one.kept_root.exists() and other.kept_root.exists()


def test_kept_caches_are_bounded_together_and_an_orphans_are_removed(tmp_path: Path, monkeypatch) -> None:
    """Many candidates each keeping just under the cap must not fill the disk: past the total, the
    oldest kept go. A kept folder of an evaluator that died is useless (its key died too) and goes when
    the next evaluator starts."""
    from kernelevo.sandbox.judge import compile_caches

    monkeypatch.setattr(compile_caches, "KEPT_TOTAL_BYTES", 7 << 19)  # 3.5 MB
    monkeypatch.setattr(compile_caches, "has_room", lambda free: True)
    caches = compile_caches.CandidateCaches(tmp_path / "cache")
    for k in range(5):
        folder = caches.scratch()
        (folder / "ballast").write_bytes(b"x" * (1 << 20))
        caches.keep(caches.name_for(bytes([k])), folder)
    kept = [k for k in range(5) if caches._kept(caches.name_for(bytes([k]))).is_dir()]
    assert kept == [2, 3, 4], kept  # the newest that fit in 3.5 MB together (each a little over 1 MB on disk)
    orphan = tmp_path / "cache" / compile_caches.KEPT / "999999999-dead"
    orphan.mkdir()
    (orphan / "x").write_text("left by a killed run")
    compile_caches.CandidateCaches(tmp_path / "cache")
    assert not orphan.exists() and caches.kept_root.exists()


class _ScriptedBlock(TimedCalls):
    """The timed-block loop of a GPU session against scripted answers: each timed call takes ``call_s``
    of wall time; the reference's output holds ``output_bytes``."""

    def __init__(self, output_bytes: int, call_s: float = 0.001, device: str = "cuda") -> None:
        self.plan = SimpleNamespace(device=device, timing=TimingPolicy(warmup=1, warmup_s=0.0, min_runs=6,
                                                                       max_runs=60, budget_s=0.05, spot_checks=2),
                                    eager_ms=None)
        self.rng = random.Random(7)
        self.output_bytes, self.call_s, self.checked_runs = output_bytes, call_s, []
        self.reference_bytes, self.forced = output_bytes, []

    def ask(self, job, who, phase, message):  # noqa: ANN001, ANN201 - the Session's signature
        if message["op"] == "timed":
            time.sleep(self.call_s * len(message["calls"]))
            return {"ok": True, "calls": [{"gpu_ms": 0.5, "lag_ms": 0.0, "host_ms": 0.01, "digest": 1}
                                          for _ in message["calls"]]}
        return {"ok": True}

    def _check_timed(self, seed, run, digest_seed, digest, whole=False, index=-1):  # noqa: ANN001, ANN202
        self.checked_runs.append(run)
        self.forced += [run] * whole
        return None, CHECK_MS_PER_GB * self.output_bytes / 1e9

    def _pace(self, job, who, phase, block) -> None:  # noqa: ANN001
        pass


def test_a_blocks_checks_count_against_its_budget_so_costly_checks_stop_it_at_its_least_calls() -> None:
    """The checks are charged by the reference's output size (``CHECK_MS_PER_GB``), never by the time the
    candidate's process takes to ship: slowing its ships cannot shorten a block."""
    cheap = _ScriptedBlock(output_bytes=4 << 20)
    block, (checked, _) = cheap._timed_block(None, "worker", "timed block 1")
    assert len(block.times_ms) > 2 * 6 and checked >= 2  # small outputs: the budget buys calls past the least
    costly = _ScriptedBlock(output_bytes=2 << 30)
    block, (checked, _) = costly._timed_block(None, "worker", "timed block 1")
    # two checks of 2 GB outspend the 50 ms budget: the block ends once it has its least calls and its checks
    assert checked >= 2 and len(block.times_ms) == max(6, costly.checked_runs[1] + 1)


def test_where_checks_may_be_samples_one_secret_call_among_the_least_is_checked_whole() -> None:
    places = []
    for seed in range(200):
        large = _ScriptedBlock(output_bytes=128 << 20)  # above the 64 MiB sampling size
        large.rng = random.Random(seed)
        large._timed_block(None, "worker", "timed block 1")
        assert len(large.forced) == 1 and large.forced[0] in large.checked_runs
        places.append(large.forced[0])
    assert set(places) == set(range(6))  # any of the block's least calls, not one a count could find
    small = _ScriptedBlock(output_bytes=4 << 20)
    small._timed_block(None, "worker", "timed block 1")
    assert small.forced == []  # whole checks anyway: nothing forced
    places = []  # two calls a request (the kept outputs' cap at 128 MiB): the least is 6 requests, 12 calls
    for seed in range(300):
        paired = _ScriptedBlock(output_bytes=128 << 20)
        paired.plan.timing = paired.plan.timing.model_copy(update={"calls_per_request": 2})
        paired.rng = random.Random(seed)
        paired._timed_block(None, "worker", "timed block 1")
        places += paired.forced
    assert set(places) == set(range(12))


def test_the_checks_so_far_say_nothing_of_whether_the_next_call_is_checked() -> None:
    """A candidate's process sees each ship request. Were a fixed number of checks drawn from the first
    calls, the calls after the last of them would be known to be unchecked; drawn call by call, a call
    after the block's checks are done is checked as often as any other."""
    after = checked_after = 0
    for seed in range(300):
        block = _ScriptedBlock(output_bytes=2 << 30, call_s=0.0)
        block.rng = random.Random(seed)
        block._timed_block(None, "worker", "timed block 1")
        runs = block.checked_runs
        if len(runs) >= 2 and runs[1] < 5:  # the two checks done before the last of the least calls
            later = range(runs[1] + 1, 6)
            after += len(later)
            checked_after += sum(run in runs for run in later)
    assert after > 100 and 0.2 < checked_after / after < 0.47  # the chance of any call: 2 of 6


def test_a_cache_too_large_to_keep_or_a_disk_too_full_keeps_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate that fills its compile folder must not fill the disk for every verdict after its own:
    over the cap (blocks in use, a sparse file's holes not counted; or files, empty ones too), or with
    too little room left on the disk, the folder is removed when its process ends, not kept."""
    from kernelevo.sandbox.judge import compile_caches

    caches = compile_caches.CandidateCaches(tmp_path / "cache")
    monkeypatch.setattr(compile_caches, "KEPT_CAP_BYTES", 1 << 20)
    monkeypatch.setattr(compile_caches, "has_room", lambda free: True)

    def kept_after_writing(name: bytes, real: int, sparse: int = 0) -> bool:
        folder = caches.scratch()
        (folder / "deep" / "er").mkdir(parents=True)
        (folder / "deep" / "er" / "ballast").write_bytes(b"x" * real)
        with open(folder / "holes", "wb") as holes:
            holes.truncate(sparse)
        caches.keep(caches.name_for(name), folder)
        assert not folder.exists()
        return caches._kept(caches.name_for(name)).is_dir()

    assert kept_after_writing(b"small", 64 << 10, sparse=8 << 20)
    assert not kept_after_writing(b"large", 2 << 20)
    monkeypatch.setattr(compile_caches, "KEPT_CAP_FILES", 50)
    many = caches.scratch()
    for k in range(60):  # empty files: no bytes, but the disk's inodes
        (many / f"f{k}").touch()
    caches.keep(caches.name_for(b"many"), many)
    assert not caches._kept(caches.name_for(b"many")).exists()
    monkeypatch.setattr(compile_caches, "has_room", lambda free: False)
    assert not kept_after_writing(b"small again", 64 << 10)


def test_a_full_disk_is_the_candidates_only_where_there_was_room_when_its_session_began() -> None:
    """The oracle's "no space left" is never the reference's failure (that would fail the whole run):
    with room when the session began, the candidate's process filled the disk; without, the machine
    is full, the judge's failure (exit 3, a run to resume once there is room)."""
    def stopped(free_at_start: int | None) -> Record:
        session = Session.__new__(Session)
        session.record, session.free_at_start = Record(device="cuda"), free_at_start
        session.plan = SimpleNamespace(eager_peak_bytes=1 << 30)
        session._stopped(Stop("oracle", "writing inputs for the forensic pass", "[Errno 28] No space left on device",
                              disk_full=True))
        return session.record

    filled = stopped((100 << 30, 10 ** 7))
    assert "filled while the candidate's process ran" in filled.failure and not filled.reference_error
    full = stopped((2 << 30, 10 ** 7))
    assert stopped((100 << 30, 10)).harness_error  # bytes to spare, but no inodes
    assert "free space, then go on" in full.harness_error and not full.failure and not full.reference_error
    assert stopped(None).harness_error


def test_a_reference_that_fails_beside_a_candidate_is_blamed_on_it_a_few_times_then_stops_the_run(
        tmp_path: Path) -> None:
    """One hostile candidate (a GPU it keeps busy into the reference's timeout, say) must not end a run,
    which a failed reference does: its session's reference timing out rejects it. The same beside
    several candidates in a row is the reference's own failure, and stops the evaluation; a reference
    that raises is its own at once (the session marks only a stopped one as failed beside)."""
    from kernelevo.sandbox.judge import evaluate as ev
    from kernelevo.sandbox.judge.compile_caches import CandidateCaches

    outcomes: list[tuple[bool, bool]] = []

    class FakeEvaluator(ev.Evaluator):
        def __init__(self) -> None:
            self.device, self.readable, self.caches = "cpu", [], CandidateCaches(tmp_path / "cache")
            self.config, self._reference_failures = ev.EvalConfig(workdir=tmp_path / "work"), 0
            self.processes = SimpleNamespace(warm=lambda: None)

        def baseline(self, task):  # noqa: ANN001, ANN202
            return ReferenceResult(device="cpu", flops=0.0, bytes=1.0, torch_version="x"), None

        def _session(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            failed, beside = outcomes.pop(0)
            record = Record(device="cpu")
            if failed:
                record.reference_error = "the task's reference failed during comparing set 0: timed out"
                record.reference_failed_beside = beside
            return record

    evaluator, source = FakeEvaluator(), tmp_path / "c.py"
    source.write_text("class ModelNew: ...\n")
    outcomes.extend([(True, True), (False, False), (True, True), (True, True), (True, True), (True, False)])
    first = evaluator.run_in_sandbox(task(), source, [])
    assert not first.correct and "taken as the candidate's doing" in first.reason
    evaluator.run_in_sandbox(task(), source, [])  # a session without one: the count starts again
    for _ in range(2):
        assert "timed out" in evaluator.run_in_sandbox(task(), source, []).reason
    with pytest.raises(ev.EvalError, match="timed out"):
        evaluator.run_in_sandbox(task(), source, [])
    evaluator._reference_failures = 0
    with pytest.raises(ev.EvalError):  # a reference that raised: its own at once
        evaluator.run_in_sandbox(task(), source, [])
    for broken, task_error, beside in ((True, False, True), (False, False, False), (True, True, False)):
        session = Session.__new__(Session)
        session.record = Record(device="cpu")
        session._stopped(Stop("oracle", "comparing set 0", "no answer in time", task_error=task_error,
                              broken=broken))
        assert session.record.reference_failed_beside is beside


def test_without_a_gpu_every_timed_call_is_checked() -> None:
    """Three calls drawn at 2 in 6 would all go unchecked one time in nine: a candidate skipping its
    work in every timed call must never pass on the draw (no draw is made)."""
    cpu = _ScriptedBlock(output_bytes=4 << 10, device="cpu")
    cpu.rng = None  # any draw would fail here
    block, (checked, _) = cpu._timed_block(None, "worker", "timed block 1")
    assert len(block.times_ms) == 3 and checked == 3 and cpu.checked_runs == [0, 1, 2]


def test_a_candidate_given_no_memory_limit_gets_half_the_hosts() -> None:
    """Without ``--memory`` a candidate still has a limit (its memory-backed /tmp counts against it
    under a cgroup): half the host's memory, said so in verdicts."""
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator, default_memory_bytes

    unset = Evaluator.__new__(Evaluator)
    unset.config = EvalConfig()
    total_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemTotal:"))
    assert default_memory_bytes() == total_kib * 1024 // 2
    assert unset.memory_bytes() == total_kib * 1024 // 2 and "half the host's memory" in unset.memory_text()
    given = Evaluator.__new__(Evaluator)
    given.config = EvalConfig(memory="2g")
    assert given.memory_bytes() == 2 * 1024**3 and given.memory_text() == "2g"


def test_the_candidates_process_is_paused_while_the_oracle_re_times_the_reference() -> None:
    """Between the candidate's two timed blocks the oracle re-times the reference with the candidate's
    process stopped (``Job.pause``), and lets it go on before the second block."""
    log: list[tuple[str, str]] = []

    class Paused:
        def __init__(self, who: str) -> None:
            self.who = who

        def pause(self) -> None:
            log.append((self.who, "pause"))

        def resume(self) -> bool:
            log.append((self.who, "resume"))
            return self.who != "woken"

        def remaining(self) -> float:
            return 60.0

    class Scripted(_ScriptedBlock):
        def ask(self, job, who, phase, message):  # noqa: ANN001, ANN201 - the Session's signature
            log.append((who, message["op"]))
            return super().ask(job, who, phase, message)

    part = Scripted(output_bytes=4 << 20)  # a GPU session: two candidate blocks around the re-timing
    part.plan.task = task()
    part.worker, part.oracle = Paused("worker"), Paused("oracle")
    part.record = Record(device="cuda")
    part._timing()
    paused, resumed = log.index(("worker", "pause")), log.index(("worker", "resume"))
    assert [who for who, _ in log[paused + 1:resumed]] and {who for who, _ in log[paused + 1:resumed]} == {"oracle"}
    assert ("oracle", "timed") in log[paused + 1:resumed]
    assert ("worker", "timed") in log[:paused] and ("worker", "timed") in log[resumed + 1:]
    # a process of the candidate's that ran while paused (woken by another) rejects it
    log.clear()
    part.worker, part.record = Paused("woken"), Record(device="cuda")
    with pytest.raises(Stop, match="ran while it was paused"):
        part._timing()


def test_a_round_that_fails_the_judges_clock_is_timed_again_where_the_deadline_allows() -> None:
    """The session's side of the retry: a first round whose calls ran 5 ms past their reported 0.5 ms
    (the reference's ran 0.5 ms past) is doubted and timed again; the record keeps the second round
    alone and says why. With no time left before the worker's deadline, the first round stands."""

    class Job:
        def __init__(self, left: float) -> None:
            self.left = left

        def pause(self) -> None:
            pass

        def resume(self) -> bool:
            return True

        def remaining(self) -> float:
            return self.left

    class Doubted(_ScriptedBlock):
        blocks = 0

        def ask(self, job, who, phase, message):  # noqa: ANN001, ANN201 - the Session's signature
            if who == "worker" and message["op"] == "warmup":
                self.blocks += 1
            if who == "worker" and message["op"] == "timed" and self.blocks <= 2:
                time.sleep(0.0055)
            return super().ask(job, who, phase, message)

    for left, retried in ((60.0, True), (0.0, False)):
        part = Doubted(output_bytes=4 << 20)
        part.plan.task = task()
        part.worker, part.oracle, part.record = Job(left), Job(60.0), Record(device="cuda")
        part._timing()
        assert (part.record.clock_retry is not None) == retried
        assert len(part.record.blocks) == 2 and part.record.reference_block is not None
        walls = [w for block in part.record.blocks for w in block.wall_ms]
        if retried:
            # the kept round is the second: its calls ran no sleep (one may still meet a busy host)
            assert "more wall time" in part.record.clock_retry and sorted(walls)[len(walls) // 2] < 5.0, walls
        else:
            assert min(walls) > 5.0
