"""Profiling: ncu's CSV as captured on the H200, the diagnosis, the ncu pass through the sandbox with
stand-ins for ncu (no GPU here), graceful degradation, the CLI, and the agent's use of it."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from conftest import ROOT, candidate
from kernelevo.agent.cli import app
from kernelevo.sandbox.advice import ncu
from kernelevo.sandbox.advice.diagnosis import diagnose, verdict_diagnosis
from kernelevo.sandbox.advice.profiling import HarnessProfiler, describe
from kernelevo.sandbox.models import KernelMetrics, Profile, Verdict
from kernelevo.tasks import load_task

FIXTURES = ROOT / "tests" / "fixtures" / "ncu"
CAPTURE = FIXTURES / "softmax_two_kernels"


@pytest.mark.parametrize("name", ["ncu.csv", "ncu-stdout.csv"])
def test_real_ncu_csv_is_parsed_per_kernel(name: str) -> None:
    kernels = ncu.parse((CAPTURE / name).read_text())
    assert [k.name for k in kernels] == ["normalize_kernel", "row_stats_kernel", "at::vectorized_elementwise_kernel"]
    stats = kernels[1]
    # "2,147,532,032" + "2,723,840" bytes: thousands separators are numbers, not columns
    assert stats.dram_bytes == pytest.approx(2_147_532_032 + 2_723_840, rel=1e-3)
    assert stats.registers == 141 and stats.grid == "(32768, 1, 1)" and stats.block == "(128, 1, 1)"
    assert 96 < stats.dram_pct < 97 and 36 < stats.sm_pct < 37
    assert stats.achieved_occupancy_pct == pytest.approx(18.24) and stats.theoretical_occupancy_pct == 18.75
    assert stats.top_stalls(1)[0][0] == "long_scoreboard"
    assert "selected" not in dict(stats.top_stalls(20))  # issuing is not a stall
    assert 460 < stats.duration_us < 464


def test_launches_of_one_kernel_are_folded_time_weighted() -> None:
    text = (CAPTURE / "ncu.csv").read_text()
    rows = [line for line in text.splitlines() if '"row_stats_kernel"' in line]
    second = [line.replace('"1","', '"7","', 1) for line in rows]  # the same kernel launched again, ID 7
    second = [line.replace('"96.55"', '"50.00"').replace('"462,848"', '"462,848"') for line in second]
    header = next(line for line in text.splitlines() if line.startswith('"ID"'))
    kernels = ncu.parse("\n".join([header, *rows, *second]))
    assert len(kernels) == 1 and kernels[0].launches == 2
    assert kernels[0].dram_pct == pytest.approx((96.55 + 50.0) / 2)  # equal durations: the plain mean


@pytest.mark.parametrize(("log", "words"), [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "refused the GPU's performance counters"),
    ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", "cannot read hardware counters"),
    ("==WARNING== No kernels were profiled.", "no kernel ran"),
    ("==ERROR== Failed to find metric regex:foo", "does not know a metric"),
    ("==ERROR== something else entirely", "ncu failed: something else entirely"),
    ("==ERROR== An error was reported by the driver:\nout of memory (cudaErrorMemoryAllocation)\n==PROF== Disconnected",
     "ncu failed: An error was reported by the driver: out of memory (cudaErrorMemoryAllocation)"),
])
def test_ncu_refusals_are_said_in_words(log: str, words: str) -> None:
    assert words in ncu.refusal(log)


def test_no_refusal_in_a_clean_log() -> None:
    assert ncu.refusal((CAPTURE / "ncu-stdout.csv").read_text()) is None


def _profile(**extra: object) -> Profile:
    base = dict(task="softmax", candidate="c.py", device="NVIDIA H200", runtime_ms=1.5, timing="cuda-events",
                bound="memory", roofline_fraction=0.71)
    base.update(extra)
    return Profile(**base)


def test_diagnosis_reads_like_an_engineers_summary() -> None:
    kernels = ncu.parse((CAPTURE / "ncu.csv").read_text())
    compiler = [{"kernel": "normalize_kernel", "ok": True, "registers": 179, "spill_bytes": 0},
                {"kernel": "row_stats_kernel", "ok": True, "registers": 141, "spill_bytes": 0}]
    text = diagnose(_profile(kernels=kernels, compiler=compiler))
    assert text.startswith("memory-bound; 71% of bandwidth; 3 kernels, normalize_kernel takes 69% of their time; "
                           "normalize_kernel: 179 registers, no spills; DRAM 86%, SM ")
    assert "occupancy 11% (theoretical 12%)" in text and "top stall: long scoreboard" in text
    assert "Try: several kernels: fusing them saves a round trip through memory" in text


@pytest.mark.parametrize(("extra", "expected"), [
    ({"timing": "cpu-interpreter", "bound": None, "roofline_fraction": None}, "CPU interpreter: no roofline"),
    ({"bound": "compute", "roofline_fraction": 0.3}, "far from the matmul peak"),
    ({"roofline_fraction": 0.93}, "at the bandwidth limit"),
    ({"compiler": [{"kernel": "k", "registers": 255, "spill_bytes": 96}]}, "255 registers, 96 bytes spilled"),
    ({"telemetry": {"available": True, "throttle_reasons": ["idle", "hardware thermal slowdown"]}},
     "throttled: hardware thermal slowdown"),
    ({"kernels": [KernelMetrics(name="k", duration_us=10, achieved_occupancy_pct=9.0)], "roofline_fraction": 0.4},
     "low occupancy"),
])
def test_diagnosis_cases(extra: dict, expected: str) -> None:
    assert expected in diagnose(_profile(**extra))


def test_an_empty_profile_says_what_was_missing() -> None:
    profile = Profile(task="t", candidate="c", device="cpu", unavailable={"ncu": "ncu not found"})
    assert diagnose(profile) == "no measurements: ncu: ncu not found"


def test_every_accepted_verdict_carries_a_cheap_diagnosis() -> None:
    verdict = Verdict(task="t", candidate="c", size="full", compiled=True, correct=True, reason=None, checks=[],
                      device="H200", isolation={}, runtime_ms=1.0, timing="cuda-events", bound="memory",
                      roofline_fraction=0.9, achieved_gbps=3900.0, achieved_tflops=0.5,
                      telemetry={"available": True, "throttle_reasons": []})
    assert verdict_diagnosis(verdict).startswith("memory-bound; 90% of bandwidth")


# --- the ncu pass through the real sandbox, with stand-ins for ncu ---------------------------------


def _stand_in(evaluator, script: str) -> str:  # noqa: ANN001
    """Copy a stand-in ncu where the sandboxed process can see it (the compile cache is bound in)."""
    folder = evaluator.compile_cache / "fake-ncu"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / script, folder / script)
    shutil.copy(CAPTURE / "ncu.csv", folder / "softmax_two_kernels.csv")
    return str(folder / script)


def test_the_ncu_pass_runs_in_the_sandbox_and_reads_ncus_log(evaluator, monkeypatch) -> None:
    monkeypatch.setattr(evaluator, "device", "cuda")  # as on a GPU machine; the stand-in runs nothing
    monkeypatch.setenv("KERNELEVO_NCU", _stand_in(evaluator, "fake_ncu_ok.sh"))
    kernels, why, _ = evaluator.ncu_pass(load_task("softmax", "small"), candidate("ok_softmax_two_kernels"))
    assert why is None and [k.name for k in kernels][:2] == ["normalize_kernel", "row_stats_kernel"]
    job = sorted((evaluator.workspace / "jobs").glob("*-ncu-*"))[-1]
    assert json.loads((job / "job.json").read_text())["size"] == "small"


def test_counters_refused_by_the_driver_is_a_clear_not_available(evaluator, monkeypatch) -> None:
    monkeypatch.setattr(evaluator, "device", "cuda")
    monkeypatch.setenv("KERNELEVO_NCU", _stand_in(evaluator, "fake_ncu_refused.sh"))
    profile = HarnessProfiler(evaluator).profile(load_task("softmax", "small"), candidate("ok_softmax_two_kernels"),
                                                 None)
    assert "refused the GPU's performance counters" in profile.unavailable["ncu"]
    # everything else still came back: the compiler's report of both kernels
    assert {r["kernel"] for r in profile.compiler} == {"row_stats_kernel", "normalize_kernel"}
    assert "ncu: not available: ncu was refused" in describe(profile)


def test_no_ncu_and_no_gpu_are_said(evaluator, monkeypatch) -> None:
    task, path = load_task("softmax", "small"), candidate("ok_softmax_two_kernels")
    assert evaluator.ncu_pass(task, path)[1].startswith("no GPU")
    monkeypatch.setattr(evaluator, "device", "cuda")
    monkeypatch.setenv("KERNELEVO_NCU", "/nonexistent/ncu")
    assert evaluator.ncu_pass(task, path)[1].startswith("ncu not found")


def test_kernelevo_profile_on_the_cpu(tmp_path, cache_dir, monkeypatch) -> None:
    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    runner = CliRunner()
    done = runner.invoke(app, ["profile", "softmax", str(candidate("ok_softmax_two_kernels")), "--json",
                               "--size", "small", "--sandbox", "process"])
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout.strip().splitlines()[-1])
    profile = data["profile"]
    assert data["verdict"]["correct"] and profile["timing"] == "cpu-interpreter"
    assert profile["unavailable"]["ncu"].startswith("no GPU")
    assert all(r["registers"] > 0 and r["spill_bytes"] == 0 for r in profile["compiler"])
    assert profile["diagnosis"].startswith("CPU interpreter: no roofline")
    rejected = runner.invoke(app, ["profile", "relu", str(candidate("bad_torch_only")), "--size", "small",
                                   "--sandbox", "process"])
    assert rejected.exit_code == 1 and "nothing to profile" in rejected.output


def test_the_profile_tool_shows_the_diagnosis(tmp_path) -> None:
    from kernelevo.agent.store import RunStore
    from kernelevo.tools.kernel_tools import ToolContext, make_tools

    store = RunStore(tmp_path / "run")
    cid, _ = store.add_candidate(candidate("ok_relu_empty").read_text(), None, "grid", "grid", "{}", 0)
    store.record_evaluation(cid, "search", Verdict(task="relu", candidate="c", size="full", compiled=True,
                                                   correct=True, reason=None, checks=[], device="H200",
                                                   isolation={}, runtime_ms=1.0, timing="cuda-events",
                                                   reference_runtime_ms=1.1, diagnosis="memory-bound; 95%"))
    calls = []

    def profile(which: str) -> Profile:
        calls.append(which)
        return _profile(diagnosis="memory-bound; 71% of bandwidth; top stall: long scoreboard")

    def tools(profiler):  # noqa: ANN001, ANN202
        ctx = ToolContext(task=load_task("relu", "small"), store=store, judge=lambda c: None,
                          budget_left=lambda: None, population=lambda: "", notes=lambda: [], profile=profiler)
        return {t.name: t for t in make_tools(ctx)}

    assert "top stall: long scoreboard" in tools(profile)["profile_kernel"].invoke({"candidate": cid[:10]})
    assert calls == [cid]

    def broken(which: str) -> Profile:
        raise RuntimeError("ncu crashed")

    said = tools(broken)["profile_kernel"].invoke({"candidate": cid[:10]})
    assert "profiling failed (RuntimeError: ncu crashed)" in said and "diagnosis: memory-bound; 95%" in said
    store.close()


def test_the_winner_on_a_gpu_is_profiled_once_and_status_shows_it(tmp_path) -> None:
    from kernelevo.agent import archive as arch
    from kernelevo.agent.budget import Budget
    from kernelevo.agent.builtin.policy import BuiltinPolicy
    from kernelevo.agent.graph import Runtime, build_graph
    from kernelevo.agent.report.summary import describe as describe_event
    from kernelevo.agent.report.summary import status
    from kernelevo.agent.store import RunStore

    store = RunStore(tmp_path / "run")
    cid, _ = store.add_candidate(candidate("ok_softmax_two_kernels").read_text(), None, "tiled", "tiled", "{}", 0)
    passes = []

    class FakeEvaluator:  # the harness's figures as on the H200; the compiler and ncu passes stood in
        device, workspace = "cuda", tmp_path

        def evaluate(self, task, path, trace_below_ms=None, compile_afresh=False):  # noqa: ANN001, ANN202
            return Verdict(task="softmax", candidate=str(path), size="full", compiled=True, correct=True,
                           reason=None, checks=[], device="H200", isolation={}, runtime_ms=1.5,
                           timing="cuda-events", bound="memory", roofline_fraction=0.71, achieved_gbps=2800.0,
                           achieved_tflops=0.1), 0

        def triton_gate(self, task, path):  # noqa: ANN001, ANN202
            passes.append("gate")
            return {"ok": True, "kernels": [{"kernel": "normalize_kernel", "ok": True, "registers": 179,
                                             "spill_bytes": 0, "resources": "179 registers, no spills"}]}

        def ncu_pass(self, task, path):  # noqa: ANN001, ANN202
            passes.append("ncu")
            return ncu.parse((CAPTURE / "ncu.csv").read_text()), None, 12.0

    rt = Runtime(task=load_task("softmax", "small"), store=store, policy=BuiltinPolicy(),
                 budget=Budget(max_evals=0), evaluator=FakeEvaluator(), final_evaluator=FakeEvaluator())
    archive = {"c": arch.Entry(id=cid, strategy="tiled", cell="tiled", parent=None, correct=True, runtime_ms=1.4,
                               speedup=None)}
    build_graph(rt).compile().invoke({"archive": archive, "generation": 1})
    assert passes == ["gate", "ncu"]
    rt.profile(cid)  # kept in the run store: never profiled twice
    assert passes == ["gate", "ncu"]
    event = next(e for e in store.events() if e["type"] == "profile")
    assert describe_event(event).startswith(f"profile {cid[:10]}: memory-bound; 71% of bandwidth; 3 kernels")
    store.set_meta("best", {"id": cid, "runtime_ms": 1.5, "speedup": 2.0, "timing": "cuda-events"})
    assert "top stall: long scoreboard" in status(store)["best"]["diagnosis"]
    store.close()


def test_the_model_reads_the_code_torch_compile_generates_for_the_reference(evaluator, tmp_path) -> None:
    """In a job of its own that runs the reference only: inductor's kernels (C++ on the CPU, Triton on
    a GPU) with the wrapper that launches them, through the tool, made once per run."""
    from kernelevo.agent.store import RunStore
    from kernelevo.tools.kernel_tools import ToolContext, make_tools

    task = load_task("relu", "small")
    made = []

    def inductor_code() -> str:
        made.append(1)
        return evaluator.inductor_code(task)

    store = RunStore(tmp_path / "run")
    ctx = ToolContext(task=task, store=store, judge=lambda c: None, budget_left=lambda: None,
                      population=lambda: "", notes=lambda: [], inductor_code=inductor_code)
    said = {t.name: t for t in make_tools(ctx)}["read_torch_compile_code"].invoke({})
    assert "def call(" in said, said[-2000:]
    assert ("cpp_fused" in said or "extern \"C\"" in said) if evaluator.device == "cpu" else "@triton.jit" in said
    assert made == [1]
    blind = ToolContext(task=task, store=store, judge=lambda c: None, budget_left=lambda: None,
                        population=lambda: "", notes=lambda: [])
    assert "not available" in {t.name: t for t in make_tools(blind)}["read_torch_compile_code"].invoke({})
    store.close()
