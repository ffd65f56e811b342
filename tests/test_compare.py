"""The oracle's comparison of raw outputs, the tensor files that carry them, and the precision rule
(pure logic, CPU)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelevo.sandbox import tensor_files
from kernelevo.sandbox.child.digest import DIGEST_LANES, HEADER, LEAF_BYTES
from kernelevo.sandbox.judge import compare
from kernelevo.sandbox.judge.compare import compare_output, largest_difference, layout_problem
from kernelevo.sandbox.judge.record import PrecisionSums
from kernelevo.sandbox.judge.rules import PRECISION_FACTOR, precision_problem


def test_within_tolerance_passes_and_outside_reports_the_worst_element() -> None:
    ref = torch.randn(10, 20)
    assert compare_output(ref + 5e-5, ref, None, 1e-4, 1e-4).problem is None
    bad = ref.clone()
    bad[3, 7] += 1.0
    problem = compare_output(bad, ref, None, 1e-4, 1e-4).problem
    assert problem and "1 of 200" in problem and "(3, 7)" in problem


def test_the_worst_element_is_found_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "CHUNK", 7)
    ref = torch.randn(5, 9)
    bad = ref.clone()
    bad[1, 2] += 0.5
    bad[4, 8] += 2.0
    problem = compare_output(bad, ref, None, 1e-4, 1e-4).problem
    assert "2 of 45" in problem and "(4, 8)" in problem


VIEWS = {"transposed": ((6, 10), (1, 0)), "permuted": ((3, 4, 5), (2, 0, 1)), "one long row": ((1, 50), (1, 0))}


@pytest.mark.parametrize("name", VIEWS)
def test_a_view_is_cut_in_row_major_pieces_without_a_whole_copy(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(compare, "CHUNK", 7)
    shape, order = VIEWS[name]
    view = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape).permute(order)
    pieces = list(compare._chunks(view, view.contiguous(), None))
    assert torch.equal(torch.cat([p[0] for p in pieces]), view.reshape(-1))
    assert all(p[0].numel() <= 7 and torch.equal(p[0], p[1]) and p[2] is None for p in pieces)


def test_non_finite_values_are_counted_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "CHUNK", 7)
    values = torch.zeros(5, 9)
    values[0, 6], values[0, 7], values[4, 8] = float("nan"), float("inf"), -float("inf")
    assert compare.count_not_finite(values) == 3
    assert compare.count_not_finite(values.T) == 3  # a view with gaps counts the same
    assert compare.count_not_finite(torch.arange(9)) == 0


def test_the_float64_reference_keeps_float64_where_the_model_casts_to_float32() -> None:
    """A model that casts to fp32 inside forward (``.float()``, ``dtype=``, a new tensor of the default
    dtype) is run in float64 throughout: followed, the casts would make the float64 run round as eager
    does, and eager's error against it would read 0."""
    from kernelevo.sandbox.judge.exact import ExactReference

    class Upcast(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            scale = torch.ones(1) + torch.zeros(1, dtype=torch.float32)
            return torch.matmul(a.float(), b.to(torch.float32)).softmax(-1, dtype=torch.float32) * scale

    a, b = torch.randn(8, 4096), torch.randn(4096, 8)
    eager = Upcast()(a, b)
    exact = ExactReference().compute(Upcast(), [a, b], 1, None).outputs
    assert exact is not None and exact[0].dtype == torch.float64
    truth = torch.matmul(a.double(), b.double()).softmax(-1)
    assert torch.equal(exact[0], truth) and not torch.equal(exact[0].float(), eager)
    assert torch.get_default_dtype() == torch.float32  # put back


def test_tied_values_in_index_order_are_offered_only_where_torch_leaves_their_order_open() -> None:
    from kernelevo.sandbox.judge.ties import stable_tie_outputs

    class Router(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.topk(x, 3).indices, torch.argsort(x, descending=True)

    class Argmax(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.argmax(-1)

    x = torch.tensor([[0.0, 2.0, 1.0, 2.0, 2.0, 0.0]] * 4)
    eager = [torch.tensor([[4, 3, 1]] * 4), torch.tensor([[4, 3, 1, 2, 5, 0]] * 4)]  # another order of the ties
    other, unspecified = stable_tie_outputs(Router(), [x], eager)
    assert unspecified and other is not None
    assert other[0].tolist() == [[1, 3, 4]] * 4 and other[1].tolist() == [[1, 3, 4, 2, 0, 5]] * 4
    assert stable_tie_outputs(Router(), [x], other) == (None, True)  # the same: nothing to offer
    assert stable_tie_outputs(Argmax(), [x], [Argmax()(x)]) == (None, False)  # first index: specified
    assert stable_tie_outputs(Router(), [x], [x.float()]) == (None, False)  # no integer output


def test_nan_and_inf_match_only_where_eager_has_them() -> None:
    """Where eager's value is a number, NaN or an infinity fails however wide the tolerance; where eager
    itself overflowed (the large-values set), the output must hold the same there, and the rest of the
    set is still compared."""
    ref = torch.zeros(4)
    problem = compare_output(torch.tensor([0.0, float("nan"), 0.0, 0.0]), ref, None, 1, 1).problem
    assert "1 NaN" in problem
    assert compare_output(torch.tensor([0.0, float("inf")]), torch.zeros(2), None, 1e9, 1e9).problem
    inf, nan = float("inf"), float("nan")
    eager = torch.tensor([inf, -inf, nan, 2.0, 3.0])
    assert compare_output(eager.clone(), eager, None, 1e-4, 1e-4).problem is None
    for wrong in ([inf, inf, nan, 2.0, 3.0], [inf, -inf, 7.0, 2.0, 3.0], [1e38, -inf, nan, 2.0, 3.0],
                  [inf, -inf, nan, 2.0, 3.5]):
        assert "1 of 5" in compare_output(torch.tensor(wrong), eager, None, 1e-4, 1e-4).problem, wrong
    stats = compare_output(torch.tensor([inf, -inf, nan, 2.0, 3.0001]), eager, None, 1e-4, 1e-4)
    assert stats.problem is None and 0 < stats.max_abs_error < 1e-3  # measured where eager is a number


def test_an_infinity_passes_only_where_the_answer_rounds_to_the_dtypes_edge() -> None:
    """fp16: eager's -65504 and a kernel's -inf (its fp32 sum, -65530, rounded once) pass, measured as
    -65504 in the precision sums; an infinity of the other sign, or where the tolerance stops short of
    the largest number (64800 * 1.01 + 0.01 < 65504, while 64896 * 1.01 reaches it), still fails."""
    want = torch.tensor([-65504.0, 1.0], dtype=torch.float16)
    exact = torch.tensor([-65530.0, 1.0], dtype=torch.float64)
    got = torch.tensor([-float("inf"), 1.0], dtype=torch.float16)
    stats = compare_output(got, want, exact, 1e-2, 1e-2)
    assert stats.problem is None and stats.err_candidate == stats.err_eager == 26.0
    assert compare_output(-got, want, exact, 1e-2, 1e-2).problem
    for edge, passes in ((64896.0, True), (64800.0, False)):
        near = torch.tensor([edge, 1.0], dtype=torch.float16)
        infinite = torch.tensor([float("inf"), 1.0], dtype=torch.float16)
        assert (compare_output(infinite, near, near.double(), 1e-2, 1e-2).problem is None) == passes, edge


def test_dtype_shape_and_type_must_match() -> None:
    ref = torch.ones(3)
    assert "dtype" in compare_output(ref.half(), ref, None, 1, 1).problem
    assert "shape" in compare_output(torch.ones(4), ref, None, 1, 1).problem

    class Sub(torch.Tensor):
        pass

    assert "plain torch.Tensor" in compare_output(ref.as_subclass(Sub), ref, None, 1, 1).problem


def test_integer_outputs_must_match_exactly() -> None:
    ref = torch.tensor([1, 2, 3])
    assert compare_output(ref.clone(), ref, None, 1, 1).problem is None
    assert "1 of 3 values differ" in compare_output(torch.tensor([1, 2, 4]), ref, None, 1, 1).problem


def test_eager_own_error_becomes_slack_and_the_error_sums_are_kept() -> None:
    exact = torch.linspace(-1, 1, 100, dtype=torch.float64)
    eager = (exact + 0.01).float()  # eager itself 1e-2 off: far beyond atol 1e-4
    stats = compare_output((exact - 0.01).float(), eager, exact, 1e-4, 1e-4)
    assert stats.eager_error == pytest.approx(0.01, rel=1e-3)
    assert stats.problem is None  # 0.02 from eager, within 1e-4 + SLACK_FACTOR * 0.01
    assert stats.err_candidate == pytest.approx(1.0, rel=1e-3) and stats.err_eager == pytest.approx(1.0, rel=1e-3)
    assert largest_difference(eager, None) == 0.0
    assert compare_output((exact - 0.2).float(), eager, exact, 1e-4, 1e-4, sensitivity=0.03).problem is None
    assert compare_output((exact + 0.1).float(), eager, exact, 1e-4, 1e-4).problem  # 0.09 > 1e-4 + 8 * 0.01


def test_strict_layout_compares_strides() -> None:
    want = torch.randn(3, 4)
    assert layout_problem([4, 1], want) is None
    assert "strides" in layout_problem([1, 3], want)
    moved = torch.randn(4, 1, 5).transpose(1, 2)  # (4, 5, 1), strides (5, 1, 5): row-major all the same
    assert layout_problem([5, 1, 1], moved) is None and "strides" in layout_problem([1, 4, 1], moved)
    assert "strides" in layout_problem([5, 1], moved)  # a count that is not the shape's


@pytest.mark.parametrize("slice_bytes", [7, 64 << 20])
def test_tensor_files_round_trip_every_dtype_and_views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        slice_bytes: int) -> None:
    monkeypatch.setattr(tensor_files, "SLICE_BYTES", slice_bytes)  # slices that split values, and one whole
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.float64):
        t = (torch.randn(6, 5) * 3).to(dtype)
        meta = tensor_files.write_tensor(t.T, tmp_path, f"{dtype}.bin")
        assert meta.strides == [1, 5] and meta.type_name == "Tensor"
        back = tensor_files.read_tensor(meta, tmp_path, "cpu", 1 << 20)
        assert back.dtype == dtype and torch.equal(back, t.T)
    empty = tensor_files.write_tensor(torch.empty(0, 3), tmp_path, "empty.bin")
    assert tensor_files.read_tensor(empty, tmp_path, "cpu", 10).shape == (0, 3)


@pytest.mark.parametrize("dims", [(1, 0, 2), (2, 0, 1), (0, 2, 1)])
def test_a_permuted_tensor_is_written_as_it_lies_and_read_back_so(tmp_path: Path, dims: tuple[int, ...]) -> None:
    """A permuted view of a dense buffer crosses as the buffer's bytes, with no copy made on the writer's
    device (on a GPU, a copy is a kernel a forensic trace would count as the candidate's work); the
    reader, from the strides alone, gives back the same values in the same layout. A layout with gaps
    is written as the storage it spans where that is at most a quarter larger than its values, else
    row-major."""
    buffer = torch.randn(4, 5, 6)
    view = buffer.permute(dims)
    meta = tensor_files.write_tensor(view, tmp_path, "view.bin")
    assert (tmp_path / "view.bin").read_bytes() == buffer.numpy().tobytes()
    back = tensor_files.read_tensor(meta, tmp_path, "cpu", 1 << 20)
    assert torch.equal(back, view) and back.stride() == view.stride()
    gaps = tensor_files.write_tensor(buffer[:, :4], tmp_path, "gaps.bin")  # a span of 114 for 96 values
    assert (tmp_path / "gaps.bin").read_bytes() == buffer.reshape(-1)[:114].numpy().tobytes()
    assert torch.equal(tensor_files.read_tensor(gaps, tmp_path, "cpu", 1 << 20), buffer[:, :4])
    # the oracle sends inputs so: what its memory held between the values stays its own
    hidden = tensor_files.write_tensor(buffer[:, :4], tmp_path, "hidden.bin", zero_gaps=True)
    span = torch.zeros(114)
    torch.as_strided(span, (4, 4, 6), (30, 6, 1)).copy_(buffer[:, :4])
    assert (tmp_path / "hidden.bin").read_bytes() == span.numpy().tobytes() and hidden.strides == [30, 6, 1]
    assert torch.equal(tensor_files.read_tensor(hidden, tmp_path, "cpu", 1 << 20), buffer[:, :4])
    sparse = tensor_files.write_tensor(buffer[:, ::2], tmp_path, "sparse.bin")
    assert (tmp_path / "sparse.bin").read_bytes() == buffer[:, ::2].contiguous().numpy().tobytes()
    assert torch.equal(tensor_files.read_tensor(sparse, tmp_path, "cpu", 1 << 20), buffer[:, ::2])


def test_a_layout_with_gaps_or_overlaps_is_gathered_from_the_storage_it_spans() -> None:
    """On a GPU such an output is made row-major on the host from a memory copy of its span (a copy
    kernel would count as the candidate's work in a forensic trace); the gather gives its values."""
    padded = torch.randn(6, 8)
    for view in (padded[:, :5], padded[1:, 2:7], padded[:1].expand(4, 8), padded.T[2:5], padded[2:3, 3:4].T,
                 padded[3, 4]):
        gathered = tensor_files.gathered_on_host(view, tensor_files.storage_span(view.shape, view.stride()))
        assert torch.equal(gathered, view) and gathered.is_contiguous(), view.stride()


def test_the_oracle_reads_a_transposed_output_and_recomputes_its_digest_in_the_order_it_lay(tmp_path: Path) -> None:
    """The oracle's side of a shipped timed output: the file read in the layout its strides give, compared
    with the reference, and the digest recomputed as the call hashed it; strides that lie about the
    layout read other values, which fail, and would bind another digest."""
    from kernelevo.sandbox.child import digest
    from kernelevo.sandbox.judge.oracle import Oracle

    want = torch.randn(48, 80)
    out = want.T.contiguous().T  # the right values, column-major
    meta = tensor_files.write_tensor(out, tmp_path, "out.bin").model_dump()
    oracle = Oracle()
    asks = {"folder": str(tmp_path), "digest_seed": 5, "atol": 1e-5, "rtol": 1e-5}
    oracle.expected["k"] = ([want], [want.double()], [0.0], False)
    found = oracle.compare({"key": "k", "outputs": [meta], **asks})
    assert found["problem"] is None and found["digests"] == [digest.tensor_digest(out, 5, 0)], found
    oracle.expected["k"] = ([want], [want.double()], [0.0], False)
    lied = oracle.compare({"key": "k", "outputs": [meta | {"strides": [80, 1]}], **asks})
    assert lied["problem"] and "values outside" in lied["problem"], lied


def test_a_tensor_file_must_be_a_plain_file_of_the_declared_size(tmp_path: Path) -> None:
    meta = tensor_files.write_tensor(torch.ones(4), tmp_path, "x.bin")
    with pytest.raises(ValueError, match="needs 8"):
        tensor_files.read_tensor(meta.model_copy(update={"dtype": "float16"}), tmp_path, "cpu", 1 << 20)
    with pytest.raises(ValueError, match="over the limit"):
        tensor_files.read_tensor(meta, tmp_path, "cpu", 8)
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 16)
    os.symlink(secret, tmp_path / "link.bin")
    with pytest.raises(OSError):  # never follows a link the other process planted
        tensor_files.read_tensor(meta.model_copy(update={"file": "link.bin"}), tmp_path, "cpu", 1 << 20)
    for name in ("../x.bin", "", "a/b"):
        with pytest.raises(ValueError):
            tensor_files.read_tensor(meta.model_copy(update={"file": name}), tmp_path, "cpu", 1 << 20)
    with pytest.raises(ValueError, match="dtype"):
        tensor_files.read_tensor(meta.model_copy(update={"dtype": "complex64"}), tmp_path, "cpu", 1 << 20)


def _sums(candidate: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor) -> PrecisionSums:
    sums = PrecisionSums()
    sums.add(compare_output(candidate, eager, exact, 1e-4, 1e-4).model_dump())
    return sums


def test_the_precision_rule_catches_fp16_arithmetic_and_passes_another_summation_order() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 1000, dtype=torch.float64)
    exact = torch.softmax(x, -1)
    eager = torch.softmax(x.float(), -1)
    other_order = (torch.exp(x.float() - x.float().max(-1, keepdim=True).values)
                   / torch.exp(x.float() - x.float().max(-1, keepdim=True).values).flip(-1).sum(-1, keepdim=True))
    assert precision_problem(_sums(other_order, eager, exact), "float32") is None
    fp16 = eager.half().float()
    problem = precision_problem(_sums(fp16, eager, exact), "float32")
    assert problem and "lower precision" in problem
    assert precision_problem(_sums(eager.bfloat16().float(), eager, exact), "float32")


def test_the_precision_rule_has_a_floor_where_eager_is_exact() -> None:
    exact = torch.randn(1000, dtype=torch.float64).relu()
    eager = exact.float()
    assert precision_problem(_sums(eager, eager, exact), "float32") is None
    nudged = eager * (1 + 2.0**-23)  # one ulp off everywhere: honest rounding, within the floor
    assert precision_problem(_sums(nudged, eager, exact), "float32") is None
    assert precision_problem(_sums(eager.half().float(), eager, exact), "float32")
    assert PRECISION_FACTOR >= 16


def test_half_precision_tasks_have_a_precision_rule_that_fp8_operands_break() -> None:
    """A bf16 GEMM: eager rounds each fp32 sum to bf16 once; an honest kernel (fp32 sums in another
    order) rounds the same way; operands rounded to fp8's three mantissa bits before the products are
    an order of magnitude further from float64, as are half-precision sums."""
    generator = torch.Generator().manual_seed(3)
    a, b = torch.randn(64, 1024, generator=generator), torch.randn(1024, 64, generator=generator)
    a, b = a.bfloat16().float(), b.bfloat16().float()
    exact = a.double() @ b.double()
    eager = (a @ b).bfloat16().float()
    other_order = (a.flip(1) @ b.flip(0)).bfloat16().float()
    fp8 = (a.to(torch.float8_e4m3fn).float() @ b.to(torch.float8_e4m3fn).float()).bfloat16().float()
    assert precision_problem(_sums(other_order, eager, exact), "bfloat16") is None
    problem = precision_problem(_sums(fp8, eager, exact), "bfloat16")
    assert problem and "fp8 operands" in problem
    half_sums = torch.zeros(64, 64, dtype=torch.bfloat16)
    for k in range(0, 1024, 4):  # the running sum kept in bf16, four products at a time
        half_sums += (a[:, k:k + 4] @ b[k:k + 4]).bfloat16()
    assert precision_problem(_sums(half_sums.float(), eager, exact), "bfloat16")


def test_a_timed_output_digest_commits_to_every_value() -> None:
    """The digest a timed call commits to changes with any one bit and with the output's layout, is
    the same for a copy in the same layout, and cannot be met by a constant such as a row sum."""
    from kernelevo.sandbox.child import timed

    out = torch.softmax(torch.randn(7, 33), dim=-1)
    digest = timed.output_digest(out, 1234)
    assert timed.same_digest(digest, timed.output_digest(out.clone(), 1234))
    # a view is hashed where it lies, and its layout is part of the commitment (the oracle passes it)
    assert timed.tensor_digest(out.T, 5, 0) == timed.tensor_digest(out.T.contiguous(), 5, 0, list(out.T.stride()))
    assert not timed.same_digest(timed.output_digest(out.T, 5), timed.output_digest(out.T.contiguous(), 5))
    moved = out.clone()
    moved[3, 4] += 1e-6
    assert not timed.same_digest(digest, timed.output_digest(moved, 1234))
    assert not timed.same_digest(digest, timed.output_digest(out, 1235))  # weights follow the secret seed
    swapped = out.clone()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]  # same row sums, other values
    assert not timed.same_digest(digest, timed.output_digest(swapped, 1234))
    big = torch.randn(3 * LEAF_BYTES // 4 + 5)  # several leaves and a short last one
    assert timed.same_digest(timed.output_digest(big, 9), timed.output_digest(big.clone(), 9))
    nudged = out.clone()
    nudged.view(-1)[:: 7] = torch.nextafter(nudged.view(-1)[:: 7], torch.tensor(2.0))  # one ulp each
    assert not timed.same_digest(digest, timed.output_digest(nudged, 1234))
    assert timed.same_digest(timed.output_digest(torch.tensor([float("nan"), 1.0]).half(), 3),
                             timed.output_digest(torch.tensor([float("nan"), 1.0]).half(), 3))
    assert timed.same_digest(timed.output_digest(torch.arange(5) > 2, 3), timed.output_digest(torch.arange(5) > 2, 3))
    assert not timed.same_digest(digest, None) and len(digest[0]) == DIGEST_LANES


def test_the_digest_is_a_sha256_tree_of_the_outputs_bytes() -> None:
    """The commitment binds because it is SHA-256: the digest is recomputed here from its definition
    with hashlib alone (a sum of per-element hashes, whatever its width, can be steered onto a chosen
    value by a generalized-birthday search over values within the tolerance)."""
    import hashlib
    import struct

    from kernelevo.sandbox.child import timed

    def level(raw: bytes) -> bytes:
        return b"".join(hashlib.sha256(raw[k:k + 4096]).digest() for k in range(0, len(raw), 4096))

    out = torch.randn(600, 700).to(torch.bfloat16)  # 840000 bytes: 205 full leaves and a short one
    raw = out.contiguous().view(torch.uint8).reshape(-1).numpy().tobytes()
    second = level(level(raw))  # 206 leaf hashes: a second level of a full leaf and a short one
    assert len(second) == 64
    header = HEADER + struct.pack("<QqQ", 77, 1, len(raw)) + f"{out.dtype}{tuple(out.shape)}".encode()
    root = hashlib.sha256(header + second).digest()
    assert timed.tensor_digest(out, 77, 1) == [int.from_bytes(root[8 * k:8 * k + 8], "little") for k in range(4)]
    assert timed.tensor_digest(out, 77, 0) != timed.tensor_digest(out, 77, 1)  # each output has its own


DIGEST_KERNEL_CHECK = """
import sys
import torch
from kernelevo.sandbox.child import digest, digest_kernel

device = sys.argv[1]
data = torch.randint(0, 256, (int(sys.argv[2]) * digest.LEAF_BYTES + 1,), dtype=torch.uint8)
assert digest_kernel.full_leaves(data[1:].to(device)) == digest.host_leaves(data[1:])  # unaligned: copied
if device == "cuda":
    assert digest.kernel_agrees(torch.device(device))
    big = torch.randint(0, 256, (digest.KERNEL_FROM_BYTES + 12345,), dtype=torch.uint8)
    assert digest.leaves(big.to(device)) == digest.host_leaves(big)
    assert digest.tensor_digest(big.to(device), 5, 0) == digest.tensor_digest(big, 5, 0)  # both levels on the GPU
print("agrees")
"""


# Under the interpreter one leaf takes most of a minute: on a CPU it is left to ``make test-all``
@(pytest.mark.slow if not torch.cuda.is_available() else pytest.mark.skipif(False, reason=""))
def test_the_digest_kernel_gives_hashlibs_bytes() -> None:
    """On a GPU large outputs' leaves are hashed by one Triton kernel; each must be hashlib's SHA-256
    to the bit (the worker and the oracle may take different paths). On a GPU the compiled kernel is
    checked on many leaves and through the digest's own path; here, one leaf under the Triton
    interpreter (set before Triton is imported), which takes seconds per leaf."""
    import subprocess
    import sys

    device = "cuda" if torch.cuda.is_available() else "cpu"
    env = {**os.environ, "TRITON_INTERPRET": "1"} if device == "cpu" else dict(os.environ)
    done = subprocess.run([sys.executable, "-c", DIGEST_KERNEL_CHECK, device, "300" if device == "cuda" else "1"],
                          env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and "agrees" in done.stdout, done.stderr[-3000:]


def test_the_default_atol_is_read_in_units_of_a_small_outputs_magnitude() -> None:
    """A softmax over 100000 columns has values near 1e-5, far below fp32's atol of 1e-4: zeros would
    pass an absolute tolerance. Read in units of the output's mean |value|, zeros fail and an honest
    softmax computed another way still passes."""
    x = torch.rand(4, 100000)
    want = torch.softmax(x, dim=1)
    honest = (torch.exp(x.double() - x.double().max(1, keepdim=True).values)
              / torch.exp(x.double() - x.double().max(1, keepdim=True).values).sum(1, keepdim=True)).float()
    zeros = torch.zeros_like(want)
    assert compare_output(zeros, want, None, 1e-4, 1e-4).problem is None  # the trap, unscaled
    problem = compare_output(zeros, want, None, 1e-4, 1e-4, scale_atol=True).problem
    assert problem and "the output's mean |value|" in problem
    assert compare_output(honest, want, None, 1e-4, 1e-4, scale_atol=True).problem is None
    assert compare_output(want * 1.001, want, None, 1e-4, 1e-4, scale_atol=True).problem  # 0.1% off everywhere
    big = torch.randn(1000) * 10  # mean |value| above 1: the atol stands as declared
    assert compare_output(big + 5e-5, big, None, 1e-4, 1e-4, scale_atol=True).problem is None


def test_the_float64_reference_is_made_on_the_host_when_the_gpu_has_no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """However full the GPU (a candidate's process may fill it on purpose), the float64 reference is
    made, on the host, so the precision rule cannot be switched off. The GPU's memory is scripted here."""
    import copy

    from kernelevo.sandbox.judge.exact import ExactReference

    gib = 2**30
    model, args = torch.nn.Linear(8, 4), [torch.randn(3, 8)]
    expected = copy.deepcopy(model).double()(args[0].double())
    for name, value in (("memory_reserved", 0), ("memory_allocated", 0)):
        monkeypatch.setattr(torch.cuda, name, lambda value=value: value)
    for free in (1 * gib, 130 * gib):  # a GPU filled by others, and one merely too small
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda free=free: (free, 141 * gib))
        hosted = ExactReference().compute(model, args, 1, working=100 * gib)
        assert "made on the host" in (hosted.note or "")
        assert hosted.outputs[0].dtype == torch.float64 and hosted.outputs[0].device.type == "cpu"
        assert torch.allclose(hosted.outputs[0], expected)
    assert ExactReference().compute(model, args, 1, working=None).note is None  # a CPU task: the host, silently


def test_where_eager_overflows_on_the_way_float64_rounded_decides() -> None:
    """An fp16 product past 65504 before a scale: eager holds inf where float64's answer, rounded to
    fp16, is a number. The output may hold eager's inf or be within the tolerance of that number; where
    float64's answer overflows too, only eager's inf passes."""
    inf = float("inf")
    exact = torch.tensor([1.0, 40000.0, 70000.0, -80000.0], dtype=torch.float64)
    eager = torch.tensor([1.0, inf, inf, -inf], dtype=torch.float16)
    assert compare_output(torch.tensor([1.0, 40000.0, inf, -inf], dtype=torch.float16), eager, exact,
                          1e-2, 1e-2).problem is None
    assert compare_output(eager.clone(), eager, exact, 1e-2, 1e-2).problem is None
    for wrong in ([1.0, 30000.0, inf, -inf], [1.0, 40000.0, 60000.0, -inf], [1.0, 40000.0, inf, inf]):
        problem = compare_output(torch.tensor(wrong, dtype=torch.float16), eager, exact, 1e-2, 1e-2).problem
        assert problem and "1 of 4" in problem, wrong
    stats = compare_output(torch.tensor([1.0, inf, inf, -inf], dtype=torch.float16), eager, None, 1e-2, 1e-2)
    assert stats.problem is None  # without float64, eager's own infinities pass


def test_each_large_output_of_each_set_is_held_to_the_precision_rule_on_its_own() -> None:
    """Summed over every set, one set on which eager is far off (an overflowed statistic) allows
    anything on the others; each large output of each set is held to the rule too."""
    torch.manual_seed(4)
    exact = torch.randn(8192, dtype=torch.float64)
    eager = exact.half()
    coarse = (exact.half().float() * 32).round().half() / 32  # about 5 bits kept near 1
    sums = PrecisionSums()
    sums.add(compare_output(coarse, eager, exact, 1e-2, 1e-2).model_dump())
    sums.add(compare_output(torch.zeros(8192, dtype=torch.float16), torch.zeros(8192, dtype=torch.float16),
                            exact * 50, 1e-2, 1e-2).model_dump())  # eager and the kernel both far off here
    problem = precision_problem(sums, "float16")
    assert problem and "on one checked output" in problem


def test_where_float64_overflows_too_its_infinity_or_nothing_decides() -> None:
    """Eager's NaN from inf - inf where the answer rounds to an infinity: that infinity passes. Where
    float64 has no number either on inputs scaled up (a naive softmax of scores past exp's range in
    float64), nothing says what the answer is, and any value passes; on other sets an infinity or NaN
    in both is the answer (log(0), x / 0), and the output must hold it."""
    inf, nan = float("inf"), float("nan")
    eager = torch.tensor([nan, nan, inf, 2.0], dtype=torch.float16)
    exact = torch.tensor([-1e6, nan, 1e6, 2.0], dtype=torch.float64)
    honest = torch.tensor([-inf, 0.25, inf, 2.0], dtype=torch.float16)
    assert compare_output(honest, eager, exact, 1e-2, 1e-2, scaled_up=True).problem is None
    assert "1 of 4" in compare_output(honest, eager, exact, 1e-2, 1e-2).problem  # not scaled up: 0.25 for NaN
    for wrong in ([inf, 0.25, inf, 2.0], [nan, 0.25, 7.0, 2.0]):  # the other infinity; a number for one
        assert compare_output(torch.tensor(wrong, dtype=torch.float16), eager, exact, 1e-2, 1e-2,
                              scaled_up=True).problem, wrong
    log_zero = torch.tensor([-inf, 0.5])
    assert compare_output(torch.tensor([5.0, 0.5]), log_zero, log_zero.double(), 1e-4, 1e-4).problem
    assert compare_output(log_zero.clone(), log_zero, log_zero.double(), 1e-4, 1e-4).problem is None


def test_past_eager_overflow_a_float32_run_sets_the_slack() -> None:
    """A complex product in fp16 on inputs shifted to about 64: every product sum passes 65504, so
    eager holds NaN (inf - inf) everywhere and says nothing of how close a kernel can come; float64's
    answers are small differences of large sums. A kernel accumulating in float32 is off by about
    0.1 there, past fp16's plain tolerance: the model run in float32 sets the slack instead."""
    from kernelevo.sandbox.judge.exact import ExactReference
    from kernelevo.sandbox.judge.slack import past_eager_overflow

    class Complex(torch.nn.Module):
        def forward(self, ar, ai, br, bi):
            return ar @ br - ai @ bi

    torch.manual_seed(3)
    args = [(x + 64 * x.std()).half() for x in (torch.randn(32, 64), torch.randn(32, 64), torch.randn(64, 32),
                                                torch.randn(64, 32))]
    model = Complex()
    want = [model(*args)]
    exact = ExactReference().compute(model, args, 1, working=None).outputs
    assert not bool(torch.isfinite(want[0]).any())
    honest = (args[0].float() @ args[2].float() - args[1].float() @ args[3].float()).half()
    assert compare_output(honest, want[0], exact[0], 1e-2, 1e-2).problem  # without the float32 run's slack
    slack = past_eager_overflow(model, args, want, exact, [0.0], None, "float16")
    assert slack[0].moved == 0.0 and 0.01 < slack[0].past_overflow < 1.0
    assert compare_output(honest, want[0], exact[0], 1e-2, 1e-2, slack[0]).problem is None
    assert compare_output(honest * 1.05, want[0], exact[0], 1e-2, 1e-2, slack[0]).problem  # still a tolerance


class _ProbsByHand(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        p = torch.exp(q @ k.transpose(-1, -2))
        return p / p.sum(-1, keepdim=True)


@pytest.mark.parametrize("seed", [3, 12, 23])
def test_past_eager_overflow_in_float32_a_nudged_float64_run_sets_the_slack(seed: int) -> None:
    """Attention probabilities by hand (no max subtracted) on the shifted set: queries and keys whose rows
    sit 0 to 4096 standard deviations up give scores in the hundreds to thousands, past exp's float32
    range, so eager is NaN where float64 often has the answer, and eager's error and sensitivity, measured
    only where it has a number (rows of small scores), say nothing there. A kernel subtracting the row's
    max is honest, but its scores carry float32's rounding at their magnitude, which moves the leading
    probabilities past the plain tolerance in some draws (these among them). Float64 on the
    inputs moved by one unit in their last place measures that scale; probabilities made from bfloat16
    scores stay rejected."""
    from kernelevo.sandbox.child.inputs import with_offset
    from kernelevo.sandbox.judge.exact import ExactReference
    from kernelevo.sandbox.judge.slack import past_eager_overflow, sensitivity

    torch.manual_seed(seed)
    q, k = with_offset(torch.randn(64, 32)), with_offset(torch.randn(64, 32))
    model = _ProbsByHand()
    want = [model(q, k)]
    exact = ExactReference().compute(model, [q, k], 1, working=None).outputs
    eager_scale = sensitivity(model, [q, k], want, seed, "cpu")
    scores = (q[:, None, :] * k[None, :, :]).flip(-1).sum(-1)  # float32 sums in another order than eager's
    honest = torch.softmax(scores, -1)
    assert compare_output(honest, want[0], exact[0], 1e-4, 1e-4, eager_scale[0], True, scaled_up=True).problem
    widened = past_eager_overflow(model, [q, k], want, exact, eager_scale, None, "float32", seed=seed)
    assert widened[0].moved == eager_scale[0] and eager_scale[0] < widened[0].past_overflow < 1e-3
    assert compare_output(honest, want[0], exact[0], 1e-4, 1e-4, widened[0], True, scaled_up=True).problem is None
    low = torch.softmax(scores.bfloat16().float(), -1)
    assert compare_output(low, want[0], exact[0], 1e-4, 1e-4, widened[0], True, scaled_up=True).problem
    finite = torch.isfinite(want[0])
    assert past_eager_overflow(model, [q, k], [torch.where(finite, want[0], 0.0)], exact, eager_scale, None,
                               "float32", seed=seed) == eager_scale  # no overflow: no second run


@pytest.mark.parametrize("chunk", [1 << 24, 7])
def test_the_slack_past_eager_overflow_holds_only_where_float64_answer_is_compared(
        monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """exp(x) * w + b on the shifted set: eager is infinite where x passes 88.7 and so is float64's answer
    rounded to float32 (exp(512) is about 1e222): no value is compared with float64's answer, and float64's
    own distances there (past 1e200) are no slack for the finite values beside them (exp(64) is 6e27). Where a value is
    compared with float64's answer, its slack is that place's alone."""
    from kernelevo.sandbox.child.inputs import with_offset
    from kernelevo.sandbox.judge.exact import ExactReference
    from kernelevo.sandbox.judge.slack import past_eager_overflow, sensitivity

    monkeypatch.setattr(compare, "CHUNK", chunk)

    class ExpGate(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.exp(x) * 0.5 + 1.0

    torch.manual_seed(1)
    x = with_offset(torch.randn(10, 64))
    model = ExpGate()
    want = [model(x)]
    exact = ExactReference().compute(model, [x], 1, working=None).outputs
    assert not bool(torch.isfinite(want[0]).all())
    moved = sensitivity(model, [x], want, 1, "cpu")
    scales = past_eager_overflow(model, [x], want, exact, moved, None, "float32", seed=1)
    assert scales == moved  # nothing compared with float64's answer: no second run, no second scale
    dropped = torch.where(x < 70, 1.0, want[0])  # the exp term dropped below 70
    assert compare_output(dropped, want[0], exact[0], 1e-4, 1e-4, scales[0], scaled_up=True).problem
    # a value compared with float64's answer (eager NaN, the answer 0.5) has the slack measured there
    eager = torch.tensor([float("nan")] * 4 + [1.0] * 60)
    answer = torch.cat([torch.full((4,), 0.5, dtype=torch.float64), torch.ones(60, dtype=torch.float64)])
    near = torch.cat([torch.full((4,), 0.49), torch.ones(60)])
    wide = compare.Scale(0.0, 2e-3)
    assert compare_output(near, eager, answer, 1e-4, 1e-4, wide).problem is None
    assert compare_output(near, eager, answer, 1e-4, 1e-4, compare.Scale(0.0, 1e300)).problem is None  # float64
    off = near.clone()
    off[10] = 1.01  # a finite value: its slack is not the one past eager's overflow
    assert "1 of 64" in compare_output(off, eager, answer, 1e-4, 1e-4, wide).problem
    # measured only where compared: spread over pieces of CHUNK values, far larger distances elsewhere
    eager, answer = torch.ones(40), torch.ones(40, dtype=torch.float64)
    eager[[3, 18, 33]] = float("nan")
    answer[[20, 21]] = 1e300  # float64 past float32's range: eager's inf there is not compared with it
    eager[[20, 21]] = float("inf")
    wider = answer.clone()
    wider[[3, 18, 33]] += torch.tensor([1e-3, 4e-3, 2e-3], dtype=torch.float64)
    wider[[5, 20]] += torch.tensor([0.5, 1e299], dtype=torch.float64)
    assert compare.largest_difference(wider, answer, past_overflow_of=eager) == pytest.approx(4e-3)
    assert compare.overflowed_where_exact_is_not(eager, answer)
    assert not compare.overflowed_where_exact_is_not(torch.where(torch.isnan(eager), 1.0, eager), answer)


def test_eager_astray_past_an_overflow_is_not_a_rounding_scale() -> None:
    """exp(s) / sum exp(s) on scores up to 100: a row whose sum overflows gives NaN at its largest scores
    and 0 (finite over infinite) at the others, where float64 says 0.9. On such a set (a ``Scale`` comes
    with it) eager's number farther from float64's than rounding explains is not a rounding scale and
    not the only answer: float64's is compared there, a kernel as naive as eager passes too, and a
    kernel wrong where eager is right no longer hides in a slack of 0.9."""
    exact = torch.tensor([[0.1, 0.9, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    eager = torch.tensor([[0.0, float("nan"), 0.0], [0.2, 0.3, 0.5]])
    scale = compare.Scale(1e-7, 1e-7)
    stable, naive = exact.float(), torch.tensor([[0.0, 0.9, 0.0], [0.2, 0.3, 0.5]])
    assert compare_output(stable, eager, exact, 1e-4, 1e-4, scale).problem is None
    assert compare_output(naive, eager, exact, 1e-4, 1e-4, scale).problem is None
    uniform = stable.clone()
    uniform[1] = 1 / 3  # wrong where eager is right
    stats = compare_output(uniform, eager, exact, 1e-4, 1e-4, scale)
    assert "3 of 6" in stats.problem and stats.eager_error < 1e-6
    assert compare_output(uniform, eager, exact, 1e-4, 1e-4, 1e-7).problem is None  # a plain scale: eager's 0.1


def test_output_values_are_grouped_by_the_shift_levels_of_the_input_rows_they_come_from() -> None:
    """An input's rows are found among the output's dims: leading (a row's sum, a norm's rows), the same
    rows flattened (a (B, S, D) input's rows as (B*S, D)), any dims of its sizes in order (the columns of
    ``A @ B.T``, attention scores' keys) or in another order (rows returned sequence-first), or in a view
    with one dim split (heads merged); two inputs group by the pair of levels; an output the rows are not
    found in, or rows all of one level, have no groups."""
    from kernelevo.sandbox.judge.level_groups import level_groups

    levels = [((6,), torch.tensor([2, 3, 4, 0, 1, 2]))]
    sums = level_groups(torch.zeros(6), levels)
    assert sums is not None
    groups = sums.of(torch.arange(6))
    assert groups[0] == groups[5] and len(set(groups.tolist())) == 5
    rows = level_groups(torch.zeros(6, 10), levels)
    assert rows is not None and torch.equal(rows.of(torch.arange(60)).reshape(6, 10)[:, 0], groups)
    assert level_groups(torch.zeros(4, 5), levels) is None and level_groups(torch.zeros(()), levels) is None
    assert level_groups(torch.zeros(3, 2), [((3,), torch.tensor([1, 1, 1]))]) is None
    assert level_groups(torch.zeros(6, dtype=torch.int64), levels) is None  # integers are compared exactly
    flat = level_groups(torch.zeros(6, 10), [((2, 3), torch.tensor([[0, 1, 2], [3, 4, 0]]))])  # reshaped rows
    assert flat is not None and flat.of(torch.arange(0, 60, 10)).tolist() == [0, 1, 2, 3, 4, 0]
    a_levels, b_levels = torch.tensor([0, 4, 0, 4]), torch.tensor([1, 2, 3])
    product = level_groups(torch.zeros(4, 3), [((4,), a_levels), ((3,), b_levels)])  # A @ B.T: B's rows are columns
    assert product is not None
    cells = product.of(torch.arange(12)).reshape(4, 3)
    assert len(set(cells.tolist()[0])) == 3 and cells[0].tolist() == cells[2].tolist() != cells[1].tolist()
    q_levels, k_levels = torch.arange(8) % 5, (torch.arange(8) + 2) % 5
    scores = level_groups(torch.zeros(2, 4, 4), [((2, 4), q_levels), ((2, 4), k_levels)])  # q @ k.T per head
    assert scores is not None
    keyed = scores.of(torch.arange(32)).reshape(2, 4, 4)
    assert keyed[0, 0, 0] != keyed[0, 0, 1]  # keys of other levels along a row of scores
    rows_bs = torch.arange(6).reshape(2, 3) % 5
    first = level_groups(torch.zeros(3, 2, 4), [((2, 3), rows_bs)])  # (B, S) rows returned sequence-first
    assert first is not None
    by_row = first.of(torch.arange(24)).reshape(3, 2, 4)[:, :, 0]
    assert torch.equal(first.rows(torch.arange(24)).reshape(3, 2, 4)[:, :, 0], torch.arange(6).reshape(2, 3).T)
    assert len(set(by_row.flatten().tolist())) == 5 and by_row[0, 0] == by_row[2, 1]  # rows 0 and 5: level 0
    heads = torch.arange(2 * 4 * 3).reshape(2, 4, 3) % 5  # q's (B, H, S) rows; output (B, S, H*D), D = 2
    merged = level_groups(torch.zeros(2, 3, 8), [((2, 4, 3), heads)])
    assert merged is not None
    rows_of = merged.rows(torch.arange(48)).reshape(2, 3, 4, 2)[..., 0]  # (B, S, H)
    assert torch.equal(rows_of, torch.arange(24).reshape(2, 4, 3).transpose(1, 2))


@pytest.mark.parametrize("positions", [False, True])
def test_a_row_near_zero_has_its_own_rounding_scale_beside_rows_far_from_it(positions: bool) -> None:
    """Row sums on the shifted set: the row 4096 standard deviations up sets a rounding scale of several
    units for the whole output, within which the sums near zero could be rounded to a coarse grid. With
    the rows grouped by level, each group's slack is at most ``GROUP_FACTOR`` times its own scale: the
    coarse sums are rejected, an honest sum in another order passes, on the whole output and on a sample
    of it."""
    from kernelevo.sandbox.child.inputs import with_offset
    from kernelevo.sandbox.judge.exact import ExactReference
    from kernelevo.sandbox.judge.level_groups import level_groups
    from kernelevo.sandbox.judge.slack import sensitivity

    class RowSum(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.sum(-1)

    torch.manual_seed(5)
    levels: list = []
    x = with_offset(torch.randn(10, 4096), levels)
    model = RowSum()
    want = model(x)
    exact = ExactReference().compute(model, [x], 1, working=None).outputs
    one = sensitivity(model, [x], [want], 5, "cpu")[0]
    grouped = sensitivity(model, [x], [want], 5, "cpu", [level_groups(want, levels)])[0]
    assert isinstance(grouped, compare.Scale) and grouped.moved == one and grouped.groups.count == 5
    honest = x.reshape(10, 16, 256).sum(-1).flip(-1).sum(-1)
    grid = 2.0 ** (int(want.abs().max().log2()) - 24)
    coarse = torch.round(honest / grid) * grid
    where = torch.tensor([0, 3, 4, 7, 9]) if positions else None

    def problem(out: torch.Tensor, scale: float | compare.Scale) -> str | None:
        if where is None:
            return compare_output(out, want, exact[0], 1e-4, 1e-4, scale, scaled_up=True).problem
        return compare_output(out[where], want[where], exact[0][where], 1e-4, 1e-4, scale, scaled_up=True,
                              whole=(want, exact[0]), positions=where).problem

    assert problem(honest, one) is None and problem(coarse, one) is None  # the hole of one scale
    assert problem(honest, grouped) is None
    assert "the output's own rounding scale" in (problem(coarse, grouped) or "")


def test_a_groups_own_slack_holds_where_many_of_its_rows_are_past_it_not_one() -> None:
    """Two groups of 40 rows, the second's rounding scale a thousand times the first's. One row of the first
    group off by more than its own slack allows (a near tie whose rounding eager escaped) passes within
    the whole output's; the same error in half its rows (a kernel whose precision falls there) fails;
    beyond the whole output's slack any row fails."""
    from kernelevo.sandbox.judge.level_groups import level_groups

    rows, cols = 80, 8
    exact = torch.randn(rows, cols, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    want = exact.float()
    groups = level_groups(want, [((rows,), torch.tensor([0] * 40 + [1] * 40))])
    assert groups is not None
    moved = torch.zeros(groups.count, dtype=torch.float64)
    moved[:2] = torch.tensor([1e-6, 1e-3])
    scale = compare.Scale(1e-3, groups=groups, moved_by_group=moved)

    def problem(out: torch.Tensor) -> str | None:
        return compare_output(out, want, exact, 1e-6, 1e-6, scale, scaled_up=True).problem

    one_row, half = want.clone(), want.clone()
    one_row[3] += 2e-3  # past 256 * 1e-6, within 8 * 1e-3
    half[:20] += 2e-3
    assert problem(want) is None and problem(one_row) is None
    assert "outside" in (problem(half) or "")
    far = want.clone()
    far[3, 0] += 1e-2
    assert problem(far)


@pytest.mark.parametrize(("group_rows", "off", "held"), [(19, 2, False), (19, 3, True), (3, 1, False), (3, 2, True),
                                                         (1, 1, True)])
def test_in_a_small_group_two_rows_past_its_slack_are_not_yet_its_precision(group_rows: int, off: int,
                                                                             held: bool) -> None:
    """In a group of 19 rows (24 queries of an attention over five shift levels) two rows of near-tied
    scores are already past a 5% share; they pass within the whole output's slack, three fail. A group
    of fewer than four rows is held where more than half its rows are past it: one row of one."""
    from kernelevo.sandbox.judge.level_groups import level_groups

    rows, cols = 40 + group_rows, 8
    exact = torch.randn(rows, cols, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    want = exact.float()
    groups = level_groups(want, [((rows,), torch.tensor([0] * group_rows + [1] * 40))])
    assert groups is not None
    moved = torch.zeros(groups.count, dtype=torch.float64)
    moved[:2] = torch.tensor([1e-6, 1e-3])
    out = want.clone()
    out[:off] += 2e-3  # past 256 * 1e-6, within 8 * 1e-3
    problem = compare_output(out, want, exact, 1e-6, 1e-6, compare.Scale(1e-3, groups=groups, moved_by_group=moved),
                             scaled_up=True).problem
    assert (problem is not None) == held, problem


def test_where_eager_is_astray_a_value_no_farther_from_the_answer_passes() -> None:
    """On a set far from the task's own, where eager's value is farther from float64's than rounding
    explains, float64's answer is the target: a value as naive as eager's passes, and so does one on the
    other side of the answer no farther from it than eager's (a near tie rounded its own way); one
    farther than eager's fails. (On the task's own sets eager's error is the rounding scale itself.)"""
    exact = torch.linspace(1.0, 2.0, 64, dtype=torch.float64)
    want = exact.float()
    want[5] += 0.01  # astray: a hundred times the tolerance
    honest, farther = want.clone(), want.clone()
    honest[5] = float(exact[5]) - 0.008
    farther[5] = float(exact[5]) - 0.02
    assert compare_output(want, want, exact, 1e-4, 1e-4, 1e-7, scaled_up=True).problem is None
    assert compare_output(honest, want, exact, 1e-4, 1e-4, 1e-7, scaled_up=True).problem is None
    assert "outside" in (compare_output(farther, want, exact, 1e-4, 1e-4, 1e-7, scaled_up=True).problem or "")


def test_sets_far_from_the_tasks_own_take_the_larger_of_two_nudged_runs() -> None:
    """Rows shifted far up hold values of one size, so one unit up or down on each can cancel in a dot
    product; with two draws the scale is the larger of the two runs, each drawn from its own seed."""
    from kernelevo.sandbox.judge.slack import sensitivity

    class Dot(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return (x * y).sum(-1)

    generator = torch.Generator().manual_seed(11)
    x = torch.full((64, 16), 4096.0) + torch.randn(64, 16, generator=generator)
    y = torch.full((64, 16), 4096.0) + torch.randn(64, 16, generator=generator)
    want = [Dot()(x, y)]
    first = sensitivity(Dot(), [x, y], want, 3, "cpu")[0]
    second = sensitivity(Dot(), [x, y], want, 3 + 7919, "cpu")[0]
    assert first != second and sensitivity(Dot(), [x, y], want, 3, "cpu", draws=2)[0] == max(first, second)
