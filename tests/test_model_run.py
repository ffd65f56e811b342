"""Whole-model optimization on the CPU: capture and partition of small networks with exact
reassembly, region tasks that load, the budget split and the multi-GPU schedule (simulated), the
kernel wrapper's fallbacks, and a model-level run with the built-in policy on a tiny transformer
block, exported and imported as `optimize(model)`."""

from __future__ import annotations

import json
import operator
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from typer.testing import CliRunner

from conftest import ROOT
from kernelevo.agent.builtin.recognize import recognise
from kernelevo.agent.cli import app
from kernelevo.agent.model import run as mr
from kernelevo.agent.store import RunStore
from kernelevo.tasks import load_task
from kernelevo.tasks import regions as rg
from kernelevo.tasks.loader import instantiate

TINY = ROOT / "tasks" / "examples" / "transformer_block.py"  # at --size small


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(24, 48), nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc2(F.relu(self.fc1(x))) * 2.0, dim=-1)


class ConvBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn_free = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()
        self.head = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn_free(self.conv(x)) * 0.5
        return self.head(y.flatten(1))


def _tiny() -> tuple[nn.Module, list[torch.Tensor]]:
    return mr.build(mr.ModelSpec(path=str(TINY), size="small"))


@pytest.mark.parametrize(("make", "inputs", "kinds"), [
    (MLP, lambda: [torch.randn(5, 24)], ["linear", "linear", "softmax"]),
    (ConvBlock, lambda: [torch.randn(2, 3, 6, 6)], ["conv", "linear"]),
    (None, None, ["norm", "linear", "attention", "linear", "norm", "linear", "linear"]),
])
def test_capture_partition_and_exact_reassembly(make, inputs, kinds) -> None:  # noqa: ANN001
    model, args = (make().eval(), inputs()) if make else _tiny()
    gm = rg.capture(model, args)
    found = rg.partition(gm)
    assert [r.kind for r in found] == kinds
    with torch.no_grad():
        assert torch.equal(rg.split(gm, found)(*args), model(*args))  # the same function, cut into pieces
    every = [n for r in found for n in r.nodes]
    assert len(every) == len(set(every))  # no node in two regions


def test_regions_keep_their_epilogues() -> None:
    model, args = _tiny()
    found = rg.partition(rg.capture(model, args))
    by_kind = [(r.kind, r.nodes) for r in found]
    assert ("linear", ["fc1", "act"]) in by_kind  # linear + GELU
    assert ("linear", ["proj", "add"]) in by_kind  # linear + residual add
    assert ("linear", ["fc2", "add_1"]) in by_kind


def test_each_region_is_a_task_with_the_captured_shapes(tmp_path: Path) -> None:
    model, args = ConvBlock().eval(), [torch.randn(2, 3, 6, 6)]
    gm = rg.capture(model, args)
    for region in rg.partition(gm):
        path = tmp_path / f"{region.name}.py"
        path.write_text(rg.region_task_source(gm, region))
        task = load_task(str(path), "full")
        assert task.allow_partial  # a convolution may stay in torch while its epilogue is fused
        reference, inputs = instantiate(task, "cpu", seed=0)
        out = reference(*inputs)
        expected = {n.name: n for n in gm.graph.nodes}[region.output].meta["tensor_meta"].shape
        assert tuple(out.shape) == tuple(expected)


def test_unknown_modules_stay_in_pytorch_with_the_reason() -> None:
    class Net(nn.Module):  # torch.fx keeps torch.nn modules whole; one with children has no task template
        def __init__(self) -> None:  # (an encoder layer is captured through, except when given a mask)
            super().__init__()
            self.block, self.fc = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0), nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.block(x, src_mask=torch.zeros(2, 2)))

    found = rg.partition(rg.capture(Net().eval(), [torch.randn(2, 3, 4)]))
    odd = next(r for r in found if r.kind == "module")
    assert not odd.supported and "module type TransformerEncoderLayer cannot be re-created" in odd.reason
    assert next(r for r in found if r.kind == "linear").supported


def test_torch_modules_are_recreated_from_their_description_with_trained_looking_values(tmp_path: Path) -> None:
    """BatchNorm and pooling (any torch.nn module without children whose description is its
    constructor's arguments) become region tasks, a BatchNorm in eval mode in the epilogue of the
    convolution before it. Their constant-valued parameters and statistics
    (BatchNorm's mean of zeros and variance of ones as constructed) are redrawn in the task: a kernel
    that ignored them would otherwise pass, and fail on a trained network."""
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, eps=1e-3)
            self.pool, self.relu = nn.MaxPool2d(3, stride=2, padding=1), nn.ReLU(inplace=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.pool(self.relu(self.bn(self.conv(x))))

    model = Net().eval()
    gm = rg.capture(model, [torch.randn(2, 3, 8, 8)])
    found = rg.partition(gm)
    assert all(r.supported for r in found), [(r.name, r.reason) for r in found]
    # BatchNorm at inference is a scale and shift per channel: it joins the convolution's epilogue
    assert [r.nodes for r in found] == [["conv", "bn", "relu"], ["pool"]]
    for region in found:
        namespace: dict = {}
        source = rg.region_task_source(gm, region)
        exec(compile(source, region.name, "exec"), namespace)  # noqa: S102
        task_model = namespace["Model"]().eval()
        out = task_model(*namespace["get_inputs"]())
        assert out.shape == rg._tensor_meta(next(n for n in gm.graph.nodes if n.name == region.output)).shape
        if "bn" in region.modules:
            bn = task_model.bn
            assert "eps=0.001" in source and "inplace=True" not in source
            assert bn.running_var.min() > 0 and bn.running_var.std() > 0 and bn.running_mean.abs().max() > 0
            assert bn.weight.std() > 0 and bn.bias.abs().max() > 0
    assert rg.module_init(nn.MaxPool2d(3, stride=2, padding=1)) == (
        "nn.MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False)")
    # descriptions that leave a setting out: the module built from them would compute something else
    assert rg.module_init(nn.AvgPool2d(3, 2, 1, count_include_pad=False)) is None
    assert rg.module_init(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)) is None
    assert rg.module_init(nn.AvgPool2d(3, 2, 1)) == "nn.AvgPool2d(kernel_size=3, stride=2, padding=1)"


def test_an_attention_module_is_a_region_ending_in_its_output(tmp_path: Path) -> None:
    """``nn.MultiheadAttention`` returns (output, weights); where only the output is read (the weights
    unpacked and dropped, as real blocks write it) its region takes the item and the residual after it,
    is re-created in a task with its options, and the built-in policy plans that task (the module as its
    GEMMs and attention); where the weights are read it stays in PyTorch."""
    class Block(nn.Module):
        def __init__(self, weights: bool) -> None:
            super().__init__()
            self.attn, self.norm, self.weights = nn.MultiheadAttention(16, 2, bias=False), nn.LayerNorm(16), weights

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, w = self.attn(x, x, x)
            return self.norm(out + x) + (w.sum() if self.weights else 0.0)

    gm = rg.capture(Block(False).eval(), [torch.randn(7, 2, 16)])
    found = rg.partition(gm)
    attention = next(r for r in found if r.kind == "attention")
    assert attention.supported and attention.nodes[0] == "attn" and attention.nodes[-1] == "add", attention.nodes
    source = rg.region_task_source(gm, attention)
    assert "nn.MultiheadAttention(16, 2, dropout=0.0, bias=False" in source and "batch_first=False" in source
    path = tmp_path / "region.py"
    path.write_text(source)
    plan = recognise(load_task(str(path), "small"))
    assert plan.kind == "sequence" and "attention" in plan.describe(), plan.describe()
    used = rg.partition(rg.capture(Block(True).eval(), [torch.randn(7, 2, 16)]))
    assert not next(r for r in used if str(r.nodes[0]) == "attn").supported


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_transformer_encoder_is_captured_through_its_layers(tmp_path: Path, norm_first: bool) -> None:
    """``nn.TransformerEncoder`` and its layers branch in Python on their input (the fused fast path),
    which torch.fx cannot trace: they are captured as the submodules they call, in the order
    ``norm_first`` sets, so every part becomes a region the built-in policy plans (an identity is no
    task); the cut network matches the model. Called with a mask, the encoder stays one module call, left in PyTorch."""
    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, norm_first=norm_first,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16), enable_nested_tensor=False)
            self.pick, self.head = nn.Identity(), nn.Linear(16, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.pick(self.encoder(x)[:, 0]))

    model, x = Encoder().eval(), torch.randn(2, 5, 16)
    gm = rg.capture(model, [x])
    called = {str(n.target) for n in gm.graph.nodes if n.op == "call_module"}
    assert {"encoder.layers.0.self_attn", "encoder.layers.1.linear2", "encoder.layers.1.norm2", "encoder.norm"} <= called
    found = rg.partition(gm)
    kept = [(r.nodes, r.reason) for r in found if not r.supported]
    assert kept == [(["pick"], "it computes nothing (nn.Identity and nn.Dropout pass their input on in inference)")]
    with torch.no_grad():
        torch.testing.assert_close(rg.split(gm, found)(x), model(x), rtol=1e-5, atol=1e-5)
    for k, region in enumerate(r for r in found if r.supported):
        path = tmp_path / f"r{k}.py"
        path.write_text(rg.region_task_source(gm, region))
        recognise(load_task(str(path), "small"))  # each region planned (CannotCover would fail the test)

    class Masked(Encoder):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(x, mask=torch.zeros(5, 5)))

    masked = rg.partition(rg.capture(Masked().eval(), [x]))
    kept = [r for r in masked if not r.supported]
    assert [r.nodes[0] for r in kept] == ["encoder"] and "TransformerEncoder" in kept[0].reason


def test_layers_of_a_users_own_type_in_an_encoder_are_called_as_torch_calls_them() -> None:
    """Going through ``nn.TransformerEncoder``, its layers are called with the arguments torch passes
    them (masks None, ``is_causal=False``): a layer of the user's own that takes them without defaults,
    or reads ``is_causal``, is captured as the model computes it."""
    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin, self.self_attn = nn.Linear(16, 16), nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, src, src_mask, src_key_padding_mask, is_causal=None):  # noqa: ANN001, ANN202
            return src + (self.lin(src) if is_causal is False else 2.0 * self.lin(src))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc, self.head = nn.TransformerEncoder(Layer(), 2, enable_nested_tensor=False), nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.enc(x))

    model, x = Net().eval(), torch.randn(2, 5, 16)
    gm = rg.capture(model, [x])
    with torch.no_grad():
        torch.testing.assert_close(gm(x), model(x), rtol=1e-6, atol=1e-6)


def test_a_whole_nn_transformer_is_captured_through_its_encoder_and_decoder() -> None:
    """``nn.Transformer`` (its decoder attends to the encoder's output) is captured as the layers'
    submodule calls: self-attention, cross-attention, feed-forward and norms, each a region."""
    class Seq2Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.t = nn.Transformer(16, 2, 1, 2, 32, 0.0, batch_first=True, norm_first=True)

        def forward(self, tgt: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
            return self.t(src, tgt)

    model, tgt, src = Seq2Seq().eval(), torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    gm = rg.capture(model, [tgt, src])
    called = {str(n.target) for n in gm.graph.nodes if n.op == "call_module"}
    assert {"t.encoder.layers.0.self_attn", "t.decoder.layers.1.multihead_attn", "t.decoder.layers.1.norm3",
            "t.decoder.norm"} <= called
    found = rg.partition(gm)
    assert all(r.supported for r in found), [(r.nodes, r.reason) for r in found if not r.supported]
    with torch.no_grad():
        torch.testing.assert_close(rg.split(gm, found)(tgt, src), model(tgt, src), rtol=1e-5, atol=1e-5)


def test_an_untraceable_model_is_a_clear_error() -> None:
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x if x.sum() > 0 else -x

    with pytest.raises(rg.CannotCapture, match="torch.fx could not trace"):
        rg.capture(Branchy(), [torch.randn(3)])


MINI_GPT = ROOT / "tasks" / "examples" / "mini_gpt_block.py"


def test_a_forward_that_reads_sizes_into_python_is_captured_at_its_shapes() -> None:
    """minGPT's idioms (``B, T, C = x.size()``, ``math.sqrt(k.size(-1))``, a mask buffer sliced by
    ``T``): symbolic tracing fails on them; the capture records the graph at the inputs' shapes, and
    the network cut into regions computes exactly what the original does."""
    model, inputs = mr.build(mr.ModelSpec(path=str(MINI_GPT), size="small"))
    with pytest.raises(Exception):  # noqa: B017 - whatever torch.fx raises for a size read into Python
        torch.fx.symbolic_trace(model)
    gm = rg.capture(model, inputs)
    found = rg.partition(gm)
    kinds = [r.kind for r in found]
    assert kinds.count("linear") == 4 and kinds.count("norm") == 2 and "softmax" in kinds
    with torch.no_grad():
        assert torch.equal(rg.split(gm, found)(*inputs), model(*inputs))
    # every region's inputs exist before it runs: the written-out GELU (0.5 * x * (1 + tanh(...x...)))
    # does not pull the tanh's result into the region of 0.5 * x
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    for region in found:
        assert all(order[name] < order[region.nodes[0]] for name in region.inputs), region
    fresh = [torch.randn_like(inputs[0])]  # the graph holds for any values at these shapes
    with torch.no_grad():
        assert torch.equal(rg.split(gm, found)(*fresh), model(*fresh))
    assert gm.fixed_signature == rg.input_signature(inputs)
    # other shapes: the optimized network hands the call to the user's own model
    guarded = mr.FixedShapes(rg.split(gm, found), model, gm.fixed_signature)
    shorter = torch.randn(2, 8, inputs[0].shape[-1])
    with torch.no_grad():
        assert torch.equal(guarded(shorter), model(shorter)) and torch.equal(guarded(*fresh), model(*fresh))
    for region in (r for r in found if r.supported):  # each is a task that runs
        namespace: dict = {}
        exec(compile(rg.region_task_source(gm, region), region.name, "exec"), namespace)  # noqa: S102
        with torch.no_grad():
            assert namespace["Model"]()(*namespace["get_inputs"]()).shape == rg._tensor_meta(
                next(n for n in gm.graph.nodes if n.name == region.output)).shape


def test_a_forward_written_with_einops_is_captured_as_plain_torch() -> None:
    """einops refuses a tracer's proxies; at fixed shapes its torch backend records reshapes, permutes
    and reductions, and the cut network computes exactly what the original does."""
    einops = pytest.importorskip("einops")

    class Chunked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.randn(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            blocks = einops.rearrange(x, "b (c l) h -> b h c l", l=4)
            summed = einops.reduce(blocks.exp() * self.scale, "b h c l -> b c h", "sum")
            return torch.einsum("bch,bch->bc", summed, summed.tanh())

    model, inputs = Chunked(), [torch.randn(2, 16, 3)]
    gm = rg.capture(model, inputs)
    assert not any("einops" in str(n.target) for n in gm.graph.nodes)
    found = rg.partition(gm)
    fresh = [torch.randn_like(inputs[0])]
    with torch.no_grad():
        assert torch.equal(rg.split(gm, found)(*fresh), model(*fresh))


def test_a_forward_that_stores_state_on_its_module_is_left_as_it_was() -> None:
    """A failed symbolic trace stores its proxy where forward assigns (``self.state = ...``); the
    capture puts every attribute back, so the trace at fixed shapes and the model itself still work."""

    class Stateful(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.state = nn.Linear(4, 4), torch.zeros(2, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.state = torch.tanh(self.fc(x + self.state))
            return self.state / float(x.size(-1)) ** 0.5  # float() of a proxy: symbolic tracing stops here

    model, x = Stateful().eval(), torch.randn(2, 4)
    gm = rg.capture(model, [x])
    assert isinstance(model.state, torch.Tensor) and not isinstance(model.state, torch.fx.Proxy)
    assert torch.equal(model.state, torch.zeros(2, 4))
    with torch.no_grad():
        assert torch.equal(gm(x), model(x))


def test_an_optional_argument_not_passed_takes_its_default_branch() -> None:
    """``forward(x, mask=None)`` called with x alone: traced with ``mask`` fixed at None, so the graph
    holds the branch such a call takes (a proxy is never None)."""

    class Masked(nn.Module):
        def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
            n = x.size()[1]
            if mask is not None:
                x = x * mask
            return torch.softmax(x, dim=-1) * float(n)

    model, x = Masked(), torch.randn(2, 5)
    gm = rg.capture(model, [x])
    assert not any(n.op == "call_function" and n.target is operator.mul and "mask" in str(n.args)
                   for n in gm.graph.nodes)
    assert torch.equal(gm(x), model(x))


def test_what_depends_on_values_is_not_recorded_for_one_example() -> None:
    """Branches on values, sizes that depend on values, random numbers drawn in forward: a graph at
    fixed shapes would hold for the example only, so the capture refuses, saying why."""
    from kernelevo.tasks.concrete_trace import ShapeDependentTrace, concrete_trace

    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x if x.sum() > 0 else -x

    class CountsPositives(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = (x > 0).nonzero().size(0)
            return x.clamp(min=0).sum(-1) / max(n, 1) * float(x.size(-1))

    class MaskedLength(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * float(len(x[x > 0])) / float(x.size(0))

    class Noisy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, c = x.size()
            return x + torch.randn(b, c)

    with pytest.raises(ShapeDependentTrace, match="data-dependent"):
        concrete_trace(Branchy(), [torch.randn(3)])
    for model in (CountsPositives(), MaskedLength()):
        with pytest.raises(rg.CannotCapture, match="depends on the values"):
            rg.capture(model, [torch.randn(4, 6)])
    with pytest.raises(rg.CannotCapture, match="depends on values, not only shapes"):
        rg.capture(Noisy(), [torch.randn(4, 6)])


def test_forward_signatures_a_graph_can_and_cannot_hold() -> None:
    class Many(nn.Module):
        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            return sum(x * float(x.size(-1)) for x in xs)

    class KeywordOnly(nn.Module):
        def forward(self, x: torch.Tensor, *, scale: float = 2.0) -> torch.Tensor:
            return x * scale / float(x.size(-1))

    class TupleDefault(nn.Module):
        def forward(self, x: torch.Tensor, dims: tuple = (0,)) -> torch.Tensor:
            return x.sum(dims)

    with pytest.raises(rg.CannotCapture, match=r"forward takes \*xs"):
        rg.capture(Many(), [torch.randn(2, 4)] * 3)
    x = torch.randn(2, 4)
    for model in (KeywordOnly(), TupleDefault()):
        assert torch.equal(rg.capture(model, [x])(x), model(x))


def _result(name: str, gain: float) -> mr.RegionResult:
    return mr.RegionResult(name=name, kind="linear", nodes=[name], inputs=[], output=name, gain=gain)


def test_the_budget_follows_expected_gain() -> None:
    results = [_result("big", 0.6), _result("mid", 0.3), _result("tiny", 0.02)]
    mr.plan_budget(results, 12)
    assert [r.evals for r in results] == [8, 4, 0]
    assert results[2].state == "left alone" and "budget" in results[2].reason
    assert sum(r.evals for r in results) <= 12
    few = [_result("a", 0.5), _result("b", 0.5)]
    mr.plan_budget(few, 3)  # not enough for two regions of MIN_EVALS: one gets them all
    assert sorted(r.evals for r in few) == [0, 3]


def test_regions_run_one_per_gpu_at_a_time() -> None:
    """The scheduler with a simulated device count: never more jobs in flight than GPUs, never two on
    one GPU, every job run once."""
    active: dict[int, str] = {}
    peak, ran, lock = [0], [], threading.Lock()

    def run(job: str, gpu: int) -> None:
        with lock:
            assert gpu not in active, f"GPU {gpu} given two jobs"
            active[gpu] = job
            peak[0] = max(peak[0], len(active))
        time.sleep(0.05)
        with lock:
            del active[gpu]
            ran.append(job)

    jobs = [f"r{i}" for i in range(7)]
    mr.schedule(jobs, 3, run)
    assert sorted(ran) == sorted(jobs) and peak[0] == 3


def test_a_kernel_region_falls_back_on_other_shapes_and_a_failed_self_check(tmp_path, monkeypatch) -> None:
    from kernelevo.agent.model.export import apply

    monkeypatch.setenv("KERNELEVO_KERNEL_DIR", str(tmp_path / "kernels"))
    model, args = _tiny()
    gm = rg.capture(model, args)
    found = rg.partition(gm)
    wrong = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
             "        super().__init__()\n        self.ln1 = nn.LayerNorm(64)\n\n    def forward(self, x):\n"
             "        return self.ln1(x) + 1.0\n")
    spec = {"regions": [r.nodes for r in found], "model_inputs": [{"shape": [2, 16, 64], "dtype": "float32"}],
            "kernels": [{"index": 0, "name": "wrong_ln1", "source": wrong}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = apply(model, spec)
    assert any("r0_norm keeps its original code" in str(w.message) for w in caught)
    assert not isinstance(fast.submod_0, mr.KernelRegion)
    with torch.no_grad():
        assert torch.equal(fast(*args), model(*args))
    # a kernel that agrees is kept, and inputs of other shapes run the original region
    right = wrong.replace(" + 1.0", "")
    spec["kernels"] = [{"index": 0, "name": "right_ln1", "source": right}]
    fast = apply(model, spec)
    assert isinstance(fast.submod_0, mr.KernelRegion)
    other = torch.randn(1, 16, 64)
    assert not fast.submod_0.matches((other,))
    with torch.no_grad():
        assert torch.allclose(fast(other), model(other), atol=1e-6)
    # kernels were verified at inference: in training mode the original code runs
    assert not fast.submod_0.training

    def refuse(*args):  # noqa: ANN002, ANN202
        raise AssertionError("a kernel ran in training mode")

    fast.submod_0.kernel.forward = refuse
    with torch.no_grad():
        assert torch.equal(fast.train()(*args), model.train()(*args))


@pytest.mark.slow
def test_a_tiny_transformer_block_end_to_end(tmp_path, cache_dir, monkeypatch) -> None:
    """optimize-model with the built-in policy under the CPU interpreter, then status, export and the
    exported module in use: the reassembled block computes what the original does."""
    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    monkeypatch.setenv("KERNELEVO_KERNEL_DIR", str(tmp_path / "kernels"))
    runner = CliRunner()
    run = tmp_path / "model-run"
    done = runner.invoke(app, ["optimize-model", str(TINY), "--size", "small", "--max-evals", "6",
                               "--max-regions", "2", "--run-dir", str(run), "--sandbox", "process", "--report"])
    assert done.exit_code == 0, done.output
    state = json.loads(runner.invoke(app, ["status", str(run), "--json"]).stdout)
    optimized = [r for r in state["regions"] if r["state"] == "optimized"]
    assert len(optimized) == 2 and sum(r["evals"] for r in state["regions"]) <= 6
    store = RunStore(Path(optimized[0]["run_dir"]))
    assert store.meta("config")["measure_compile"] is False  # torch.compile: once, for the whole model
    store.close()
    assert all(r["reason"] for r in state["regions"] if r["state"] == "left alone")
    e2e = state["end_to_end"]
    assert e2e["correct"] and e2e["regions_replaced"] == 2 and e2e["timing"] == "cpu-interpreter"
    assert e2e["max_abs_error"] < 1e-3
    _the_exported_module_in_a_fresh_process(runner, run, tmp_path)
    _report_trace_and_resume(runner, run, state, optimized, done.output)
    _a_forged_verdict_changes_nothing(run, optimized)
    _kernels_timed_in_the_network_are_left_out(run, tmp_path)


def _the_exported_module_in_a_fresh_process(runner: CliRunner, run: Path, tmp_path: Path) -> None:
    out = tmp_path / "optimized.py"
    exported = runner.invoke(app, ["export", str(run), "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    # The exported module in a fresh process, as a user would import it (Triton's interpreter must be
    # chosen before triton is imported, hence the subprocess here).
    use = tmp_path / "use.py"
    use.write_text(
        "import importlib.util, json, sys, torch\n"
        "from kernelevo.agent.model import run as mr\n"
        f"spec = importlib.util.spec_from_file_location('optimized', {str(out)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        f"model, _ = mr.build(mr.ModelSpec(path={str(TINY)!r}, size='small'))\n"
        "fast = module.optimize(model)\n"
        "x = torch.randn(2, 16, 64)\n"
        "with torch.no_grad():\n"
        "    error = float((fast(x) - model(x)).abs().max())\n"
        "print(json.dumps({'kernels': sum(isinstance(c, mr.KernelRegion) for c in fast.children()),"
        " 'error': error}))\n")
    env = dict(os.environ, TRITON_INTERPRET="1", KERNELEVO_KERNEL_DIR=str(tmp_path / "kernels"))
    used = subprocess.run([sys.executable, str(use)], capture_output=True, text=True, env=env, timeout=600)
    assert used.returncode == 0, used.stderr[-2000:]
    result = json.loads(used.stdout.strip().splitlines()[-1])
    assert result["kernels"] == 2 and result["error"] < 1e-4


def _report_trace_and_resume(runner: CliRunner, run: Path, state: dict, optimized: list[dict], output: str) -> None:
    # the run's report (kept up to date by --report; `kernelevo report` rewrites it): the model page
    # with every region, linking each optimized region's own page
    from test_report import browse

    assert (run / "report.html").exists() and "report: " in output
    assert runner.invoke(app, ["report", str(run)]).exit_code == 0
    dom = browse(run / "report.html", "--dump-dom")
    assert len(re.findall(r'<tr class="region"', dom)) == len(state["regions"])
    assert dom.count(">report</a>") == 2 and "matches the original on fresh inputs" in dom
    assert (run / "regions" / optimized[0]["name"] / "report.html").exists()
    # the trace of a model run: each region's in turn
    trace = runner.invoke(app, ["trace", str(run)])
    assert trace.exit_code == 0 and trace.output.count("== region ") == 2 and "verdict" in trace.output
    lines = [json.loads(line) for line in runner.invoke(app, ["trace", str(run), "--json"]).stdout.splitlines()]
    assert {e["region"] for e in lines} == {r["name"] for r in optimized} and all("type" in e for e in lines)
    # resuming a finished model run does not redo its regions
    again = runner.invoke(app, ["resume", str(run)])
    assert again.exit_code == 0 and "optimizing" not in again.output


def _a_forged_verdict_changes_nothing(run: Path, optimized: list[dict]) -> None:
    # a wrong kernel that also writes a "verdict" where the old end-to-end job read its result changes
    # nothing: the network is judged like any candidate, by the oracle, from raw outputs
    saved = mr.load_state(run)
    config = mr.ModelRunConfig.model_validate(saved["config"])
    source_path = Path(optimized[0]["run_dir"]) / "candidates" / f"{optimized[0]['candidate']}.py"
    honest_source = source_path.read_text()
    forging = re.sub(r"(\n    def forward\(self, (.*)\):\n)", r"\1        self._forge()\n", honest_source, count=1)
    assert forging != honest_source
    source_path.write_text(forging.replace("class ModelNew(nn.Module):", (
        "class ModelNew(nn.Module):\n"
        "    def _forge(self):\n"
        "        import json, pathlib\n"
        "        pathlib.Path('e2e.json').write_text(json.dumps({'correct': True, 'speedup': 100.0}))\n"
        "        pathlib.Path('result.json').write_text(json.dumps({'correct': True, 'speedup': 100.0}))\n"), 1)
        .replace("        return ", "        return 1.0 + ", 1))
    forged = mr.finish(config, run, saved, "cpu", lambda line: None)["end_to_end"]
    assert not forged["correct"] and forged["reason"].startswith("correct: set 0"), forged
    assert forged.get("speedup") is None and forged["regions_replaced"] == 0
    source_path.write_text(honest_source)


def _kernels_timed_in_the_network_are_left_out(run: Path, tmp_path: Path) -> None:
    # timed in the network with and without their kernels (the default on a GPU; forced here, where
    # the interpreter makes every kernel slower): both kernels are left out, the regions say why,
    # and export has nothing to write
    saved = mr.load_state(run)
    config = mr.ModelRunConfig.model_validate(saved["config"])
    said: list[str] = []
    final = mr.finish(config, run, saved, "cpu", said.append, in_context=True)
    e2e = final["end_to_end"]
    assert e2e["correct"] and e2e["regions_replaced"] == 0 and len(e2e["reverted"]) == 2
    reverted = [r for r in final["regions"] if r.get("reverted_candidate")]
    assert len(reverted) == 2 and all(r["state"] == "left alone" and r["candidate"] is None for r in reverted)
    assert all("won alone but not in the network" in r["reason"] for r in reverted)
    assert sum("left alone" in line for line in said) == 2
    from kernelevo.agent.model.export import export

    assert export(run, tmp_path / "none.py") == 0


@pytest.mark.slow
def test_a_mini_gpt_block_is_optimized_and_reassembled(tmp_path, cache_dir, monkeypatch) -> None:
    """optimize-model on the minGPT block, whose forward symbolic tracing cannot follow: regions
    optimized under the CPU interpreter, the network reassembled and judged like any candidate."""
    monkeypatch.setenv("KERNELEVO_CACHE", str(cache_dir))
    monkeypatch.setenv("KERNELEVO_KERNEL_DIR", str(tmp_path / "kernels"))
    runner = CliRunner()
    run = tmp_path / "gpt-run"
    done = runner.invoke(app, ["optimize-model", str(MINI_GPT), "--size", "small", "--max-evals", "4",
                               "--max-regions", "2", "--run-dir", str(run), "--sandbox", "process"])
    assert done.exit_code == 0, done.output
    e2e = json.loads(runner.invoke(app, ["status", str(run), "--json"]).stdout)["end_to_end"]
    assert e2e["correct"] and e2e["regions_replaced"] >= 1 and e2e["max_abs_error"] < 1e-3, e2e


def test_a_kernel_that_does_not_win_in_context_is_reverted() -> None:
    with_kernel = {"submod_0": 0.30, "submod_1": 0.10, "submod_2": 0.05, "submod_3": 0.2}
    without = {"submod_0": 0.20, "submod_1": 0.12, "submod_2": 0.05, "submod_3": 0.3}
    # submod_3 is not a replaced region; a tie (submod_2) keeps the original
    assert mr.slower_in_context(with_kernel, without, [0, 1, 2]) == {0: (0.30, 0.20), 2: (0.05, 0.05)}
    assert mr.slower_in_context(with_kernel, {}, [0]) == {}


def test_a_model_slower_end_to_end_exports_no_kernels(tmp_path: Path) -> None:
    """The harness timed the reassembled model slower than eager: export writes `optimize` that
    changes nothing, unless asked with --keep-slower."""
    from kernelevo.agent.model.export import export

    run = tmp_path / "run"
    run.mkdir()
    config = mr.ModelRunConfig(spec=mr.ModelSpec(path=str(TINY), size="small"))
    state = {"config": config.model_dump(mode="json"), "device": "cuda", "regions": [],
             "end_to_end": {"correct": True, "speedup": 0.73, "max_abs_error": 0.0}}
    (run / mr.MODEL_FILE).write_text(json.dumps(state))
    assert export(run, tmp_path / "optimized.py") == 0
    assert "slower: no kernels exported" in (tmp_path / "optimized.py").read_text()


def test_a_machine_that_cannot_judge_the_network_leaves_the_run_to_resume(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The end-to-end check failing for the machine (exit 3: CUDA kept out of the sandbox, say) is not
    the network's verdict: the run stops with exit 3, unfinished, to be resumed; any other judging
    failure is the reassembled network's result."""
    from kernelevo.agent.model import check as mc
    from kernelevo.sandbox.judge.evaluate import EvalError

    class Refusing:
        def __init__(self, code: int) -> None:
            self.code = code

        def run_in_sandbox(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            raise EvalError("the harness failed: CUDA did not start", self.code)

    with pytest.raises(EvalError):
        mc.judge_network(Refusing(3), TINY, TINY, tmp_path, {})
    assert mc.judge_network(Refusing(2), TINY, TINY, tmp_path, {})["correct"] is False
    config = mr.ModelRunConfig(spec=mr.ModelSpec(path=str(TINY), size="small"))
    state = {"config": config.model_dump(mode="json"), "state": "running", "regions": []}
    monkeypatch.setattr(mr, "load_state", lambda run_dir: state)
    monkeypatch.setattr(mr, "optimize_regions", lambda *args: None)
    monkeypatch.setattr(mr, "finish", lambda *args: (_ for _ in ()).throw(EvalError("CUDA did not start", 3)))
    said: list[str] = []
    assert mr.optimize_model(config, tmp_path, said.append) == 3
    assert "kernelevo resume" in said[-1] and state["state"] == "running"


def test_status_of_a_model_run_that_replaced_nothing_says_so(tmp_path: Path) -> None:
    """No region won: the end-to-end record holds a note and no comparison; status says the note."""
    run = tmp_path / "run"
    run.mkdir()
    config = mr.ModelRunConfig(spec=mr.ModelSpec(path=str(TINY), size="small"))
    (run / "model-config.json").write_text(config.model_dump_json())
    state = {"config": config.model_dump(mode="json"), "device": "cpu", "state": "finished", "total_ms": 1.0,
             "regions": [], "end_to_end": {"correct": True, "reason": None, "timing": None, "regions_replaced": 0,
                                            "note": "no kernel is left in the network: it runs as it was"}}
    (run / mr.MODEL_FILE).write_text(json.dumps(state))
    shown = CliRunner().invoke(app, ["status", str(run)])
    assert shown.exit_code == 0 and "Traceback" not in shown.output, shown.output
    assert "no kernel is left in the network" in shown.output


@pytest.mark.slow
def test_kill_9_mid_run_loses_nothing_and_resumes(tmp_path, cache_dir) -> None:
    """kill -9 of optimize-model while a region is being optimized: the region's own process stops by
    itself (resumable), and `kernelevo resume` finishes the model run with the verdicts already made."""
    import signal

    from kernelevo.agent.store import RunStore

    run = tmp_path / "model-run"
    env = dict(os.environ, KERNELEVO_CACHE=str(cache_dir), KERNELEVO_KERNEL_DIR=str(tmp_path / "kernels"))
    cmd = [sys.executable, "-m", "kernelevo.agent.cli", "optimize-model", str(TINY), "--size", "small",
           "--max-evals", "6", "--max-regions", "2", "--run-dir", str(run), "--sandbox", "process"]
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    region = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = sorted((run / "regions").glob("*/run.sqlite")) if (run / "regions").exists() else []
        if found:
            store = RunStore(found[0].parent)
            judged = store.count_evaluations("search")
            store.close()
            if judged >= 1:
                region = found[0].parent
                break
        time.sleep(0.5)
    assert region is not None and proc.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the orphaned region process notices and stops
        store = RunStore(region)
        busy = store.held_elsewhere()
        store.close()
        if not busy:
            break
        time.sleep(0.5)
    assert not busy, "the region's process outlived its parent"
    store = RunStore(region)
    judged_before = store.count_evaluations("search")
    # stopped where it was (not left to run its budget out unwatched), and resumable
    assert store.meta("state") == "interrupted" and "signal" in (store.meta("state_reason") or "")
    store.close()
    resumed = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "resume", str(run)], env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    state = json.loads((run / "model.json").read_text())
    assert state["end_to_end"]["correct"]
    assert sum(r["state"] == "optimized" for r in state["regions"]) == 2
    store = RunStore(region)
    assert store.count_evaluations("search") >= judged_before  # nothing judged was lost
    store.close()


def test_optimize_model_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["optimize-model", str(tmp_path / "nope.py"), "--run-dir", str(tmp_path / "a")])
    assert missing.exit_code == 2 and "model file not found" in missing.output
    no_inputs = runner.invoke(app, ["optimize-model", f"{TINY}:Model", "--run-dir", str(tmp_path / "b")])
    assert no_inputs.exit_code == 2 and "needs --inputs" in no_inputs.output
    branchy = tmp_path / "branchy.py"
    branchy.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return x if x.sum() > 0 else -x\n\n"
                       "def get_inputs():\n    return [torch.randn(4)]\n\ndef get_init_inputs():\n    return []\n")
    untraceable = runner.invoke(app, ["optimize-model", str(branchy), "--run-dir", str(tmp_path / "c"),
                                      "--sandbox", "process"])
    assert untraceable.exit_code == 2 and "torch.fx could not trace" in untraceable.output
    assert "Traceback" not in untraceable.output


def test_a_kernelbench_model_file_honours_its_small_size(tmp_path: Path) -> None:
    """--size small applies the file's SMALL overrides, DTYPE included, as for tasks; a file that is not
    KernelBench format is one clear error."""
    small, (x,) = mr.build(mr.ModelSpec(path=str(TINY), size="small"))
    assert small.fc1.in_features == 64 and x.shape == (2, 16, 64) and x.dtype == torch.float32
    full, (y,) = mr.build(mr.ModelSpec(path=str(TINY)))
    assert full.fc1.in_features == 1024 and y.shape == (8, 1024, 1024) and y.dtype == torch.bfloat16
    assert full.fc1.weight.dtype == torch.bfloat16
    bare = tmp_path / "bare.py"
    bare.write_text("import torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n")
    with pytest.raises(ValueError, match="defines `get_inputs`"):
        mr.build(mr.ModelSpec(path=str(bare)))


def test_a_class_with_input_and_init_functions(tmp_path: Path) -> None:
    """MODEL as file.py:Class with --inputs and --init: built as given, captured as a KernelBench file is."""
    net = tmp_path / "net.py"
    net.write_text("import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n"
                   "    def __init__(self, width):\n        super().__init__()\n        self.fc = nn.Linear(width, width)\n"
                   "    def forward(self, x):\n        return torch.relu(self.fc(x))\n\n"
                   "def example():\n    return [torch.randn(3, 12)]\n\ndef config():\n    return [12]\n")
    spec = mr.ModelSpec(path=str(net), attr="Net", inputs=f"{net}:example", init=f"{net}:config")
    model, inputs = mr.build(spec)
    assert model.fc.in_features == 12 and inputs[0].shape == (3, 12)
    assert [r.nodes for r in rg.partition(rg.capture(model, inputs))] == [["fc", "relu"]]


def test_a_region_whose_best_kernel_is_slower_keeps_its_original_code(tmp_path: Path) -> None:
    """On a GPU the region's own harness verdict decides: a best kernel re-judged slower than eager is
    not put into the model; under the interpreter (no speedup measured) the verified kernel is used."""
    from kernelevo.agent.store import RunStore
    from kernelevo.sandbox.models import Verdict

    def region(name: str, timing: str, speedup: float | None) -> Path:
        store = RunStore(tmp_path / name)
        cid, _ = store.add_candidate(f"# kernel {name}\n", None, "gemm", "gemm|x", "{}", 0)
        verdict = Verdict(task="r", candidate="c", size="full", compiled=True, correct=True, reason=None,
                          checks=[], device="H200", isolation={}, runtime_ms=1.0, timing=timing, speedup=speedup)
        store.record_evaluation(cid, "final", verdict)
        store.set_meta("best", {"id": cid, "runtime_ms": 1.0, "speedup": speedup, "timing": timing})
        store.set_state("finished", "budget spent")
        store.close()
        return tmp_path / name

    state, candidate, reason = mr.region_outcome(region("slow", "cuda-events", 0.35))
    assert (state, candidate) == ("left alone", None) and "0.35x of eager's speed" in reason
    assert mr.region_outcome(region("fast", "cuda-events", 1.4))[0] == "optimized"
    assert mr.region_outcome(region("cpu", "cpu-interpreter", None))[0] == "optimized"
    empty = RunStore(tmp_path / "none")
    empty.set_state("finished", "no correct candidate found")
    empty.close()
    assert mr.region_outcome(tmp_path / "none") == ("failed", None, "no correct candidate found")


def test_a_region_whose_process_died_says_the_last_line_it_wrote(tmp_path: Path) -> None:
    from kernelevo.agent.store import RunStore

    store = RunStore(tmp_path / "died")
    store.set_state("running")
    store.close()
    (tmp_path / "died" / "resume.log").write_text("Traceback (most recent call last):\n  ...\nMemoryError: boom\n\n")
    state, candidate, reason = mr.region_outcome(tmp_path / "died", 1)
    assert (state, candidate) == ("interrupted", None)
    assert reason.startswith("exit code 1; its last line was: MemoryError: boom (its log: ")
    assert reason.endswith("resume.log)")
    (tmp_path / "died" / "resume.log").unlink()
    assert mr.region_outcome(tmp_path / "died", -9)[2] == "killed by SIGKILL (killed)"


def test_a_bug_of_kernelevos_in_a_model_run_is_one_line_and_a_crash_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import typer

    from kernelevo.agent import cli_runs
    from kernelevo.agent.cli_output import EXIT_INTERNAL
    from kernelevo.agent.crash import CRASH_LOG
    from kernelevo.agent.model import run as model_run

    def broken(config, run_dir, log):  # noqa: ANN001, ANN202
        raise RuntimeError("reassembly went wrong")

    monkeypatch.setattr(model_run, "optimize_model", broken)
    with pytest.raises(typer.Exit) as stop:
        cli_runs._drive_model(None, tmp_path)
    assert stop.value.exit_code == EXIT_INTERNAL
    said = capsys.readouterr().err
    assert "RuntimeError: reassembly went wrong" in said and "Traceback" not in said and "kernelevo resume" in said
    assert "in broken" in (tmp_path / CRASH_LOG).read_text()


def test_a_model_run_stopped_by_a_region_says_whose_the_stop_was() -> None:
    regions = [{"state": "optimized"}, {"state": "interrupted", "exit_code": 4}]
    assert mr.stopped_exit_code(regions) == 4
    assert mr.stopped_exit_code([*regions, {"state": "interrupted", "exit_code": 3}]) == 3
    assert mr.stopped_exit_code([*regions, {"state": "interrupted", "exit_code": 5},
                                 {"state": "interrupted", "exit_code": 3}]) == 5
    assert mr.stopped_exit_code([{"state": "interrupted"}]) == 4  # a run from before exit codes were kept


def test_the_capture_check_draws_its_shuffle_on_the_cpu_whatever_the_default_device() -> None:
    """A reassembled network is captured again inside the judge's worker, where the default device is
    the GPU: the shuffle's generator lives on the CPU, so its draw must be made there."""
    import torch

    from kernelevo.tasks.regions import _shuffled

    values = torch.arange(6.0)
    with torch.device("meta"):  # stands in for a GPU's default device on this machine
        shuffled = _shuffled(values, torch.Generator().manual_seed(0))
    assert shuffled.device == values.device and sorted(shuffled.tolist()) == values.tolist()


def test_a_reassembled_networks_region_kernels_are_its_own_in_the_forensic_pass(tmp_path: Path) -> None:
    """The reassembled network carries its regions' verified kernels as text and loads them at run time:
    the forensic pass counts their kernels as the candidate's own. Read from the candidate's file
    alone, it finds none, and every network with a region replaced would be rejected on a GPU ("no
    kernel of the candidate's own ran")."""
    from kernelevo.agent.model import check as mc
    from kernelevo.sandbox.judge import forensic

    source = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
              "def region_relu_kernel(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n")
    kernels = {"0": [source, "r0_relu_0123456789"]}
    spec = mr.ModelSpec(path=str(TINY), size="small")
    task, candidate = mc.write_files(spec, [["relu"]], kernels, tmp_path, None)
    assert not forensic.owned_kernels(candidate.read_text()).owns("region_relu_kernel")
    assert forensic.owned_kernels(candidate.read_text(), source).owns("region_relu_kernel")

    class Recording:
        def run_in_sandbox(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.owned = kwargs.get("owned_sources")
            raise RuntimeError("recorded")

    evaluator = Recording()
    with pytest.raises(RuntimeError):
        mc.judge_network(evaluator, task, candidate, tmp_path, kernels)
    assert evaluator.owned == [source]


NONZERO = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x).view(x.size(0), -1)
        return y + torch.nonzero(y > 0).float().sum()  # a size that depends on the values


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("path", [TINY, MINI_GPT, "nonzero"],
                         ids=["traced symbolically", "traced at its shapes", "a size that depends on values"])
def test_a_reassembled_network_is_built_without_running_its_forward(path: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """The reassembled candidate records its graph on fake inputs: its constructor runs no forward on
    data. On a GPU the forensic pass counts every kernel after the network's constructor as the calls'
    work; a capture's forward there read as 1.4-1.7x the timed calls and rejected correct networks.
    The network it builds is still the original's, constants recorded from sizes included (minGPT's
    mask, sliced by a size read into Python)."""
    from torch._subclasses.fake_tensor import FakeTensor

    from kernelevo.agent.model.runtime import reassemble

    monkeypatch.setenv("KERNELEVO_KERNEL_DIR", str(tmp_path / "kernels"))
    if path == "nonzero":
        path = tmp_path / "nonzero.py"
        path.write_text(NONZERO)
    spec = mr.ModelSpec(path=str(path), size="small")
    model, inputs = mr.build(spec)
    found = rg.partition(rg.capture(model, inputs))
    assert mr._not_reassemblable(model, spec, "cpu", found) is None
    real_calls: list[str] = []

    def record(module: nn.Module, args: tuple) -> None:
        if any(isinstance(a, torch.Tensor) and not isinstance(a, FakeTensor) for a in args):
            real_calls.append(type(module).__name__)

    hook = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        net = reassemble(spec, "cpu", [r.nodes for r in found], {})
    finally:
        hook.remove()
    assert real_calls == []
    held = [(name, value) for module in net.modules() for name, value in
            [*vars(module).items(), *module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]]
    assert not [name for name, value in held if isinstance(value, FakeTensor)]
    fresh = [torch.randn_like(inputs[0])]
    with torch.no_grad():
        assert torch.equal(net(*fresh), model(*fresh))


def test_a_network_wrong_with_a_less_exact_kernel_is_judged_again_with_exact_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each region's kernel agreed on its own, the network's outputs did not (attention amplified a
    projection's three-bf16-product rounding on large inputs): the run judges the network again with
    each region's fastest kernel as exact as eager, or its original code where it has none, and says
    so; the export then carries what the second verdict judged."""
    from kernelevo.agent.model import check as mc
    from kernelevo.agent.store import RunStore
    from kernelevo.sandbox.models import Check, Verdict

    def region(name: str, kernels: list[tuple[str, float, float]]) -> dict:
        store = RunStore(tmp_path / name)
        ids = []
        for label, runtime_ms, ratio in kernels:
            cid, _ = store.add_candidate(f"# {name} {label}\n", None, "gemm", "gemm|x", "{}", 0)
            store.record_evaluation(cid, "search", Verdict(
                task="r", candidate=cid, size="full", compiled=True, correct=True, reason=None, checks=[],
                device="H200", isolation={}, runtime_ms=runtime_ms, timing="cuda-events", speedup=2.0 / runtime_ms,
                precision_ratio=ratio))
            ids.append(cid)
        store.close()
        return {"name": name, "nodes": [name], "state": "optimized", "candidate": ids[0],
                "run_dir": str(tmp_path / name), "ids": ids}

    # region a: its best is bf16x3 (ratio 40); a slower exact one exists. Region b: only bf16x3.
    a = region("a", [("bf16x3", 1.0, 40.0), ("bf16x6", 1.5, 1.3), ("slower than eager", 2.5, 1.0)])
    b = region("b", [("bf16x3", 1.0, 40.0)])
    half = region("half", [("bf16 kernel, no float64 reference", 1.0, None)])  # unknown: it keeps its kernel
    config = mr.ModelRunConfig(spec=mr.ModelSpec(path=str(TINY), size="small"))
    state = {"config": config.model_dump(mode="json"), "regions": [a, b, half]}
    judged: list[dict] = []

    def judge_network(evaluator, task, candidate, folder, kernels):  # noqa: ANN001, ANN202
        judged.append(kernels)
        if len(judged) == 1:
            wrong = Verdict(task="n", candidate="c", size="full", compiled=True, correct=False, reason="x",
                            checks=[Check(name="correct: set 3 (large values (x100))", passed=False, compared=True)],
                            device="H200",
                            isolation={})
            assert wrong.wrong_output
            return {"correct": False, "reason": "correct: set 3 (large values (x100)): 1 of 50331648 values outside",
                    "wrong_output": wrong.wrong_output}
        return {"correct": True, "reason": None, "timing": "cuda-events", "speedup": 1.2, "max_abs_error": 1e-6,
                "eager_ms": 1.2, "optimized_ms": 1.0, "wrong_output": False}

    monkeypatch.setattr(mc, "judge_network", judge_network)
    said: list[str] = []
    mr.finish(config, tmp_path / "run", state, "cpu", said.append, in_context=False)
    assert [sorted(k) for k in judged] == [["0", "1", "2"], ["0", "2"]]
    assert judged[1]["0"][0] == "# a bf16x6\n"
    assert a["candidate"] == a["ids"][1] and a["replaced_candidate"] == a["ids"][0]
    assert b["state"] == "left alone" and b["candidate"] is None and "as exact as eager" in b["reason"]
    e2e = state["end_to_end"]
    assert e2e["correct"] and e2e["regions_replaced"] == 2 and "large values" in e2e["first_attempt"]["reason"]
    assert any("judging it again" in line for line in said) and half["state"] == "optimized"
    # the second attempt wrong too: the regions keep what they had, the choices are only reported
    judged.clear()
    state["regions"] = [region("e", [("bf16x3", 1.0, 40.0), ("bf16x6", 1.5, 1.3)])]
    monkeypatch.setattr(mc, "judge_network", lambda *args: judged.append(args[-1]) or {
        "correct": False, "reason": "correct: set 3: outside", "wrong_output": True})
    mr.finish(config, tmp_path / "run", state, "cpu", said.append, in_context=False)
    e = state["regions"][0]
    assert len(judged) == 2 and e["candidate"] == e["ids"][0] and state["end_to_end"]["exact_choices"] == {
        "0": e["ids"][1]}
    # a failure that is not a wrong output (a crash, a time) is not judged again
    judged.clear()
    state["regions"] = [region("c", [("bf16x3", 1.0, 40.0), ("bf16x6", 1.5, 1.3)])]
    monkeypatch.setattr(mc, "judge_network", lambda *args: judged.append(args[-1]) or {
        "correct": False, "reason": "forensic kernel trace: ...", "wrong_output": False})
    mr.finish(config, tmp_path / "run", state, "cpu", said.append, in_context=False)
    assert len(judged) == 1 and state["regions"][0]["state"] == "optimized"


def test_a_tensor_the_network_holds_goes_with_the_region_that_reads_it() -> None:
    """``torch.matmul(x, self.clusters)`` (NetVLAD) reads a parameter outside any submodule: the region
    task holds it as its own parameter (a floating buffer as a buffer), drawn afresh, and the region's
    module carries the network's values for its kernel. A tensor whose values matter (an index buffer)
    keeps its region in PyTorch, with why."""
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.clusters = nn.Parameter(torch.randn(16, 8))
            self.register_buffer("gain", torch.rand(8) + 0.5)
            self.register_buffer("order", torch.arange(8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(torch.matmul(x, self.clusters)) * self.gain
            return torch.softmax(y, dim=1) + self.order

    model, x = Net().eval(), torch.randn(4, 16)
    gm = rg.capture(model, [x])
    found = rg.partition(gm)
    first = found[0]
    assert first.nodes == ["matmul", "relu", "mul"] and first.supported, first
    source = rg.region_task_source(gm, first)
    assert "self.clusters = nn.Parameter(torch.empty((16, 8), dtype=torch.float32).uniform_(" in source
    low = float(model.gain.min())  # positive, and drawn over the range the network's values span
    assert f"self.register_buffer('gain', torch.empty((8,), dtype=torch.float32).uniform_({low!r}, " in source
    namespace: dict = {}
    exec(compile(source, first.name, "exec"), namespace)  # noqa: S102
    assert namespace["Model"]()(*namespace["get_inputs"]()).shape == (4, 8)
    sub = rg.region_graph_module(gm, first)
    assert torch.equal(sub.state_dict()["clusters"], model.clusters.detach())
    assert torch.equal(sub(x), torch.relu(x @ model.clusters) * model.gain)
    (indexed,) = [r for r in found if not r.supported]
    assert indexed.nodes == ["softmax", "add"] and "it reads order, a torch.int64" in indexed.reason
    with torch.no_grad():
        assert torch.equal(rg.split(gm, found)(x), model(x))
