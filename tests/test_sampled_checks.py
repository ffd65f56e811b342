"""Large timed outputs are checked by leaves drawn after the call and tied to its digest
(``sandbox/judge/sampled.py``): the proof opens only for the bytes the call committed to, the leaves'
values are compared at their own places with the whole output's tolerance, and candidates that skip
work in timed calls are still rejected when every timed check is a sample."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from conftest import ON_GPU, _timing, candidate
from kernelevo.sandbox import tensor_files
from kernelevo.sandbox.child import digest
from kernelevo.sandbox.judge import sampled
from kernelevo.tasks import load_task


def _proof(value: torch.Tensor, leaves: list[int]) -> bytes:
    return digest.leaf_proof(value, leaves).numpy().tobytes()


@pytest.mark.parametrize("size", [1, 4096, 4096 * 128 + 17, 4096 * 128 * 129 + 5])
def test_a_leaf_proof_opens_to_the_digest_and_the_leaves(size: int) -> None:
    data = torch.randint(0, 256, (size,), dtype=torch.uint8, generator=torch.Generator().manual_seed(size))
    leaves = digest.leaves_within(sampled.draw_leaves(random.Random(size), [size], 5)[0], size)
    assert len(leaves) == min(5, digest.leaf_count(size))  # a dense output: as many as asked, of its own
    opened = digest.open_leaf_proof(_proof(data, leaves), 9, 0, size, data.dtype, data.shape, leaves)
    assert not isinstance(opened, str), opened
    root, pieces = opened
    assert root == digest.tensor_digest(data, 9, 0)
    assert pieces == [data[k * 4096:(k + 1) * 4096].numpy().tobytes() for k in leaves]


def test_a_leaf_proof_does_not_open_for_other_bytes() -> None:
    data = torch.randint(0, 256, (4096 * 300,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    leaves = [3, 150, 299]
    proof = _proof(data, leaves)
    for where in (0, 200, len(proof) - 1):  # the second level, a first-level leaf, a leaf's bytes
        changed = bytearray(proof)
        changed[where] ^= 1
        opened = digest.open_leaf_proof(bytes(changed), 9, 0, data.numel(), data.dtype, data.shape, leaves)
        # an inconsistent proof says so; one changed only in the second level opens to another digest
        assert isinstance(opened, str) or opened[0] != digest.tensor_digest(data, 9, 0)
    other = _proof(data, [4, 150, 299])  # the leaves of another draw
    assert isinstance(digest.open_leaf_proof(other, 9, 0, data.numel(), data.dtype, data.shape, leaves), str)
    assert isinstance(digest.open_leaf_proof(proof[:-1], 9, 0, data.numel(), data.dtype, data.shape, leaves), str)


def _compare(tmp_path: Path, got: torch.Tensor, want: torch.Tensor, leaves: list[int],
             tie_order: torch.Tensor | None = None) -> dict:
    size = tensor_files.file_elements(got.shape, got.stride()) * got.element_size()  # as the worker ships
    meta = tensor_files.write_tensor(digest.leaf_proof(got, digest.leaves_within(leaves, size)), tmp_path,
                                     "out.proof").model_dump()
    meta.update(dtype=str(got.dtype).removeprefix("torch."), shape=list(got.shape), strides=list(got.stride()),
                type_name="Tensor")
    message = {"leaves": [leaves], "folder": str(tmp_path), "digest_seed": 5, "atol": 1e-5, "rtol": 1e-5,
               "tie_order": None if tie_order is None else [tie_order]}
    exact = [want.double()] if want.is_floating_point() else None
    return sampled.compare_leaves(message, [tensor_files.TensorFile.model_validate(meta)], [want], exact, [0.0])


def test_sampled_leaves_are_compared_at_their_own_places(tmp_path: Path) -> None:
    want = torch.randn(64, 3000)  # 768000 bytes: 188 leaves of 1024 values
    got = want.clone()
    got[40, 2001] += 1.0  # flat index 122001: leaf 119
    found = _compare(tmp_path, got, want, [0, 119, 187])
    assert found["problem"] and "1 of" in found["problem"] and "sampled values" in found["problem"], found
    assert "worst at (40, 2001)" in found["problem"]
    assert found["digests"] == [digest.tensor_digest(got, 5, 0)]
    clean = _compare(tmp_path, got, want, [0, 118, 187])  # a draw that misses the wrong leaf
    assert clean["problem"] is None
    assert clean["stats"][0]["err_candidate"] == 0.0 and clean["stats"][0]["magnitude"] > 0


def test_sampled_indices_in_the_stable_order_among_ties_pass(tmp_path: Path) -> None:
    """An integer output whose order among ties torch leaves open (a topk's indices): leaves equal to
    the stable-order run's pass as the whole output would; leaves equal to neither do not."""
    eager = torch.arange(300000, dtype=torch.int64).flip(0).reshape(600, 500)  # 1.2 MB: 293 leaves
    stable = eager.clone()
    stable[:, [0, 1]] = stable[:, [1, 0]]  # another order among tied values in every row
    assert _compare(tmp_path, stable, eager, [0, 100, 292], tie_order=stable)["problem"] is None
    assert _compare(tmp_path, eager, eager, [0, 100, 292], tie_order=stable)["problem"] is None
    wrong = eager.clone()
    wrong[120, 1] = 7  # flat 60001: leaf 117; in eager's order elsewhere, so only this value differs
    found = _compare(tmp_path, wrong, eager, [0, 117, 292], tie_order=stable)
    assert found["problem"] and found["problem"].startswith("1 of 1536 sampled values differ"), found


def test_a_sample_of_another_shape_is_refused_before_reading(tmp_path: Path) -> None:
    want = torch.randn(64, 3000)
    found = _compare(tmp_path, want.reshape(3000, 64), want, [1])
    assert "output shape (3000, 64) != reference (64, 3000)" in found["problem"]


@pytest.mark.parametrize(("shape", "dims"), [((300, 1000), (1, 0)), ((7, 40, 900), (2, 0, 1)),
                                            ((5, 1, 30, 800), (3, 1, 0, 2))])
def test_a_permuted_output_is_hashed_where_it_lies(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    """A kernel that writes a buffer and returns it with its dimensions permuted (``buffer.T``) is
    hashed in storage order, without a copy in the timed call; the oracle, given the order the strides
    of the output's file name, finds the same digest from a copy of any layout; the layout is part of
    what the digest binds."""
    buffer = torch.randn(shape)
    out = buffer.permute(dims)
    assert digest.storage_order(out.shape, out.stride()) is not None
    assert digest.output_bytes(out, list(out.stride())).data_ptr() == buffer.data_ptr()  # no copy
    shipped = out.contiguous()
    assert digest.tensor_digest(out, 3, 0) == digest.tensor_digest(shipped, 3, 0, list(out.stride()))
    assert digest.tensor_digest(out, 3, 0) != digest.tensor_digest(shipped, 3, 0)  # row-major: another layout
    assert digest.storage_order(shipped.shape, shipped.stride()) is None


def test_layouts_that_overlap_or_are_sparse_are_hashed_row_major() -> None:
    base = torch.randn(64, 512)
    for out in (base[:, ::2], base[:1].expand(64, 512), base.T[:400]):  # wide gaps, overlap, a sparse transposed slice
        assert digest.storage_order(out.shape, out.stride()) is None
        assert tensor_files.spanned(out.shape, out.stride()) is None
        assert digest.tensor_digest(out, 3, 0) == digest.tensor_digest(out.contiguous(), 3, 0)
    assert digest.storage_order([4, 4], [1]) is None and digest.storage_order([2, 3], [1, 10**30]) is None


@pytest.mark.parametrize("make", [lambda: torch.randn(1, 2)[:, 0], lambda: torch.randn(3, 2)[:1, 1],
                                  lambda: torch.randn(4, 3)[:1, :1]])
def test_an_output_of_one_value_at_any_stride_is_hashed_and_shipped(tmp_path: Path, make) -> None:
    """``stats[:, 0]`` of a one-row buffer: ``contiguous()`` leaves a single value's stride as it is, and a
    byte view needs a stride of one."""
    out = make()
    meta = tensor_files.write_tensor(out, tmp_path, "one.bin")
    back = tensor_files.read_tensor(meta, tmp_path, "cpu", 64)
    assert torch.equal(back, out) and digest.tensor_digest(out, 1, 0) == digest.tensor_digest(back, 1, 0)


@pytest.mark.parametrize("strides", [[3000, -(1 << 63)], [-1, 64], [1], [1 << 62, 1]])
def test_strides_no_tensor_can_have_are_the_candidates_problem(tmp_path: Path, strides: list[int]) -> None:
    """Strides come from the candidate's process, and the layout a file is read in and its digest
    recomputed in follow them: ones no tensor has are its fault, refused, not read as row-major."""
    want = torch.randn(64, 3000)
    meta = tensor_files.write_tensor(digest.leaf_proof(want, [0]), tmp_path, "out.proof").model_dump()
    meta.update(dtype="float32", shape=[64, 3000], strides=strides, type_name="Tensor")
    message = {"leaves": [[0]], "folder": str(tmp_path), "digest_seed": 5, "atol": 1e-5, "rtol": 1e-5}
    found = sampled.compare_leaves(message, [tensor_files.TensorFile.model_validate(meta)], [want], [want.double()],
                                   [0.0])
    assert "no layout a tensor" in found["problem"], found
    assert digest.storage_order([64, 3000], strides) is None


def test_sampled_leaves_of_a_transposed_output_are_compared_at_their_places(tmp_path: Path) -> None:
    want = torch.randn(64, 3000)
    got = want.T.contiguous().T  # the right values, stored column-major: leaf k holds columns 16k..16k+15
    assert digest.storage_order(got.shape, got.stride()) == (1, 0)
    got[40, 2001] += 1.0  # storage index 2001 * 64 + 40: leaf 125
    found = _compare(tmp_path, got, want, [0, 125, 187])
    assert found["problem"] and "worst at (40, 2001)" in found["problem"], found
    assert found["digests"] == [digest.tensor_digest(got, 5, 0)]
    assert _compare(tmp_path, got, want, [0, 119, 187])["problem"] is None  # the row-major leaf 119 is right here


def _every_check_sampled() -> object:
    return _timing().model_copy(update={"sample_from_bytes": 0, "sampled_leaves": 8, "whole_share": 0.0})


def test_a_share_of_large_checks_ships_whole_outputs() -> None:
    policy = _timing().model_copy(update={"sample_from_bytes": 1000, "sampled_leaves": 4, "whole_share": 0.25})
    rng = random.Random(3)
    draws = [sampled.draw_if_sampled(rng, [5000, 9000], policy) for _ in range(2000)]
    whole = sum(d is None for d in draws)
    assert 400 < whole < 600  # a quarter, drawn apart from the leaves
    assert all(d == [[0, 1], [0, 1, 2]] for d in draws if d is not None)  # a padded span has no more leaves
    assert sampled.draw_if_sampled(rng, [999], policy) is None  # below the size: always whole


@pytest.mark.parametrize("name", ["bad_skips_the_costly_leaf", "bad_cheats_before_the_owed_call"])
def test_work_skipped_in_few_leaves_meets_the_blocks_whole_check(make_evaluator, name: str) -> None:
    """Every timed check a sample of 8 leaves of 1025, which misses the one wrong leaf nearly always;
    one of the block's calls, drawn in secret, is checked whole and finds the row sums left undone,
    also for a candidate that counts its calls to be honest wherever a check after them would fall."""
    evaluator = make_evaluator(timing=_every_check_sampled())
    task = load_task(str(Path(__file__).parent / "fixtures" / "tasks" / "costly_tail.py"), "small")
    verdict = evaluator.run_in_sandbox(task, candidate(name), [])
    failed = [c for c in verdict.checks if not c.passed]
    # The counting candidate skips work in the CPU block's three calls. A GPU block has at least 25, so
    # there its three skipped calls do not move the median and the secret whole check meets one of
    # them with chance 3/25: there the forensic pass, whose calls are compared whole, may be first.
    stages = ("timed runs correct", "forensic pass") if ON_GPU and "owed" in name else ("timed runs correct",)
    assert not verdict.correct and failed[0].name.startswith(stages), [(c.name, c.detail) for c in failed]
    assert "values outside" in verdict.reason, verdict.reason


@pytest.mark.parametrize(("name", "words"), [
    ("bad_lazy_ship", "digest differs"),
    # a whole check may come first: the block's secret one, which may be its first call
    ("bad_half_work_when_unchecked", "values outside"),
    ("bad_fp16_when_unchecked", "lower precision|values outside"),
])
def test_timed_calls_that_skip_work_are_rejected_by_sampled_checks(make_evaluator, name: str, words: str) -> None:
    evaluator = make_evaluator(timing=_every_check_sampled())
    verdict = evaluator.run_in_sandbox(load_task("softmax", "small"), candidate(name), [])
    failed = [c for c in verdict.checks if not c.passed]
    assert not verdict.correct and failed[0].name.startswith("timed runs correct"), [(c.name, c.detail)
                                                                                     for c in failed]
    assert any(w in verdict.reason for w in words.split("|")), verdict.reason
    if not ON_GPU and name == "bad_half_work_when_unchecked" and "sampled" not in verdict.reason:
        # On the CPU every call is checked, so a working sample catches the first call; a whole check
        # may be first only where the block's secret one fell on its first call.
        assert verdict.reason.startswith("timed runs correct: timed run 0:"), verdict.reason  # runs count from 0


@pytest.mark.parametrize("name", ["ok_softmax_two_kernels", "ok_padded_rows"])
def test_an_honest_candidate_passes_sampled_checks(make_evaluator, name: str) -> None:
    """Its leaves open to its digest and hold the right values, a padded output's (hashed and shipped
    as the storage it spans) too."""
    evaluator = make_evaluator(timing=_every_check_sampled())
    verdict, code = evaluator.evaluate(load_task("softmax", "small"), candidate(name))
    assert verdict.correct and code == 0, verdict.reason
    timed = next(c for c in verdict.checks if c.name == "timed runs correct")
    assert timed.passed, timed.detail


def test_several_timed_calls_in_one_request_keep_every_check_and_the_clock(make_evaluator) -> None:
    """A request of three timed calls: each call's output is kept and shipped by its place in the
    request (on the CPU every call is checked, so an honest candidate passes only if each shipped output
    is its own call's, made from its own seed, sampled or whole), kept apart from what later calls
    write (one output buffer for every call); the request's total is held to the clock, and each call
    counts as the request's mean, so time moved between its calls gains nothing."""
    evaluator = make_evaluator(timing=_every_check_sampled().model_copy(update={"calls_per_request": 3}))
    relu, softmax = load_task("relu", "small"), load_task("softmax", "small")
    honest = evaluator.run_in_sandbox(relu, candidate("ok_relu_one_output_buffer"), [])
    assert honest.correct and (honest.clock or {}).get("calls_per_request") == 3, (honest.reason, honest.clock)
    lazy = evaluator.run_in_sandbox(softmax, candidate("bad_lazy_ship"), [])
    # it makes the first call's output from the last call's inputs when asked: wrong values, or wrong bits
    assert not lazy.correct and ("digest differs" in lazy.reason or "values outside" in lazy.reason), lazy.reason
    forged = evaluator.run_in_sandbox(relu, candidate("bad_forged_times"), [])
    assert not forged.correct and "more wall time" in forged.reason, forged.reason
    moved = evaluator.run_in_sandbox(relu, candidate("bad_moves_time_onto_one_call"), [])
    assert moved.runtime_ms is not None and moved.runtime_ms > 15.0, (moved.runtime_ms, moved.reason)


PADDED = [lambda b: b[:, :900], lambda b: b[1:, 3:1000], lambda b: b.T[2:900],
          lambda b: b.reshape(256, 2, 512)[:, :, :480], lambda b: b.reshape(8, 32, 1024)[:, :30, :1000],
          lambda b: b.reshape(8, 32, 1024)[:, :, :900].permute(2, 0, 1)]


@pytest.mark.parametrize("make", PADDED)
def test_a_padded_output_is_hashed_and_shipped_as_the_storage_it_spans(tmp_path: Path, make) -> None:
    """A kernel that writes a padded buffer and returns a slice of it (rows aligned, a wider buffer's
    columns): the digest hashes the storage the output spans, gaps included, with no copy in the timed
    call; its file holds that span and is read back at its strides; the oracle finds the same digest
    from it. The layout is part of what the digest binds."""
    out = make(torch.randn(256, 1024))
    span = tensor_files.spanned(out.shape, out.stride())
    assert span is not None and digest.storage_order(out.shape, out.stride()) is None
    assert digest.output_bytes(out, list(out.stride())).data_ptr() == out.data_ptr()  # no copy
    meta = tensor_files.write_tensor(out, tmp_path, "out.bin")
    assert (tmp_path / "out.bin").stat().st_size == span * 4
    back = tensor_files.read_tensor(meta, tmp_path, "cpu", out.numel() * 4)
    assert torch.equal(back, out) and back.stride() == out.stride()
    assert digest.tensor_digest(out, 3, 0) == digest.tensor_digest(back, 3, 0, meta.strides)
    assert digest.tensor_digest(out, 3, 0) != digest.tensor_digest(out.contiguous(), 3, 0)
    with pytest.raises(ValueError, match="over the limit"):
        tensor_files.read_tensor(meta, tmp_path, "cpu", out.numel() * 4 - 1)


def test_the_leaves_of_a_padded_output_map_to_their_places_and_skip_the_gaps() -> None:
    """Every value of a spanned layout's storage sits at the logical place its strides give, and the
    gaps between are dropped: over random padded layouts of two to four dims, in any order."""
    rng, spanned = random.Random(0), 0
    for _ in range(300):
        dims = rng.randint(2, 4)
        shape = [rng.randint(2, 40) for _ in range(dims)]
        padded = [d + rng.choice([0, 0, 1, 3]) for d in shape]
        order = list(range(dims))
        rng.shuffle(order)  # which dimension lies outermost in the buffer
        buffer = torch.arange(math.prod(padded) + 5, dtype=torch.float64)[5:].reshape([padded[d] for d in order])
        out = buffer[tuple(slice(0, shape[d]) for d in order)].permute([order.index(d) for d in range(dims)])
        if tensor_files.spanned(out.shape, out.stride()) is None:
            continue  # dense, or sparser than the span is carried
        spanned += 1
        raw = digest.output_bytes(out, list(out.stride())).view(torch.float64)
        leaves = list(range(digest.leaf_count(raw.numel() * 8)))
        flat, keep = sampled.positions(leaves, list(out.shape), 8, list(out.stride()))
        assert int(keep.sum()) == out.numel() and sorted(flat.tolist()) == list(range(out.numel()))
        assert torch.equal(out.reshape(-1)[flat], raw[keep])
    assert spanned > 30


def test_a_wrong_value_of_a_padded_output_is_found_at_its_place_by_sampled_leaves(tmp_path: Path) -> None:
    """Leaves are drawn over as many bytes as a padded layout may span: the oracle drops those past the
    output's own, and a wrong value in the span's last stretch is found where it is."""
    want = torch.randn(600, 1000)
    got = torch.empty(600, 1200)[:, :1000]  # rows padded to 1200 values
    got.copy_(want)
    got[590, 7] += 1.0  # storage 590 * 1200 + 7: leaf 691 of 703, past the dense output's 586 leaves
    size = tensor_files.file_elements(got.shape, got.stride()) * 4
    drawn = sampled.draw_leaves(random.Random(0), [want.numel() * 4], 1000)[0]  # every leaf a span may have
    assert digest.leaves_within(drawn, size) == list(range(digest.leaf_count(size))) == list(range(703))
    found = _compare(tmp_path, got, want, [0, 691, 720])
    assert found["problem"] and "worst at (590, 7)" in found["problem"], found
    assert found["digests"] == [digest.tensor_digest(got, 5, 0)]
    assert _compare(tmp_path, got, want, [0, 690])["problem"] is None
    few = sampled.draw_leaves(random.Random(1), [want.numel() * 4], 8)[0]
    assert len([k for k in few if k < 586]) == 8 and len([k for k in few if k >= 586]) == 3  # 8 * 147 / 586
