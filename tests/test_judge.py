"""The judge's logic without a process: failures in words, speed of light, reference drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelevo.sandbox.ceilings import speed_of_light_ms
from kernelevo.sandbox.cuda_gate import summarize_ptxas
from kernelevo.sandbox.isolation import parse_size, scrubbed_env
from kernelevo.sandbox.judge import judge, process_failure
from kernelevo.sandbox.models import (
    CandidateResult,
    Ceilings,
    Check,
    HarnessResult,
    Isolation,
    JobOutcome,
    ReferenceResult,
    TensorPrint,
    TimingStats,
)
from kernelevo.sandbox.telemetry import decode_throttle_reasons, snapshot
from kernelevo.tasks.task import Task

CEILINGS = Ceilings(device="H200", copy_gbps=4300.0, matmul_tflops={"bfloat16": 790.0, "tf32": 380.0})
PRINT = TensorPrint(shape=[4], dtype="float32", finite=True, sum=1.0, abs_sum=1.0, sample=[0.25])


def stats(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, p10_ms=ms * 0.99, p90_ms=ms * 1.01, runs=50)


def task() -> Task:
    return Task(name="t", path=Path("t.py"), sha256="0", size="full")


def outcome(candidate_ms: float, rerun_ms: float, eager_ms: float = 2.0) -> tuple[ReferenceResult, JobOutcome]:
    reference = ReferenceResult(device="H200", output_prints=[[PRINT]], flops=0.0, bytes=4.3e9,
                                eager=stats(eager_ms), compiled=stats(1.5), torch_version="x")
    result = CandidateResult(device="H200", compiled=True, checks=[Check(name="c", passed=True)],
                             output_prints=[[PRINT]], reference_prints=[[PRINT]], timing="cuda-events",
                             candidate=stats(candidate_ms), candidate_blocks=[candidate_ms, candidate_ms],
                             reference=stats(rerun_ms))
    job = JobOutcome(returncode=0, wall_s=3.0, isolation=Isolation(),
                     result=HarnessResult(mode="candidate", candidate=result))
    return reference, job


def test_honest_timing_gives_speedups_and_roofline() -> None:
    reference, job = outcome(candidate_ms=1.25, rerun_ms=2.02)
    verdict = judge(task(), "c.py", [], reference, CEILINGS, job, None)
    assert verdict.correct, verdict.reason
    assert verdict.speedup == pytest.approx(1.6)
    assert verdict.speedup_vs_compile == pytest.approx(1.2)
    assert verdict.bound == "memory" and verdict.roofline_fraction == pytest.approx(0.8)


def test_faster_than_light_is_rejected() -> None:
    reference, job = outcome(candidate_ms=0.2, rerun_ms=2.0)  # 4.3 GB in 0.2 ms is 21 TB/s
    verdict = judge(task(), "c.py", [], reference, CEILINGS, job, None)
    assert not verdict.correct and verdict.reason.startswith("speed of light")


def test_tiny_calls_get_an_absolute_drift_allowance() -> None:
    reference, job = outcome(candidate_ms=0.008, rerun_ms=0.015, eager_ms=0.010)  # +50%, but only 5 us
    verdict = judge(task(), "c.py", [], reference, None, job, None)
    assert verdict.correct, verdict.reason


def test_reference_drift_is_rejected() -> None:
    reference, job = outcome(candidate_ms=1.5, rerun_ms=3.0)  # the reference got 50% slower
    verdict = judge(task(), "c.py", [], reference, CEILINGS, job, None)
    assert not verdict.correct and verdict.reason.startswith("reference timing stable")


def test_out_of_process_fingerprints_overrule_the_candidate_process() -> None:
    reference, job = outcome(candidate_ms=1.5, rerun_ms=2.0)
    job.result.candidate.output_prints = [[PRINT.model_copy(update={"sample": [0.75]})]]
    verdict = judge(task(), "c.py", [], reference, CEILINGS, job, None)
    assert verdict.reason.startswith("agrees with the clean reference process")


@pytest.mark.parametrize(("fields", "words"), [
    ({"timed_out": True, "phase": "timing"}, "timed out after 30 s during timing"),
    ({"out_of_memory": True}, "ran out of memory (limit 2g)"),
    ({"signal": "SIGSEGV (segmentation fault)", "returncode": -11}, "crashed with SIGSEGV"),
    ({"too_many_processes": True}, "too many processes"),
    ({"result_problem": "the harness wrote no result", "returncode": 1, "log_tail": "Traceback\nBoom"},
     "wrote no result (exit code 1): Traceback | Boom"),
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
