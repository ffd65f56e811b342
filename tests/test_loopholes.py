"""Every loophole class of docs/EVALUATION.md, and every class of the judge review: known-wrong
candidates are rejected for the right reason, known-correct ones (two kernels, scratch buffers,
torch.empty outputs, constants held as tensors, transposed views, autotuning) are accepted.

They run on the CPU through the Triton interpreter (and on a GPU where there is one). A class that
only a GPU can tell apart (torch's work hidden from the in-process recorder) is accepted on the CPU
with a verdict that says it is not forensic, and rejected on a GPU by the forensic kernel trace."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from conftest import ON_GPU, ROOT, candidate, require_bwrap
from kernelevo.sandbox.isolation import file_watch
from kernelevo.sandbox.isolation.namespaces import hand_over
from kernelevo.tasks import load_task

FIXTURES = str(ROOT / "tests" / "fixtures" / "tasks") + "/"

ACCEPTED = [
    ("relu", "ok_relu_empty"),
    ("softmax", "ok_softmax_two_kernels"),
    ("row_argmax", "ok_argmax_first_tie"),
    ("cross_entropy", "ok_cross_entropy"),
    ("conv_relu_scale", "ok_conv_partial"),
    ("softmax", "../../tasks/examples/softmax_triton"),
    ("relu", "ok_eps_tensor"),
    ("softmax", "ok_transposed_view"),
    ("softmax", "ok_padded_rows"),
    ("softmax", "ok_autotune"),
    ("conv_relu_scale", "ok_conv_partial_kept_buffers"),
    (FIXTURES + "batchnorm_eval.py", "ok_batchnorm_reads_its_statistics"),
    (FIXTURES + "batchnorm_eval.py", "ok_batchnorm_written_by_hand"),
    # On a GPU the forensic pass counts the fold's torch kernels (library work in a strict task, outweighing
    # a 4 us call) as the calls' work, then takes a 1-call session's launches from a 3-call one's
    (FIXTURES + "batchnorm_eval.py", "ok_folds_norm_in_init_and_on_load"),
    ("layernorm", "ok_layernorm_own_parameters"),
    (FIXTURES + "matmul_upcast.py", "ok_matmul_fp32_tiles"),
    (FIXTURES + "topk_router.py", "ok_topk_lowest_index_first"),
    (FIXTURES + "wide_scale.py", "ok_scale_into_columns"),
    (FIXTURES + "wide_scale.py", "ok_scale_into_padded_rows"),
]


@pytest.mark.parametrize(("task", "name"), ACCEPTED)
def test_honest_candidates_are_accepted(evaluator, task: str, name: str) -> None:
    verdict, code = evaluator.evaluate(load_task(task, "small"), candidate(name))
    assert verdict.correct, verdict.reason
    assert code == 0
    assert verdict.compiled
    assert sum(verdict.launches.values()) >= 1
    names = {c.name for c in verdict.checks}
    assert {"ghost replay", "inputs unchanged", "precision", "timed runs correct",
            "times agree with the judge's clock"} <= names
    assert verdict.assurance.startswith("forensic" if ON_GPU else "interpreter: not forensic")


# (loophole number, task, candidate, the check that must fail, words the reason must contain)
REJECTED = [
    (1, "softmax", "bad_torch_only", "static: kernel defined", "no custom kernel"),
    (1, "softmax", "bad_never_launched", "static: kernel launched", "never launched"),
    (1, "softmax", "bad_method_compute", "no torch compute", "aten._softmax"),
    (1, FIXTURES + "row_sum_many.py", "bad_torch_in_a_subclass_dispatch", "static: no harness access", "subclass"),
    (1, "mlp_block", "bad_nn_module", "static: no torch compute", "nn.Linear"),
    (1, "softmax", "bad_weight_norm_in_forward", "no torch compute", "aten._weight_norm"),
    (2, "softmax", "bad_broad_except", "static: no fallback", "except Exception"),
    (2, "softmax", "bad_narrow_fallback", "custom kernel launched", "failed launches"),
    (3, "conv_relu_scale", "bad_dead_kernel", "ghost replay", "no-op"),
    (4, "relu", "bad_stale_memory", "correct: set 0", "NaN"),
    (5, "relu", "bad_input_mutation", "inputs unchanged", "modified"),
    (6, "relu", "bad_result_cache", "correct: set 1", "outside"),
    (7, "relu", "bad_subclass_output", "static: no harness access", "subclasses torch.Tensor"),
    (7, "relu", "bad_thread", "static: imports", "threading"),
    (8, "relu", "bad_patch_allclose", "static: no monkeypatching", "torch.allclose"),
    (1, "relu", "bad_blinds_recorder_through_an_alias", "static: no monkeypatching", "torch.autograd"),
    (9, "softmax", "bad_half_precision", "precision|correct: set", "lower precision|outside"),
    (9, "relu", "bad_output_dtype", "correct: set 0", "dtype bfloat16"),
    (10, "softmax", "bad_no_max_subtraction", "correct: set 3", "large values"),
    (10, "row_argmax", "bad_argmax_last_tie", "correct: set 4", "ties"),
    # only inputs of mean zero were drawn, and only a norm's constructor constants built
    (10, "layernorm", "bad_one_pass_variance", "correct: set 5", "shifted"),
    (10, "layernorm", "bad_one_pass_variance_about_one_pivot", "correct: set 5", "shifted"),
    # rounds every row once some row is far from zero: the rows near zero have a rounding scale of their own,
    # found where the input's rows lead the output, flattened, or along its columns
    (10, "layernorm", "bad_rounds_when_rows_are_shifted", "correct: set 5", "shifted"),
    (10, FIXTURES + "layernorm_3d_flat.py", "bad_ln_flat_rounds_when_shifted", "correct: set 5", "shifted"),
    (10, FIXTURES + "matmul_transposed_b.py", "bad_abt_coarse_near_cells", "correct: set 5", "shifted"),
    (10, FIXTURES + "layernorm_seq_first.py", "bad_ln_seq_first_rounds_when_shifted", "correct: set 5", "shifted"),
    (10, FIXTURES + "softmax_rand_by_hand.py", "bad_uniform_where_eager_is_right", "correct: set 3", "large values"),
    (10, FIXTURES + "fp16_rmsnorm_naive.py", "bad_rmsnorm_zeros_where_eager_is_right", "correct: set 3|correct: set 5",
     "large values|shifted"),
    (10, FIXTURES + "exp_gate.py", "bad_drops_terms_once_eager_overflows", "correct: set 5", "shifted"),
    (10, FIXTURES + "batchnorm_eval.py", "bad_ignores_norm_statistics", "correct: set 0", "outside"),
    (10, FIXTURES + "batchnorm_eval.py", "bad_folds_norm_once_in_init", "correct: set 0", "outside"),
    (10, FIXTURES + "batchnorm_eval.py", "bad_folds_norm_at_its_first_call", "correct: set 4", "parameters changed"),
    (10, FIXTURES + "learned_scale.py", "bad_ignores_a_learned_scale", "correct: set 0", "outside"),
    (10, "layernorm", "bad_knows_the_judge_by_torch_init", "correct: set 0", "outside"),
    (8, "softmax", "bad_honest_only_under_its_judged_name", "static: no harness access", "__name__"),
    (8, "softmax", "bad_honest_only_under_the_judges_cache", "static: no harness access", "get_default_build_root"),
    (1, "relu", "bad_runs_code_through_enum_builtins", "static: no harness access", "bltns"),
    (11, "matmul_bias_gelu", "bad_fp8_operands_in_a_bf16_task", "precision", "fp8 operands"),
    (11, "relu", "bad_coarse_only_with_gradients", "precision", "with gradients on"),
    (8, "softmax", "bad_honest_only_in_its_job_folder", "static: no harness access", "where code came from"),
    (1, "softmax", "bad_evaluates_through_type_hints", "static: no harness access", "evaluates strings"),
    (1, "softmax", "bad_exec_through_dataclasses", "static: no harness access", "private attribute"),
    (8, "softmax", "bad_path_through_a_format_string", "static: no harness access", "format field"),
    (8, "softmax", "bad_uses_names_planted_in_its_module", "static: no harness access", "never binds"),
    (8, "softmax", "bad_path_through_the_kernels_scope", "static: no harness access", "get_capture_scope"),
]


@pytest.mark.parametrize(("loophole", "task", "name", "check", "words"), REJECTED,
                         ids=[f"{r[0]}-{r[2]}" for r in REJECTED])
def test_known_wrong_candidates_are_rejected(evaluator, loophole: int, task: str, name: str, check: str,
                                             words: str) -> None:
    verdict, code = evaluator.evaluate(load_task(task, "small"), candidate(name))
    assert not verdict.correct, [(c.name, c.detail) for c in verdict.checks if c.name.startswith(("correct", "precision"))]
    assert code == 1
    failed = [c for c in verdict.checks if not c.passed]
    # "a|b": either (fp16 arithmetic is outside the tolerance on some input sets, and always too imprecise)
    assert failed and failed[0].name.startswith(tuple(check.split("|"))), [(c.name, c.detail) for c in failed]
    assert any(w in verdict.reason for w in words.split("|")), verdict.reason
    # an output that disagreed is a wrong output (a model run may try exact kernels); a broken rule alone is not
    compared = ("correct:", "precision", "timed runs correct")
    if failed[0].name.startswith(compared):
        assert verdict.wrong_output
    if not any(c.name.startswith(compared) for c in failed):
        assert not verdict.wrong_output


def test_a_row_sum_coarse_where_rows_are_shifted_is_rejected(make_evaluator) -> None:
    """Row sums rounded to half a unit of the largest once some row is far from zero: the rows near zero
    are off by up to 0.25, within the scale the far rows set for the whole output but far outside their
    own group's. One such row lands within 0.01 of its grid about one set in 30, so three shifted sets
    are drawn (18 sets): a lucky draw in all three is about one run in 30000."""
    verdict, code = make_evaluator(timeout_s=180, memory="4g", seeds=18).evaluate(
        load_task("row_sum", "small"), candidate("bad_row_sum_coarse_when_shifted"))
    assert not verdict.correct and code == 1
    failed = [c for c in verdict.checks if not c.passed]
    assert failed[0].name.startswith("correct: set") and "shifted" in failed[0].name, verdict.reason
    assert all(c.passed for c in verdict.checks if c.name.startswith("correct: set") and "shifted" not in c.name)


# Known holes. Values the shapes tie to input rows of one shift level have a slack of their own group
# (``level_groups.py``), held where more than ``GROUP_SHARE`` of the group's rows are past it: a candidate
# wrong on fewer rows passes within the whole output's slack. On the large-values set, exp outputs near
# float32's largest set a scale that every small value is within, and no structure of the inputs separates
# them (a slack by magnitude fails rows of cancelling sums). Kept visible until a structure holds.
# One text edit, where the hole is a variant of a rejected loophole case: (task, candidate, set, edits)
KNOWN_HOLES = [
    # every term below 50 dropped, not 70, and only where some input is below -88.72 (the large-values
    # set, not the shifted one): within that set's scale of about 2e33
    (FIXTURES + "exp_gate.py", "bad_drops_terms_once_eager_overflows", 3,
     (("x < 70.0", "x < 50.0"), ("x > 88.72", "x < -88.72"))),
    (FIXTURES + "row_sum_many.py", "bad_row_sum_coarse_on_a_few_rows", 5, None)]


@pytest.mark.slow  # documents holes that stay open: left to ``make test-all``
@pytest.mark.parametrize(("task", "name", "wrong_on", "edit"), KNOWN_HOLES)
def test_a_candidate_wrong_on_one_set_is_rejected_there(evaluator, tmp_path: Path, task: str, name: str,
                                                        wrong_on: int, edit: tuple[tuple[str, str], ...] | None
                                                        ) -> None:
    path = candidate(name)
    if edit is not None:
        source = path.read_text()
        for old, new in edit:
            assert old in source
            source = source.replace(old, new)
        path = tmp_path / path.name
        path.write_text(source)
    verdict, _ = evaluator.evaluate(load_task(task, "small"), path)
    sets = [c for c in verdict.checks if c.name.startswith("correct: set")]
    assert sets and all(c.passed for c in sets if not c.name.startswith(f"correct: set {wrong_on}")), verdict.reason
    if verdict.correct:
        pytest.xfail("known hole: one rounding scale where no structure of the inputs separates the values")
    assert verdict.reason.startswith(f"correct: set {wrong_on}"), verdict.reason


# The judge review's classes, for the runtime defences alone: the static checks, which reject most
# of these outright, are skipped. (class, task, candidate, the check that must fail, words)
RUNTIME_REJECTED = [
    (1, "relu", "bad_patch_judge_modules", "correct: set 0", "got 0.5"),
    (1, "relu", "bad_patch_runtime", "correct: set 0", "outside"),
    # measured twice before it decides: both rounds of timed calls were forged
    (2, "relu", "bad_forged_times", "times agree with the judge's clock", "second round of timed calls as in the first"),
    # a round thrown away for its times vouches for nothing: exact there, coarse in the round kept
    (11, "softmax", "bad_precise_only_in_the_discarded_round", "timed runs correct", "lower precision|64x"),
    (2, "relu", "bad_forge_result", "correct: set 0", "returned 0 outputs"),
    (4, "softmax", "bad_torch_on_thread", "no torch compute", "aten._softmax"),
    # a GPU compiles the body, and torch there is a compile error: rejected on the first call
    (5, "softmax", "bad_torch_in_jit", "correct: set 0" if ON_GPU else "no torch compute",
     "Unsupported function referenced" if ON_GPU else "aten._softmax"),
    (7, "relu", "bad_python_scalars", "no host arithmetic", "read 3000 values into Python"),
    (7, "relu", "bad_thread", "no new threads", "left running"),
    (8, "softmax", "bad_predicts_inputs", "correct: set 0", "outside"),
    (10, "conv_relu_scale", "bad_poison_link", "ghost replay", "still correct"),
    (11, "softmax", "bad_fp16_softmax", "precision|correct: set", "lower precision|outside"),
    # A second review, against the judge with its trust boundary:
    (2, "relu", "bad_forged_gpu_ms", "times agree with the judge's clock", "more wall time"),
    (2, "softmax", "bad_lazy_ship", "timed runs correct", "digest differs"),
    (11, "softmax", "bad_fp16_when_unchecked", "timed runs correct", "lower precision|outside"),
    (2, "relu", "bad_blame_the_oracle", "correct: set 0", "cannot be read"),
    # A third review: numbers Python's JSON reads but no comparison rejects, and replies that would
    # have raised in the judge itself instead of failing the candidate
    (2, "relu", "bad_nan_times", "sandboxed run", "NaN is not a number"),
    (2, "relu", "bad_infinite_reply", "sandboxed run", "Infinity is not a number"),
    (2, "relu", "bad_deep_reply", "sandboxed run", "nested too deeply"),
    (2, "relu", "bad_zero_time", "sandboxed run", "gpu_ms is 0"),
    (2, "relu", "bad_count_string", "sandboxed run", "a count of"),
    # A fourth: the words of the judge's own failure, said by the candidate
    (2, "relu", "bad_claims_the_harness_failed", "import", "OS call failed"),
    # A fifth: a kernel that does nothing credited by the ghost replay, and a judge told by its seed
    (3, "conv_relu_scale", "bad_noop_holds_the_output", "ghost replay", "still correct"),
    (3, "conv_relu_scale", "bad_weights_through_a_noop", "ghost replay", "every other tensor kept"),
    (10, "conv_relu_scale", "bad_stale_nan_link", "ghost replay", "every tensor a kernel was given zeroed"),
    (8, "relu", "bad_knows_the_exam", "correct: set 0", "outside"),
    # A sixth, against the two-call ghost replay
    (3, "conv_relu_scale", "bad_sparse_breaks_ghost", "ghost replay", "still correct"),
    (3, "conv_relu_scale", "bad_inference_scratch_breaks_ghost", "ghost replay", "still correct"),
    (3, "conv_relu_scale", "bad_kernel_clears_a_torch_one", "ghost replay", "every tensor a kernel was given zeroed"),
    (10, "conv_relu_scale", "bad_stale_nan_in_a_storage", "ghost replay", "every tensor a kernel was given zeroed"),
    (3, "conv_relu_scale", "bad_two_views_not_restored", "ghost replay", "every other tensor kept"),
    (3, "conv_relu_scale", "bad_folds_scale_each_call", "ghost replay", "work for __init__"),
    (8, "relu", "bad_knows_the_secret_seed", "correct: set 0", "outside"),
    # A seventh: a raise taken as the output being wrong without the kernels
    (3, "conv_relu_scale", "bad_raises_without_its_kernels", "ghost replay", "a raise is no output"),
    # An eighth: the judge's process told from a user's (how it builds, the mode it calls in, the flags
    # a checked call leaves behind), and an input written then swapped for a copy
    (8, "relu", "bad_built_knowing_the_judge_by_grad_mode", "correct: set 0", "outside"),
    (8, "relu", "bad_lazy_with_gradients_on", "correct: set 1", "gradients on"),
    (8, "relu", "bad_knows_the_judge_by_its_flags", "timed runs correct", "outside"),
    (5, "relu", "bad_input_written_then_swapped_by_set", "inputs unchanged", "modified"),
    # A ninth: the global seed that changed on every judged call, an input needing gradients, and
    # inputs written where a value comparison cannot see it (a sign of zero, the previous call's input)
    (8, "relu", "bad_knows_the_judge_by_the_seed_changing", "correct: set 0", "outside"),
    (8, "relu", "bad_wrong_when_inputs_need_gradients", "correct: set 3", "inputs made anew"),
    (5, "relu", "bad_flips_the_sign_of_input_zeros", "inputs unchanged", "modified"),
    (5, "relu", "bad_writes_the_previous_calls_input", "inputs unchanged", "previous call"),
    # past the static checks (run here without them): the poisoning turned off during a checked call
    (4, "relu", "bad_turns_the_poison_off", "correct: set 0", "poisoning"),
    # A tenth: honest only under the module name the judge gave every candidate
    (8, "softmax", "bad_honest_only_under_its_judged_name", "correct: set 0", "outside"),
]


SLOW_REJECTED = {"bad_weights_through_a_noop", "bad_stale_nan_in_a_storage", "bad_kernel_clears_a_torch_one",
                 "bad_two_views_not_restored", "bad_inference_scratch_breaks_ghost", "bad_folds_scale_each_call",
                 "bad_knows_the_secret_seed"}
"""Left to ``make test-all``: each has a sibling of its class in the default run (the ghost replay's
blank and keep calls, its own fault, the secret seed), and tests/test_ghost_mode.py covers the replay's
rules in a fraction of a second."""


@pytest.mark.parametrize(("review_class", "task", "name", "check", "words"),
                         [pytest.param(*r, id=f"{r[0]}-{r[2]}", marks=pytest.mark.slow if r[2] in SLOW_REJECTED else ())
                          for r in RUNTIME_REJECTED])
def test_the_review_classes_are_rejected_at_run_time(evaluator, review_class: int, task: str, name: str, check: str,
                                                     words: str) -> None:
    verdict = evaluator.run_in_sandbox(load_task(task, "small"), candidate(name), [])
    failed = [c for c in verdict.checks if not c.passed]
    # "a|b": either (fp16 rounding is outside the tolerance on some input sets, and always too imprecise)
    assert not verdict.correct and failed[0].name.startswith(tuple(check.split("|"))), [(c.name, c.detail)
                                                                                        for c in failed]
    assert any(w in verdict.reason for w in words.split("|")), verdict.reason


def test_a_doubt_on_the_judges_clock_is_timed_again_and_only_the_second_round_kept(evaluator) -> None:
    """A candidate that forges its first round of timed calls only: the judge's clock doubts it, times
    a second round, keeps that one alone, and says so; the forged 0.000123 ms is nowhere in the verdict."""
    verdict = evaluator.run_in_sandbox(load_task("relu", "small"), candidate("bad_forges_only_first_round"), [])
    assert verdict.correct, verdict.reason
    clock = next(c for c in verdict.checks if c.name == "times agree with the judge's clock")
    assert "the only one kept" in clock.detail and "more wall time" in clock.detail, clock.detail
    # the second round's honest time: a launch takes microseconds on a GPU, far more than the forged figure
    assert verdict.runtime_ms is not None and verdict.runtime_ms > 0.001, verdict.runtime_ms


# Torch's work hidden from the in-process recorder: only a trace taken outside the candidate's
# Python can tell, so on the CPU the verdict says it is not forensic; on a GPU it is rejected.
ONLY_A_GPU_TELLS = [(3, "softmax", "bad_blind_recorder"), (6, "softmax", "bad_detects_recording")]


@pytest.mark.parametrize(("review_class", "task", "name"), ONLY_A_GPU_TELLS, ids=[r[2] for r in ONLY_A_GPU_TELLS])
def test_hidden_torch_work_is_rejected_by_the_gpu_and_not_vouched_for_on_the_cpu(evaluator, review_class: int,
                                                                                  task: str, name: str) -> None:
    verdict = evaluator.run_in_sandbox(load_task(task, "small"), candidate(name), [])
    if ON_GPU:
        assert not verdict.correct and verdict.reason.startswith("forensic kernel trace"), verdict.reason
    else:
        assert verdict.assurance.startswith("interpreter: not forensic")


def test_host_work_through_raw_pointers_is_not_vouched_for(evaluator) -> None:
    """numpy on data_ptr() views runs no aten op and no kernel: no in-process recorder sees it. On
    the CPU the verdict says it is not forensic; on a GPU the pointers are device memory and the
    same trick cannot compute the answer on the host without copies the judge times."""
    verdict = evaluator.run_in_sandbox(load_task("relu", "small"), candidate("bad_numpy_host"), [])
    if ON_GPU:
        assert not verdict.correct
    else:  # accepted, and only vouched for as far as an interpreter run goes: the gap is documented
        assert verdict.correct and verdict.assurance.startswith("interpreter: not forensic")
        assert "aten" not in str(verdict.checks)


def test_a_content_keyed_cache_never_hits(evaluator) -> None:
    """Class 9: every timed call gets values no earlier call saw, so a memo keyed on a few values misses.
    The untimed calls repeat the values of the call just before (warm-up, and on a GPU the warm call
    before each timed one): a hit there gains nothing, and the candidate prints it apart."""
    verdict = evaluator.run_in_sandbox(load_task("relu", "small"), candidate("bad_content_cache"), [])
    assert verdict.correct, verdict.reason  # it computes every time: that is all a cache can do here
    assert "MEMO HITS" not in Path(verdict.log).read_text()


def test_self_reported_speed_is_ignored(evaluator) -> None:
    """Loophole 15: a candidate's own claims on stdout never become figures."""
    verdict, code = evaluator.evaluate(load_task("relu", "small"), candidate("ok_but_boasts"))
    assert code == 0
    if not ON_GPU:
        assert verdict.speedup is None and verdict.timing == "cpu-interpreter"
    else:
        assert verdict.speedup is not None and verdict.speedup < 100


def test_escape_attempts_fail_in_the_sandbox(evaluator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loophole 14 and class 12: secrets, the parent's environment, the host's /proc, network, sockets
    and files stay out of reach, and the candidate runs unprivileged."""
    require_bwrap()
    monkeypatch.setenv("KERNELEVO_TEST_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    host_socket = Path("/var/tmp") / f"kernelevo-test-{os.getpid()}.sock"
    host_socket.unlink(missing_ok=True)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(host_socket))
    unix.listen()
    os.chmod(host_socket, 0o777)
    home = Path(os.path.expanduser("~"))
    secret = home / ".kernelevo-test-secret"
    secret.write_text("top secret")
    markers = [home / "escape-marker", Path("/tmp/kernelevo-escape-marker"), Path("/var/tmp/kernelevo-escape-marker"),
               Path("/usr/kernelevo-escape-marker")]
    for marker in markers:
        marker.unlink(missing_ok=True)
    source = candidate("bad_escape").read_text()
    source = source.replace("PORT = 0", f"PORT = {listener.getsockname()[1]}")
    source = source.replace('SECRET_FILE = ""', f'SECRET_FILE = "{secret}"')
    source = source.replace('HOST_SOCKET = ""', f'HOST_SOCKET = "{host_socket}"')
    path = tmp_path / "escape.py"
    path.write_text(source)
    try:
        verdict = evaluator.run_in_sandbox(load_task("relu", "small"), path, [])
    finally:
        listener.close()
        unix.close()
        host_socket.unlink(missing_ok=True)
        secret.unlink()
    probes = re.search(r"ESCAPE-PROBES (\{.*\})", Path(verdict.log).read_text())
    assert verdict.correct, (verdict.reason, probes and probes.group(1))  # any successful probe poisons the output
    assert not any(marker.exists() for marker in markers)
    assert verdict.isolation["capabilities"] == "0000000000000000"
    if os.geteuid() == 0:
        assert verdict.isolation["uid"] == 65534


def test_hang_is_killed_at_the_timeout(make_evaluator) -> None:
    ev = make_evaluator(timeout_s=8)
    verdict, code = ev.evaluate(load_task("relu", "small"), candidate("bad_hang"))
    assert code == 1
    assert "timed out after 8 s" in verdict.reason and "process group was killed" in verdict.reason


def test_crash_becomes_a_verdict(evaluator) -> None:
    verdict, code = evaluator.evaluate(load_task("relu", "small"), candidate("bad_segfault"))
    assert code == 1 and not verdict.correct and not verdict.wrong_output
    if not ON_GPU:  # on a GPU the wild access is an illegal-address error instead of a signal
        assert "SIGSEGV" in verdict.reason


@pytest.mark.skipif(ON_GPU, reason="the memory limit is on host memory; on a GPU the hog allocates device memory")
def test_memory_hog_is_killed_and_reported(make_evaluator) -> None:
    ev = make_evaluator(memory="2g", timeout_s=120)
    verdict, code = ev.evaluate(load_task("relu", "small"), candidate("bad_memory_hog"))
    assert code == 1
    assert "ran out of memory" in verdict.reason and "2g" in verdict.reason


def test_a_file_flood_is_killed_at_the_limit_and_rejected(make_evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_watch, "FILES_LIMIT", 5000)
    ev = make_evaluator(timeout_s=120)
    verdict = ev.run_in_sandbox(load_task("relu", "small"), candidate("bad_file_flood"), [])
    assert not verdict.correct
    assert "created more than 5,000 files" in verdict.reason, verdict.reason


def test_source_nested_too_deeply_to_parse_is_the_candidates_failure(evaluator, tmp_path: Path) -> None:
    """An expression of thousands of terms exhausts the parser's recursion: the candidate fails its
    syntax check (exit 1), never the judge (exit 5), and the search's own readers of its code cope."""
    from kernelevo.agent.behaviour import structure_family

    deep = candidate("ok_relu_empty").read_text() + "\nDEPTH = 0" + " + 1" * 5000 + "\n"
    path = tmp_path / "deep.py"
    path.write_text(deep)
    verdict, code = evaluator.evaluate(load_task("relu", "small"), path)
    assert code == 1 and not verdict.correct and "nested too deeply" in verdict.reason, verdict.reason
    # unreadable where this Python's parser gives up (3.11); 3.12's reads the chain and sees the kernel
    assert structure_family(deep) in ("unreadable", structure_family(candidate("ok_relu_empty").read_text()))


def test_cuda_sources_that_defeat_patterns_are_read_in_linear_time() -> None:
    """A kernel-name pattern that searched from every ``__global__`` for its parenthesis took minutes on
    a source of ``"__global__ " * 8000``; names are now found in one pass, and a source past 1 MB fails
    unread."""
    import time

    from kernelevo.sandbox.judge.kernel_names import Owned, cuda_kernel_names
    from kernelevo.sandbox.judge.static_checks import MAX_SOURCE_CHARS, check_candidate

    began = time.monotonic()
    for hostile in ("__global__ " * 50_000, "__launch_bounds__(" * 50_000, "/*" * 50_000):
        Owned.of([], [hostile])
    assert time.monotonic() - began < 5
    assert cuda_kernel_names("template <int B> __global__ void __launch_bounds__(256, 2) k1(float* x) {}\n"
                             "__global__ __launch_bounds__(64) void\n  k2\n(int n) {}") == {"k1", "k2"}
    big = check_candidate("x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1))
    assert not big.passed and "at most" in big.checks[0].detail


CANCELLING_SUM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


def get_inputs():
    big = torch.randn(4, 2048) * 1000
    return [torch.cat([big, -big + torch.randn(4, 2048)], dim=-1)]


def get_init_inputs():
    return []
'''


def test_eager_own_error_is_allowed_but_a_precision_downgrade_is_not(evaluator, tmp_path: Path) -> None:
    """Row sums whose terms cancel: eager's fp32 result is itself ~1e-2 from float64, far beyond
    1e-4 of the small result. An honest kernel that sums in another order must pass (it fails with
    the plain tolerance); the same kernel reading its inputs as bf16 must still fail."""
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.agent.builtin.templates import render

    (tmp_path / "cancel.py").write_text(CANCELLING_SUM)
    task = load_task(str(tmp_path / "cancel.py"), "full")
    honest = render(recognise(task), "registers", {"BLOCK_R": 1, "num_warps": 4}, "test")
    downgraded = re.sub(r"(other=0\.0[^)]*\))\.to\(tl\.float32\)", r"\1.to(tl.bfloat16).to(tl.float32)", honest)
    assert downgraded != honest
    for name, source, accepted in (("honest", honest, True), ("bf16", downgraded, False)):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        verdict, code = evaluator.evaluate(task, path)
        assert (code == 0) is accepted, verdict.reason
        if not accepted:
            assert "the output's own rounding scale" in verdict.reason


def _as_root_in(tier: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelevo.sandbox.isolation import namespaces

    if os.geteuid() != 0:
        pytest.skip("users can be kept apart only when kernelevo runs as root")
    if tier == "bwrap":
        require_bwrap()
    elif not namespaces.unshare_works():
        pytest.skip("unshare is not available here")
    elif namespaces.closed_ancestor(ROOT) is not None:  # the judge refuses such a checkout in one line
        pytest.skip(f"without bubblewrap uid {namespaces.SANDBOX_UID} must read the checkout; "
                    f"{namespaces.closed_ancestor(ROOT)} is closed to it")
    monkeypatch.setenv("KERNELEVO_ISOLATION", tier)


@pytest.mark.parametrize("tier", ["unshare", "bwrap"])
def test_the_judges_own_files_are_out_of_a_candidates_reach(tier: str, cache_dir: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a file system of its own (the unshare tier) a candidate sees the host's files: the
    oracle's folder, its task file, its outbox, its compile cache and the folder of outboxes must still
    be closed to it (the judge's jobs keep the invoking user; candidates run as the sandbox's)."""
    import shutil
    import tempfile

    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    _as_root_in(tier, monkeypatch)
    workspace = Path(tempfile.mkdtemp(prefix="kernelevo-test-"))  # a folder the sandbox's user can enter
    try:
        with Evaluator(EvalConfig(workdir=workspace, cache_dir=cache_dir, measure_compile=False)) as evaluator:
            for neighbour in ("procs/" + "e" * 32, "kept/" + "f" * 32):  # folders of names it knows
                hand_over(evaluator.compile_cache / neighbour)
            verdict = evaluator.run_in_sandbox(load_task("relu", "small"), candidate("bad_reaches_the_judge"), [])
            probes = re.search(r"JUDGE-PROBES (\{.*\})", Path(verdict.log).read_text())
            assert probes, (verdict.reason, Path(verdict.log).read_text()[-2000:])
            assert verdict.correct, (verdict.reason, probes.group(1))  # any successful probe poisons the output
            # not even found: the folder of jobs can be entered, not listed, and job names are not counted
            assert "'oracles found': 0" in probes.group(1), probes.group(1)
            planted = list(workspace.rglob("planted-by-candidate"))
            assert not planted and not list(workspace.rglob("task.py.gone")), planted
            assert not any(p.is_symlink() for p in workspace.rglob("process.log"))
            if tier == "unshare":  # the oracle's temporary files are out of the host's shared /tmp
                info = (workspace / "trusted-cache" / "tmp").stat()
                assert info.st_uid == 0 and info.st_mode & 0o777 == 0o700
                assert evaluator.env(trusted=True)["TMPDIR"] == str(workspace / "trusted-cache" / "tmp")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


@pytest.mark.parametrize("tier", ["unshare", "bwrap"])
def test_a_sources_second_process_finds_and_writes_what_its_first_compiled(tier: str, cache_dir: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge carries a source's compile cache from one of its processes to the next (a forensic
    pass need not compile again). The next process was started with a folder of its own, mounted or
    allowed as it started: what was kept must arrive inside that very folder, still writable, and a
    folder tree deeper than Python's recursion limit must not break the judge (nor its clean-up)."""
    import tempfile

    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    _as_root_in(tier, monkeypatch)
    workspace = Path(tempfile.mkdtemp(prefix="kernelevo-test-"))
    honest = candidate("probe_keeps_a_deep_cache")
    evaluator = Evaluator(EvalConfig(workdir=workspace, cache_dir=cache_dir, measure_compile=False))
    try:
        # on a GPU the first evaluation's forensic pass imports the source in a process of its own too
        carried = 2 if ON_GPU else 1
        for expected, afresh in ((0, False), (carried, False), (0, True)):  # a final re-judge compiles afresh
            verdict = evaluator.run_in_sandbox(load_task("relu", "small"), honest, [], compile_afresh=afresh)
            assert verdict.correct, verdict.reason
            assert f"CACHE-RUNS-SEEN {expected}" in Path(verdict.log).read_text()
        kept = list((evaluator.compile_cache / "kept").iterdir())
        assert len(kept) == 1  # the afresh evaluation's is dropped: no later process has its name
    finally:
        evaluator.close()
        from kernelevo.sandbox.isolation.namespaces import remove_tree

        remove_tree(workspace)
    assert not workspace.exists()


@pytest.mark.parametrize("tier", ["unshare", pytest.param("bwrap", marks=pytest.mark.slow)])
def test_a_candidate_cannot_plant_files_in_the_next_candidates_outbox(tier: str, cache_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs of one user on the host's file system (the unshare tier): the spare process's outbox exists
    while a candidate runs, and a folder planted under the name of the next candidate's first output
    would fail that honest candidate. The folder of outboxes cannot be listed and outboxes are named at
    random: nothing is found to plant in."""
    import shutil
    import tempfile

    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    _as_root_in(tier, monkeypatch)
    workspace = Path(tempfile.mkdtemp(prefix="kernelevo-test-"))
    workspace.chmod(0o755)
    try:
        with Evaluator(EvalConfig(workdir=workspace, cache_dir=cache_dir, measure_compile=False)) as evaluator:
            task = load_task("relu", "small")
            planter = evaluator.run_in_sandbox(task, candidate("bad_plants_in_the_next_outbox"), [])
            log = Path(planter.log).read_text()
            assert "PLANTED []" in log, log[-1500:]
            honest = evaluator.run_in_sandbox(task, candidate("ok_relu_empty"), [])
            assert honest.correct, honest.reason
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def test_a_workspace_the_sandbox_user_cannot_enter_is_refused_in_one_line(cache_dir: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bubblewrap, a workspace under a closed folder (a root home, pytest's own temporary
    folders) would make every candidate fail to import its task: it is refused before any job runs."""
    import shutil
    import tempfile

    from kernelevo.sandbox.judge.evaluate import EvalConfig, EvalError, Evaluator

    _as_root_in("unshare", monkeypatch)
    closed = Path(tempfile.mkdtemp(prefix="kernelevo-test-"))  # mode 700, in an open /tmp
    try:
        with pytest.raises(EvalError) as caught:
            Evaluator(EvalConfig(workdir=closed / "ws", cache_dir=cache_dir, measure_compile=False))
    finally:
        shutil.rmtree(closed, ignore_errors=True)
    assert caught.value.exit_code == 3
    assert f"cannot enter {closed} (mode 700)" in str(caught.value) and "bubblewrap" in str(caught.value)


CONSTANT_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Clamped into [0.5, 1] after a minimum with 0.5: every output is 0.5, whatever the input."""

    def forward(self, x):
        return torch.clamp(torch.min(x, torch.tensor(0.5, device=x.device)), min=0.5, max=1.0)


def get_inputs():
    return [torch.randn(8, 300)]


def get_init_inputs():
    return []
'''

CONSTANT_CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bounded_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.minimum(tl.maximum(tl.minimum(x, 0.5), 0.5), 1.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        bounded_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


ZERO_ON_PLAIN_SETS = CONSTANT_TASK.replace(
    "return torch.clamp(torch.min(x, torch.tensor(0.5, device=x.device)), min=0.5, max=1.0)",
    "return torch.relu(x - 20.0)")
NEAR_ZERO = CONSTANT_TASK.replace(
    "return torch.clamp(torch.min(x, torch.tensor(0.5, device=x.device)), min=0.5, max=1.0)",
    "return (x - x.mean(dim=1, keepdim=True)).sum(dim=1)")  # rounding noise about 0
SHIFTED = CONSTANT_CANDIDATE.replace("tl.minimum(tl.maximum(tl.minimum(x, 0.5), 0.5), 1.0)",
                                     "tl.maximum(x - 20.0, 0.0)")
CENTRED_SUM = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def centred_sum_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    centred = tl.where(mask, x - tl.sum(x, axis=0) / cols, 0.0)
    tl.store(y_ptr + row, tl.sum(centred, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        centred_sum_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
'''


# A partial task whose output barely depends on its inputs: the signal vanishes into a constant, as in
# a deep stack of small layers (KernelBench's deep narrow MLP); the kernel's part is the vanishing one.
VANISHING = CONSTANT_TASK.replace(
    "return torch.clamp(torch.min(x, torch.tensor(0.5, device=x.device)), min=0.5, max=1.0)",
    "return torch.relu(x) * 1e-6 + 1.0").replace("\n\nclass Model", "\n\nALLOW_PARTIAL = True\n\n\nclass Model")
SMALL_RELU_THEN_TORCH = CONSTANT_CANDIDATE.replace(
    "tl.minimum(tl.maximum(tl.minimum(x, 0.5), 0.5), 1.0)", "tl.maximum(x, 0.0) * 1e-6").replace(
    "        return y\n", "        return y + 1.0\n")


@pytest.mark.parametrize(("task", "honest", "words"),
                         [(ZERO_ON_PLAIN_SETS, SHIFTED, "not applicable"),
                          pytest.param(NEAR_ZERO, CENTRED_SUM, "not applicable", marks=pytest.mark.slow),
                          (VANISHING, SMALL_RELU_THEN_TORCH, "another input set")],
                         ids=["zero-on-the-ghosts-kind-of-input", "zeros-within-tolerance", "barely-depends-on-inputs"])
def test_ghost_replay_does_not_reject_a_kernel_when_no_output_can_tell(evaluator, tmp_path: Path, task: str,
                                                                        honest: str, words: str) -> None:
    """Where buffers left zeroed give an output within tolerance of the reference (an answer of zeros
    on the inputs the ghost call draws, or one that is rounding noise about 0), or where the reference's
    own output on another input set passes for this one's (it barely depends on its inputs: a network
    whose signal vanishes was rejected end to end for it), ghost replay cannot tell a kernel's work
    from none and says so. The poison link, on a task whose output does depend on its inputs, is still
    rejected (RUNTIME_REJECTED)."""
    task_path, candidate_path = tmp_path / "task.py", tmp_path / "candidate.py"
    task_path.write_text(task)
    candidate_path.write_text(honest)
    verdict = evaluator.run_in_sandbox(load_task(str(task_path), "small"), candidate_path, [])
    assert verdict.correct, verdict.reason
    assert words in next(c for c in verdict.checks if c.name == "ghost replay").detail


def test_a_reference_that_ignores_its_inputs_does_not_fail_every_candidate(evaluator, tmp_path: Path) -> None:
    """KernelBench has such references (a minimum, then a clamp from the same bound). No output can
    tell a kernel's work from none, so ghost replay says it does not apply rather than rejecting an
    honest kernel; a kernel that returns the wrong constant is still wrong."""
    task_path, candidate_path = tmp_path / "constant.py", tmp_path / "candidate.py"
    task_path.write_text(CONSTANT_TASK)
    candidate_path.write_text(CONSTANT_CANDIDATE)
    verdict = evaluator.run_in_sandbox(load_task(str(task_path), "small"), candidate_path, [])
    assert verdict.correct, verdict.reason
    ghost = next(c for c in verdict.checks if c.name == "ghost replay")
    assert "not applicable" in ghost.detail
    candidate_path.write_text(CONSTANT_CANDIDATE.replace("1.0), mask=mask)", "1.0) + 0.25, mask=mask)"))
    assert not evaluator.run_in_sandbox(load_task(str(task_path), "small"), candidate_path, []).correct


def test_text_no_encoder_takes_is_read_as_text_and_the_candidate_rejected(evaluator) -> None:
    """A lone surrogate in what the candidate's process says reaches the verdict as U+FFFD: the verdict
    is the candidate's failure and is written as JSON, as a store and ``--json`` write it."""
    verdict, code = evaluator.evaluate(load_task("relu", "small"), candidate("bad_unencodable_error"))
    assert not verdict.correct and code == 1
    assert "unencodable \ufffd message" in verdict.reason, verdict.reason
    assert not verdict.wrong_output  # it raised: no output was compared
    verdict.model_dump_json().encode("utf-8")


def test_a_set_where_eager_overflows_is_compared_where_it_does_not(evaluator) -> None:
    """The large-values set of an exp: eager's output holds infinities there. The set is not skipped: a
    kernel that clamps its input is wrong on the rest of it, and one that overflows as eager does is
    right, its infinities matched."""
    task = load_task(str(ROOT / "tests" / "fixtures" / "tasks" / "exp_gate.py"), "small")
    verdict, code = evaluator.evaluate(task, candidate("bad_exact_only_below_overflow"))
    assert code == 1 and not verdict.correct
    assert "large values" in verdict.reason and "outside" in verdict.reason, verdict.reason
    verdict, code = evaluator.evaluate(task, candidate("ok_exp_gate_overflows_as_eager"))
    assert code == 0 and verdict.correct, verdict.reason
    large = next(c for c in verdict.checks if c.name.startswith("correct: set 3"))
    assert "of the reference's values are infinite or NaN" in large.detail


@pytest.mark.parametrize(("task", "name"), [("fp16_scaled_matmul", "ok_fp16_matmul_scaled_once"),
                                            ("softplus_by_hand", "ok_softplus_stabler_than_eager"),
                                            ("fp16_complex_matmul", "ok_fp16_complex_matmul_rounded_once"),
                                            ("attention_probs_by_hand", "ok_attention_probs_stable"),
                                            ("softmax_rand_by_hand", "ok_softmax_rand_stable"),
                                            pytest.param("softmax_rand_by_hand", "ok_softmax_rand_as_naive_as_eager",
                                                         marks=pytest.mark.slow),  # test_compare has its rule
                                            ("fp16_rmsnorm_naive", "ok_fp16_rmsnorm_fp32_statistics")])
def test_a_kernel_finite_where_eager_overflows_on_the_way_is_accepted(evaluator, task: str, name: str) -> None:
    """Eager's fp16 product passes 65504 before its scale, or its exp overflows before its log: float64's
    answer is a number there, and a kernel that keeps it is more exact than eager, not wrong. Eager's
    NaN from inf - inf where the answer rounds to an infinity: that infinity is right. A naive softmax
    of scores past exp's range even in float64: no reference says what the answer is there."""
    verdict, code = evaluator.evaluate(load_task(str(ROOT / "tests" / "fixtures" / "tasks" / f"{task}.py"), "small"),
                                       candidate(name))
    assert code == 0 and verdict.correct, verdict.reason


def test_one_set_where_eager_is_far_off_does_not_carry_the_precision_rule(evaluator) -> None:
    """fp16 RMSNorm with its statistics in fp16: on the large-values set eager's output is zeros where
    float64's is about 1. Those values are astray (left out of the sums), and each set's output is held to
    the precision rule on its own too: either way a five-bit kernel is too imprecise."""
    task = load_task(str(ROOT / "tests" / "fixtures" / "tasks" / "fp16_rmsnorm_naive.py"), "small")
    verdict, code = evaluator.evaluate(task, candidate("bad_fp16_rmsnorm_five_bits"))
    assert code == 1 and not verdict.correct
    precision = next(c for c in verdict.checks if c.name == "precision")
    assert not precision.passed and "lower precision" in precision.detail, precision.detail

