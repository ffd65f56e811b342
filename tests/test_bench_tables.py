"""The benchmark script's summary line, which docs/BENCHMARKS.md quotes: pure logic, no GPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench(name: str):  # noqa: ANN202 - a script of bench/ as a module
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ratios_within_the_timing_methods_spread_are_ties_not_wins() -> None:
    bench = _bench("builtin_bench")
    rows = {name: {"task": name, "evaluations": 8, "speedup": 2.0, "vs_compile": ratio, "strategy": "tiled"}
            for name, ratio in (("a", 1.10), ("b", 1.02), ("c", 0.97), ("d", 0.90))}
    rows["e"] = {"task": "e", "evaluations": 8, "speedup": None}  # the CPU interpreter: not a speedup
    text = bench.table({"tasks": rows})
    assert "across 4 tasks; faster than torch.compile on 1 of 4 by more than 4%, within 4% of it on 2." in text


def test_param_ab_renders_checks_and_runs_each_variant_on_the_cpu(tmp_path: Path) -> None:
    """bench/param_ab.py's smoke path (the interpreter, no timings): the task edit, two variants from
    two seeds, each checked against the reference. Keeps the GPU session's commands working."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "param_ab.py"), "row_sum", "--edit",
                           "rows, cols = 65536, 16384=>rows, cols = 4, 20000", "--set", "seed=2",
                           "--set", "seed=0,STATIC=false", "--device", "cpu"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ['correct: eager',
                                        'correct: split {"BLOCK_C": 2048, "SPLIT": 8, "STATIC": true, "num_warps": 8}',
                                        'correct: looped {"BLOCK_C": 4096, "BLOCK_R": 1, "STATIC": false, '
                                        '"num_warps": 8}']
    bad = subprocess.run([sys.executable, str(ROOT / "bench" / "param_ab.py"), "row_sum", "--edit", "nope=>x",
                          "--device", "cpu"], capture_output=True, text=True, env=env, timeout=600)
    assert bad.returncode != 0 and "is not in the task's source" in bad.stderr


@pytest.mark.slow
def test_builtin_bench_runs_a_task_and_records_the_winning_parameters(tmp_path: Path) -> None:
    """bench/builtin_bench.py end to end at the small size under the interpreter (timings mean
    nothing there): one finished run, read back from its database, with the winner's parameters and
    the policy's reason for them, so that a GPU table says which variant won."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "builtin_bench.py"), "--out", str(tmp_path), "--size",
                           "small", "--max-evals", "2", "--tasks", "relu"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads((tmp_path / "builtin_bench.json").read_text())["tasks"]["relu"]
    assert row["state"] == "finished" and row["evaluations"] == 2 and row["correct"] == 2
    assert row["strategy"] == "tiled" and row["params"]["BLOCK_C"] in (512, 1024)
    assert row["why"].startswith("seed: flat tiles of")


def test_a_sweep_never_runs_past_stop_after_and_records_no_problem_it_cut(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture) -> None:
    """Each problem's limit is what is left of ``--stop-after``; a problem cut short by it is not
    recorded (the next sweep starts it again), one that finished is; each start is announced first, so
    a sweep killed from outside still says which problem it was in."""
    import json
    import sys

    bench = _bench("kernelbench")
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for name in ("1_Fast.py", "2_Slow.py", "3_Never.py"):
        (suite / name).write_text("")
    limits = []

    def run_one(args, path, limit, gpu=None):  # noqa: ANN001, ANN202 - the sweep's problem runner, stood in
        limits.append((path.stem, limit))
        if path.stem == "1_Fast":
            return {"correct": True, "seconds": 1.0}
        return {"correct": False, "harness": True, "reason": f"the run took over {limit:.0f} s"}

    monkeypatch.setattr(bench, "run_one", run_one)
    out = tmp_path / "kb.json"
    monkeypatch.setattr(sys, "argv", ["kernelbench.py", "--mode", "optimize", "--suite", str(tmp_path / "suite"),
                                      "--levels", "1", "--stop-after", "100", "--out", str(out)])
    bench.main()
    printed = capsys.readouterr().out
    assert [name for name, _ in limits] == ["1_Fast", "2_Slow"]
    assert all(limit <= 100 for _, limit in limits), limits
    assert "[2/3] level1/2_Slow: started" in printed and "cut short by --stop-after" in printed
    assert list(json.loads(out.read_text())["optimize"]) == ["level1/1_Fast"]


def test_a_problem_past_its_limit_takes_its_whole_process_group_down(tmp_path: Path) -> None:
    """An `optimize` or `eval` killed at its limit must not leave its sandboxed jobs running."""
    import subprocess
    import time

    bench = _bench("kernelbench")
    marker = tmp_path / "child.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        bench.run_within(["sh", "-c", f"sleep 60 & echo $! > {marker}; wait"], 1.0)
    child = int(marker.read_text())
    time.sleep(0.2)
    state = Path(f"/proc/{child}/stat")
    assert not state.exists() or state.read_text().split()[2] == "Z", "the job's child outlived it"


def test_the_scripted_model_of_the_agent_bench_edits_the_kernel_it_is_shown() -> None:
    """The bench's model finds the best kernel's id and launch line where the generation prompt shows
    them, edits the block size, then checks what the edit saved: a change of the prompt's wording that
    it no longer reads would turn the bench's edits into rewrites of the same file."""
    bench = _bench("agent_bench")
    assert "The fastest so far, {{ elites[0].id[:10] }}" in (ROOT / "prompts" / "generation.md").read_text()
    launch = next(line for line in bench.START.splitlines() if "relu_kernel[(" in line)
    prompt = f"Generation 1.\nThe fastest so far, 0123456789 (grid, 1.0 ms):\n```python\n{launch}\n```"
    model = bench.ScriptedModel()
    reply = model({"messages": [{"role": "system", "content": "You are a kernel engineer."},
                                {"role": "user", "content": prompt}]})
    call = reply["tool_calls"][0]
    args = json.loads(call["arguments"])
    assert call["name"] == "edit_kernel" and args["candidate"] == "0123456789"
    assert f"BLOCK={bench.BLOCKS[0]}" in args["edits"] and launch in args["edits"]
    reply = model({"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": prompt},
                                {"role": "tool", "content": "edited; saved as candidate abcdef0123 (26 lines)"}]})
    assert reply["tool_calls"][0]["name"] == "check_kernel"
    assert json.loads(reply["tool_calls"][0]["arguments"]) == {"candidate": "abcdef0123"}


def test_the_agent_bench_counts_only_time_no_harness_work_covered() -> None:
    """Overlapping verdicts of two islands are merged, not summed: the idle time is what no interval
    covers between the first request and the end."""
    clock = _bench("agent_bench").HarnessClock()
    clock.intervals = [(1.0, 4.0), (2.0, 5.0), (7.0, 8.0), (9.5, 12.0)]
    assert clock.idle_s(0.0, 10.0) == pytest.approx(1.0 + 2.0 + 1.5)
    assert clock.idle_s(3.0, 6.0) == pytest.approx(1.0)
    assert clock.idle_s(0.0, 0.5) == pytest.approx(0.5)



@pytest.mark.parametrize("timed", [True, False])
def test_a_seed_judged_on_a_gpu_keeps_its_times_and_on_the_cpu_only_its_verdict(monkeypatch: pytest.MonkeyPatch,
                                                                                tmp_path: Path, timed: bool) -> None:
    """``gpu-seed`` judges the first seed once at the file's own size (the sandbox the machine picks) and
    keeps the verdict's times against eager and torch.compile; ``cpu-judge`` forces the process sandbox
    and keeps no time, since interpreter times mean nothing."""
    import json
    import subprocess

    bench = _bench("kernelbench")
    commands = []
    verdict = {"correct": True, "reason": None, "runtime_ms": 1.0, "reference_runtime_ms": 2.0,
               "compile_runtime_ms": 1.5, "speedup": 2.0, "speedup_vs_compile": 1.5, "assurance": "forensic: ...",
               "phases": {"timing": 1.0}, "wall_s": 9.0, "launches": {"k": 3},
               "forensic": {"per_call_ms": 1.25, "custom_share": 1.0},
               "clock": {"unexplained_ms": 0.15, "allowed_ms": 0.6, "call_ms": 1.0}}

    def run_within(cmd, timeout_s, gpu=None):  # noqa: ANN001, ANN202 - the CLI processes, stood in
        commands.append(cmd)
        out = json.dumps(verdict) if "eval" in cmd else "tiled {'BLOCK_C': 1024}"
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(bench, "run_within", run_within)
    row = bench.judge_seed(tmp_path / "19_ReLU.py", 100.0, timed=timed)
    eval_cmd = commands[-1]
    assert row["correct"] and row["seed"] == "tiled {'BLOCK_C': 1024}"
    assert ("--sandbox" in eval_cmd) is not timed
    if timed:
        assert row["speedup"] == 2.0 and row["speedup_vs_compile"] == 1.5 and row["phases"] == {"timing": 1.0}
        assert "launches" not in row
        assert bench.summary({"a": row})["geomean_compile"] == pytest.approx(1.5)
        # the forensic pass's traced time per call is kept beside the timed median, and summarised
        assert bench.summary({"a": row})["timed_over_traced"] == {"rows": 1, "min": 0.8, "p10": 0.8, "median": 0.8}
        # and the clock check's figures: the wall time left unexplained, beside its allowance
        room = bench.summary({"a": row, "b": {**row, "clock": {**row["clock"], "unexplained_ms": -0.05}}})["clock_room"]
        assert room["unexplained_ms"]["max"] == 0.15 and room["unexplained_ms"]["min"] == -0.05
        assert room["share_of_allowance"]["max"] == 0.25 and room["share_of_allowance"]["rows"] == 2
        doubted = {**row, "clock": {**row["clock"], "first_round": {"unexplained_ms": 0.9, "allowed_ms": 0.6}}}
        room = bench.summary({"a": doubted})["clock_room"]
        assert room["retried"] == 1 and room["share_of_allowance"]["max"] == 1.5
    else:
        assert not {"speedup", "speedup_vs_compile", "runtime_ms"} & set(row)


def test_a_sweep_of_two_jobs_runs_two_problems_at_once_and_records_each(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys
    import threading
    import time

    bench = _bench("kernelbench")
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for n in range(1, 5):
        (suite / f"{n}_P.py").write_text("")
    running, most = [0], [0]
    guard = threading.Lock()

    def run_one(args, path, limit, gpu=None):  # noqa: ANN001, ANN202 - the sweep's problem runner, stood in
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)
        with guard:
            running[0] -= 1
        return {"correct": True, "speedup": 1.0}

    monkeypatch.setattr(bench, "run_one", run_one)
    out = tmp_path / "kb.json"
    monkeypatch.setattr(sys, "argv", ["kernelbench.py", "--mode", "gpu-seed", "--suite", str(tmp_path / "suite"),
                                      "--levels", "1", "--jobs", "2", "--out", str(out)])
    bench.main()
    assert most[0] == 2
    assert sorted(json.loads(out.read_text())["gpu-seed"]) == [f"level1/{n}_P" for n in range(1, 5)]


def test_a_problem_past_its_limit_beside_others_is_judged_again_alone_with_a_longer_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large problem waits for device memory that the others hold and runs out of time: it is judged
    again after them, alone, with twice the limit, and its row says so; a problem past its limit when
    it ran alone is not tried again."""
    import json
    import sys

    bench = _bench("kernelbench")
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for name in ("1_Big.py", "2_Fine.py", "3_Slow.py"):
        (suite / name).write_text("")
    calls: list[tuple[str, float]] = []

    def run_one(args, path, limit, gpu=None):  # noqa: ANN001, ANN202 - the sweep's problem runner, stood in
        calls.append((path.stem, limit))
        if path.stem == "3_Slow" or (path.stem == "1_Big" and len([c for c in calls if c[0] == "1_Big"]) == 1):
            return {"correct": False, "harness": True, "reason": f"judging took over {limit:.0f} s"}
        return {"correct": True, "speedup": 1.5}

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(bench, "device_name", lambda: None)  # rows the same on a machine with a GPU
    out = tmp_path / "kb.json"
    monkeypatch.setattr(sys, "argv", ["kernelbench.py", "--mode", "gpu-seed", "--suite", str(tmp_path / "suite"),
                                      "--levels", "1", "--jobs", "2", "--timeout", "100", "--out", str(out)])
    bench.main()
    rows = json.loads(out.read_text())["gpu-seed"]
    assert rows["level1/1_Big"] == {"correct": True, "speedup": 1.5, "alone": True}
    assert rows["level1/2_Fine"]["correct"] and "alone" not in rows["level1/2_Fine"]
    assert rows["level1/3_Slow"]["harness"] and rows["level1/3_Slow"]["alone"]
    assert sorted(calls) == [("1_Big", 100.0), ("1_Big", 200.0), ("2_Fine", 100.0), ("3_Slow", 100.0),
                             ("3_Slow", 200.0)]
    # a sweep that stopped before the retry left the row marked: the next runs it first, alone
    store = json.loads(out.read_text())
    store["gpu-seed"]["level1/1_Big"] = {"correct": False, "harness": True, "crowded": True, "reason": "took over"}
    store["gpu-seed"].pop("level1/2_Fine")
    out.write_text(json.dumps(store))
    calls.clear()
    bench.main()
    assert calls[0] == ("1_Big", 200.0) and ("2_Fine", 100.0) in calls
    assert json.loads(out.read_text())["gpu-seed"]["level1/1_Big"]["alone"]


def test_fill_lean_judges_lean_rows_again_and_keeps_them_where_the_harness_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--fill-lean`` (a full sweep): the problems a lean sweep verified are judged again for the
    forensic pass and torch.compile's time; full rows and lean rejections are not, and a lean row stays
    where the new run fails in the harness."""
    import json
    import sys

    bench = _bench("kernelbench")
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for name in ("1_Lean.py", "2_Full.py", "3_LeanWrong.py", "4_LeanSlow.py", "5_LeanTimedOut.py"):
        (suite / name).write_text("")
    out = tmp_path / "kb.json"
    lean = {"correct": True, "speedup": 1.2, "lean": True}
    out.write_text(json.dumps({"gpu-seed": {
        "level1/1_Lean": lean, "level1/2_Full": {"correct": True, "speedup": 2.0, "speedup_vs_compile": 1.5},
        "level1/3_LeanWrong": {"correct": False, "lean": True}, "level1/4_LeanSlow": lean,
        "level1/5_LeanTimedOut": lean}}))
    ran: list[str] = []

    def run_one(args, path, limit, gpu=None):  # noqa: ANN001, ANN202 - the sweep's problem runner, stood in
        ran.append(path.stem)
        if path.stem == "4_LeanSlow":
            return {"correct": False, "harness": True, "reason": f"judging took over {limit:.0f} s"}
        if path.stem == "5_LeanTimedOut":  # the judge's own limit, not the bench's
            return {"correct": False, "reason": "sandboxed run: timed out after 223 s during timed block 1"}
        return {"correct": True, "speedup": 1.25, "speedup_vs_compile": 1.1}

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setattr(bench, "device_name", lambda: None)  # rows the same on a machine with a GPU
    argv = ["kernelbench.py", "--mode", "gpu-seed", "--suite", str(tmp_path / "suite"), "--levels", "1",
            "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    assert ran == []  # without the flag, every row stands
    monkeypatch.setattr(sys, "argv", argv + ["--fill-lean"])
    bench.main()
    rows = json.loads(out.read_text())["gpu-seed"]
    assert ran == ["1_Lean", "4_LeanSlow", "5_LeanTimedOut"]
    assert rows["level1/1_Lean"] == {"correct": True, "speedup": 1.25, "speedup_vs_compile": 1.1}
    assert rows["level1/4_LeanSlow"] == lean and rows["level1/3_LeanWrong"] == {"correct": False, "lean": True}
    assert rows["level1/5_LeanTimedOut"] == lean
    ran.clear()
    monkeypatch.setattr(sys, "argv", argv + ["--fill-lean", "--lean"])
    bench.main()
    assert ran == []  # a lean sweep has nothing to fill


def test_a_sweep_over_two_gpus_keeps_each_worker_on_its_own_device(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``--gpus 2``: two workers at least, each running its problems with one GPU visible (the k-th of
    those this process sees), and the CLI processes started with that device alone."""
    import subprocess
    import sys
    import threading
    import time

    bench = _bench("kernelbench")
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for n in range(1, 7):
        (suite / f"{n}_P.py").write_text("")
    seen: dict[str, str | None] = {}
    guard = threading.Lock()

    def run_one(args, path, limit, gpu=None):  # noqa: ANN001, ANN202 - the sweep's problem runner, stood in
        time.sleep(0.2)  # long enough for both workers to take problems
        with guard:
            seen[path.stem] = gpu
        return {"correct": True}

    monkeypatch.setattr(bench, "run_one", run_one)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    out = tmp_path / "kb.json"
    monkeypatch.setattr(sys, "argv", ["kernelbench.py", "--mode", "gpu-seed", "--suite", str(tmp_path / "suite"),
                                      "--levels", "1", "--gpus", "2", "--out", str(out)])
    bench.main()
    assert len(seen) == 6 and set(seen.values()) == {"3", "5"}
    assert bench.worker_devices(1, 2) == [None, None]
    with pytest.raises(SystemExit, match="only 2 visible"):
        bench.worker_devices(4, 4)
    done = bench.run_within([sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"], 30, "5")
    assert isinstance(done, subprocess.CompletedProcess) and done.stdout.strip() == "5"


def test_a_problem_whose_runner_raises_is_a_harness_row_and_the_sweep_goes_on(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import sys

    bench = _bench("kernelbench")
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    for name in ("1_Breaks.py", "2_Fine.py"):
        (suite / name).write_text("")

    def run_one(args, path, limit, gpu=None):  # noqa: ANN001, ANN202 - the sweep's problem runner, stood in
        if path.stem == "1_Breaks":
            raise OSError("no space left on device")
        return {"correct": True}

    monkeypatch.setattr(bench, "run_one", run_one)
    out = tmp_path / "kb.json"
    monkeypatch.setattr(sys, "argv", ["kernelbench.py", "--mode", "gpu-seed", "--suite", str(tmp_path / "suite"),
                                      "--levels", "1", "--out", str(out)])
    bench.main()
    rows = json.loads(out.read_text())["gpu-seed"]
    assert rows["level1/1_Breaks"]["harness"] and "no space left" in rows["level1/1_Breaks"]["reason"]
    assert rows["level1/2_Fine"]["correct"]
    ran = []
    monkeypatch.setattr(bench, "run_one", lambda args, path, limit, gpu=None: ran.append(path.stem) or {"correct": True})
    bench.main()  # a harness row is no verdict: the next sweep tries it again, and only it
    assert ran == ["1_Breaks"] and json.loads(out.read_text())["gpu-seed"]["level1/1_Breaks"]["correct"]


def test_the_forensic_share_counts_every_verdict_and_the_search_apart(tmp_path: Path) -> None:
    """``bench/forensic_share.py``: the pass's seconds over each verdict's wall time, untraced verdicts
    counted with none (a search traces only what could be handed back), the final re-judges apart."""
    from kernelevo.agent.store import RunStore
    from kernelevo.sandbox.judge.forensic import PHASE
    from kernelevo.sandbox.models import Verdict

    share = _bench("forensic_share")
    store = RunStore(tmp_path / "run")

    def judged(wall: float, forensic: float | None) -> Verdict:
        return Verdict(task="t", candidate="c", size="full", compiled=True, correct=True, reason=None, checks=[],
                       device="cuda", isolation={}, runtime_ms=1.0, wall_s=wall,
                       phases={PHASE: forensic} if forensic else {}, forensic={"kernels": 1} if forensic else None)

    for i, (wall, forensic) in enumerate(((10.0, 3.0), (8.0, None))):
        cid, _ = store.add_candidate(f"x = {i}\n", None, "s", "c", "{}", 0)
        store.record_evaluation(cid, "search", judged(wall, forensic))
        if i == 0:
            store.record_evaluation(cid, "final", judged(12.0, 6.0))
    rows = share.rows(store)
    assert [(r["kind"], r["traced"]) for r in rows] == [("search", True), ("search", False), ("final", True)]
    totals = share.totals(rows)
    assert totals["traced_search_verdicts"] == 1 and totals["search_share"] == round(3.0 / 18.0, 3)
    assert totals["share"] == round(9.0 / 30.0, 3)
    store.close()


def test_a_spread_sweep_samples_every_level_evenly_from_its_first_problems(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture) -> None:
    """``--spread``: levels in turn, each in bit-reversed order, so a sweep cut short after k problems
    has sampled both levels across their whole range; the summary is given per level too."""
    import sys

    bench = _bench("kernelbench")
    assert bench.spread(8) == [0, 4, 2, 6, 1, 5, 3, 7]
    for count in (0, 1, 5, 13, 100):
        order = bench.spread(count)
        assert sorted(order) == list(range(count))
        if count >= 4:  # the first quarter already reaches past the middle and into the last quarter
            assert max(order[:count // 4 + 1]) >= count * 3 // 4 - 1
    for level in (1, 2):
        folder = tmp_path / "suite" / f"level{level}"
        folder.mkdir(parents=True)
        for n in range(1, 9):
            (folder / f"{n}_P.py").write_text("")
    files = bench.problems([1, 2], [], tmp_path / "suite", 1, True)
    assert [bench.key_of(p) for p in files[:4]] == ["level1/1_P", "level2/1_P", "level1/5_P", "level2/5_P"]
    assert len(files) == 16
    monkeypatch.setattr(bench, "run_one", lambda args, path, limit, gpu=None: {
        "correct": True, "speedup": 2.0 if path.parent.name == "level1" else 1.0, "speedup_vs_compile": 1.0})
    out = tmp_path / "kb.json"
    monkeypatch.setattr(sys, "argv", ["kernelbench.py", "--mode", "gpu-seed", "--suite", str(tmp_path / "suite"),
                                      "--levels", "1,2", "--spread", "--out", str(out)])
    bench.main()
    text = capsys.readouterr().out
    printed = json.loads(text[text.index("\n{") + 1:])
    assert printed["problems"] == 16 and printed["geomean_eager"] == pytest.approx(2 ** 0.5)
    assert printed["by_level"]["level1"]["geomean_eager"] == pytest.approx(2.0)
    assert printed["by_level"]["level2"]["fast_1_eager"] == 0.0


def test_lean_rows_count_for_eager_and_stay_out_of_the_torch_compile_columns() -> None:
    """A ``--lean`` row has no torch.compile time: counting it as "not faster than torch.compile" would
    understate fast_p over compile, so those columns are over the rows that were timed against it."""
    bench = _bench("kernelbench")
    rows = {"level1/a": {"correct": True, "speedup": 2.0, "speedup_vs_compile": 1.6},
            "level1/b": {"correct": True, "speedup": 3.0, "speedup_vs_compile": None, "lean": True},
            "level1/c": {"correct": False, "speedup": None}}
    out = bench.summary(rows)
    assert out["correct"] == 2 and out["lean"] == 1
    assert out["fast_1_eager"] == 2 / 3 and out["fast_1.5_compile"] == 1 / 2
    assert abs(out["geomean_compile"] - 1.6) < 1e-9
    assert bench.summary({"level1/b": rows["level1/b"]})["fast_1_compile"] is None
    # a lean run cut short by its time limit has no compile time either: the row still says lean
    args = bench.argparse.Namespace(mode="gpu-seed", lean=True, no_forensic=False)
    bench.judge_seed = lambda *a, **k: {"correct": False, "harness": True, "reason": "judging took over 240 s"}
    assert bench._run_mode(args, Path("x.py"), 1.0, None)["lean"] is True


def test_a_sweep_without_the_forensic_pass_keeps_torch_compiles_time(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``--no-forensic`` skips the Nsight Compute pass alone: the judge is asked for torch.compile's
    time, and the row says which pass it lacks (it is no lean row: its compile columns count)."""
    import subprocess

    bench = _bench("kernelbench")
    asked: list[list[str]] = []

    def run_within(cmd, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - the CLI, stood in
        asked.append(cmd)
        return subprocess.CompletedProcess([], 0, "seed 0\n" if len(asked) == 1 else
                                           '{"correct": true, "speedup_vs_compile": 1.2}', "")

    monkeypatch.setattr(bench, "run_within", run_within)
    args = bench.argparse.Namespace(mode="gpu-seed", lean=False, no_forensic=True, odd=False)
    row = bench.run_one(args, tmp_path / "task.py", 60.0)
    assert "--no-forensic" in asked[1] and "--no-compile-baseline" not in asked[1]
    assert row["no_forensic"] is True and "lean" not in row and row["speedup_vs_compile"] == 1.2
    assert bench.summary({"level1/a": row})["geomean_compile"] == pytest.approx(1.2)
    assert bench.summary({"level1/a": row})["without_forensic_pass"] == 1
    asked.clear()
    args.no_forensic, args.lean = False, True
    bench.run_one(args, tmp_path / "task.py", 60.0)
    assert "--no-forensic" in asked[1] and "--no-compile-baseline" in asked[1]


def test_an_error_in_place_of_a_verdict_is_a_harness_row_that_says_so(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``kernelevo eval --json`` answers ``{"error": ...}`` when it gives no verdict (its own limit, a
    task it cannot load): the row is the harness's, with the error as its reason, never a candidate
    found wrong without one."""
    import subprocess

    bench = _bench("kernelbench")
    replies = iter([subprocess.CompletedProcess([], 0, "seed 0\n", ""),
                    subprocess.CompletedProcess([], 5, '{"error": "the judge waited too long for the GPU"}', "")])
    monkeypatch.setattr(bench, "run_within", lambda *args, **kwargs: next(replies))
    row = bench.judge_seed(tmp_path / "task.py", 60.0, timed=True)
    assert row["harness"] and not row["correct"]
    assert "exit 5" in row["reason"] and "waited too long for the GPU" in row["reason"]


def test_the_clock_bench_splits_each_processs_request_into_refill_digest_and_messages(tmp_path: Path) -> None:
    """Which part of a timed request the candidate's process pays more for than the oracle (the clock's
    fixed allowance exists for that gap): the medians of each part, and the wall time outside the
    handler, per process."""
    bench = _bench("judge_bench")
    trace = tmp_path / "trace.jsonl"

    def line(who: str, wall: float, refill: float, digest: float, handler: float) -> str:
        return json.dumps({"who": who, "op": "timed", "gpu_ms": 0.02, "lag_ms": 0.0, "host_ms": 0.01,
                           "wall_ms": wall, "parts": {}, "harness": {"refill_ms": refill, "digest_ms": digest,
                                                                     "handler_ms": handler}})

    rows = [line("worker", 1.5, 0.6, 0.3, 1.0), line("worker", 1.7, 0.8, 0.3, 1.2), line("oracle", 1.0, 0.5, 0.2, 0.8),
            line("oracle", 1.0, 0.5, 0.2, 0.8), json.dumps({"who": "worker", "op": "timed", "gpu_ms": 0.02,
                                                            "lag_ms": 0.0, "host_ms": 0.01, "wall_ms": 1.6})]
    trace.write_text("\n".join(rows) + "\n")
    parts = bench.call_parts(trace)
    assert parts["worker"]["refill_ms"] == 0.7 and parts["worker"]["messages_ms"] == 0.5
    assert parts["oracle"]["messages_ms"] == 0.2 and parts["oracle"]["digest_ms"] == 0.2
    assert parts["worker"]["calls"] == 3  # a reply without the parts still counts as a call


def test_the_harness_parts_of_a_timed_request_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refill runs from the request's start to its inputs, the digest from the call's end to its
    own, the handler over all of it, the copy kept for a request of several calls included."""
    from kernelevo.sandbox.child import timed

    clock = iter([10.0, 10.002, 10.005, 10.006, 10.009])  # begin, refilled, called, digested, copied
    monkeypatch.setattr(timed, "_perf_counter", lambda: next(clock))
    harness = timed.HarnessParts()
    for _ in range(4):
        harness.mark()
    assert harness.figures() == pytest.approx({"refill_ms": 2.0, "digest_ms": 1.0, "handler_ms": 9.0})
