"""A whole network as tasks: capture its forward graph, cut it into fusible regions, and write each
region as a KernelBench-format task with the real shapes and dtypes captured from a run.

- ``capture``: ``torch.fx.symbolic_trace`` of the model (or, where the forward reads sizes into
  Python, a trace at the example inputs' shapes: ``concrete_trace``), then one run on example inputs
  (``ShapeProp``) for every value's shape and dtype.
- ``partition``: regions anchored at the ops that dominate model time (``nn.Linear``, ``nn.Conv2d``,
  norms, softmax, ``scaled_dot_product_attention``) or at a pointwise op, each extended forward
  along pointwise ops that only it uses: a matmul or convolution with its epilogue, a norm block, a
  softmax block, a pointwise chain. Every region has one output. What a region cannot be written
  as a task for (an unknown module type, a method it cannot re-create) stays in PyTorch, with why.
- ``region_task_source``: the region as a standalone task file (``Model`` with the submodules it
  uses, constructed from their own attributes; ``get_inputs`` with the captured shapes).
- ``split``: the original network rebuilt as one submodule per region (``torch.fx`` split), which
  is what timing in context and reassembly work on.

Pure graph work: no GPU, no sandbox.
"""

from __future__ import annotations

import copy
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.passes.shape_prop import ShapeProp
from torch.fx.passes.split_module import split_module

from kernelevo.tasks.concrete_trace import concrete_graph, fetch_attribute, unpassed_defaults
from kernelevo.tasks.module_ops import ModulesAsOps
from kernelevo.tasks.task_modules import drawn_like, dtype_name, module_init, varied_constants

POINTWISE_FUNCTIONS = {
    torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.abs, torch.neg, torch.sqrt, torch.rsqrt, torch.add,
    torch.sub, torch.mul, torch.div, torch.where, torch.clamp, torch.maximum, torch.minimum, torch.erf, torch.pow,
    F.relu, F.gelu, F.silu, F.sigmoid, F.tanh, F.leaky_relu, F.softplus, F.mish, F.elu,
    operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.pow,
}
POINTWISE_METHODS = {"relu", "sigmoid", "tanh", "exp", "abs", "neg", "sqrt", "rsqrt", "add", "sub", "mul", "div",
                     "clamp", "pow"}
WORK_KINDS = ("linear", "conv", "norm", "softmax", "attention", "matmul", "pointwise", "reduction", "module")
"""Region kinds that do work; views, reshapes and copies stay between regions, in PyTorch."""
POINTWISE_MODULES = (nn.ReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Dropout, nn.Identity, nn.LeakyReLU,
                     nn.Mish, nn.ELU, nn.Softplus)
ANCHOR_MODULES = {nn.Linear: "linear", nn.Conv2d: "conv", nn.LayerNorm: "norm", nn.Softmax: "softmax",
                  nn.MultiheadAttention: "attention"}
ANCHOR_FUNCTIONS = {F.linear: "linear", F.layer_norm: "norm", torch.softmax: "softmax", F.softmax: "softmax",
                    F.log_softmax: "softmax", torch.log_softmax: "softmax",
                    F.scaled_dot_product_attention: "attention", torch.matmul: "matmul", operator.matmul: "matmul"}
if hasattr(nn, "RMSNorm"):
    ANCHOR_MODULES[nn.RMSNorm] = "norm"
if hasattr(F, "rms_norm"):
    ANCHOR_FUNCTIONS[F.rms_norm] = "norm"


class CannotCapture(Exception):
    """The model's forward cannot be traced into a graph (data-dependent control flow, say)."""


@dataclass
class Region:
    """A fusible piece of the network: its nodes (in order), its inputs and its one output."""

    name: str
    kind: str
    nodes: list[str]
    inputs: list[str]
    output: str
    modules: list[str] = field(default_factory=list)
    """Qualified names of the submodules it calls (their parameters go with the region)."""
    supported: bool = True
    reason: str | None = None
    """Why it stays in PyTorch, when it does."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def capture(model: nn.Module, inputs: list[Any], fake_mode: Any = None) -> torch.fx.GraphModule:
    """The model's forward as a graph, every value annotated with its shape and dtype from one run.
    Symbolic tracing first (the graph holds for any shape); where the forward reads sizes into Python
    (``B, T, C = x.size()``, slicing a buffer by them), the graph recorded at these inputs' shapes,
    which then carries ``fixed_signature`` (what it holds for) and must match the model on a second,
    shuffled set of inputs of those shapes.

    With ``fake_mode`` (a ``FakeTensorMode``; ``inputs`` its fake tensors) the run is on shapes alone,
    for a graph already captured and checked for real once, which only has to be recorded again (the
    check on other values needs data and is left out): the traced values carry no data, and only
    code of the forward that touches none of them (a constant built from sizes) runs for real."""
    state = _module_state(model)
    fixed = False
    try:
        graph = ModulesAsOps().trace(model, concrete_args=unpassed_defaults(model, inputs) or None)
    except Exception as symbolic:
        _restore(state)
        pristine = None if fake_mode is not None else _copy(model)
        try:
            graph, fixed = concrete_graph(model, inputs, fake_mode), True
        except Exception as concrete:
            _restore(state)
            raise CannotCapture(
                f"torch.fx could not trace the model's forward: {type(symbolic).__name__}: {symbolic}; "
                f"nor with its shapes fixed: {type(concrete).__name__}: {concrete}") from None
    try:
        gm = _graph_module(model, graph, state)
        with torch.no_grad():
            ShapeProp(gm, fake_mode=fake_mode).propagate(*inputs)
    except Exception as exc:
        raise CannotCapture(f"the captured graph does not run: {type(exc).__name__}: {exc}") from None
    if fixed:
        if fake_mode is None:
            _check_on_other_values(gm, pristine, inputs)
        gm.fixed_signature = input_signature(inputs)
    return gm


def input_signature(inputs: Sequence[Any]) -> list[Any]:
    """What a graph recorded at fixed shapes holds for: each input's shape and dtype (other values as
    themselves)."""
    return [(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in inputs]


def _copy(model: nn.Module) -> nn.Module | None:
    try:
        return copy.deepcopy(model)
    except Exception:  # a model that cannot be copied: the check on other values is skipped
        return None


def _shuffled(value: Any, generator: torch.Generator) -> Any:
    """The same values in another order: as valid for the model as the originals (indices in range,
    positive where they were), but a different input."""
    if not isinstance(value, torch.Tensor) or value.numel() < 2:
        return value
    flat = value.reshape(-1)
    # drawn on the CPU, where the generator is, whatever the default device (a GPU's, while a
    # reassembled network is built in the judge's worker)
    order = torch.randperm(flat.numel(), generator=generator, device="cpu").to(flat.device)
    return flat[order].reshape(value.shape).clone()


def _same(want: Any, got: Any) -> bool:
    """One output of the model and of its graph agree (tensors to rounding, other values exactly)."""
    if not isinstance(want, torch.Tensor):
        return want == got
    return (isinstance(got, torch.Tensor) and want.shape == got.shape
            and torch.allclose(want, got, rtol=1e-4, atol=1e-5, equal_nan=True))


def _check_on_other_values(gm: torch.fx.GraphModule, pristine: nn.Module | None, inputs: list[Any]) -> None:
    """A graph recorded at fixed shapes holds only if the forward depends on shapes, not values: one
    that drew random numbers or read a value-dependent size into Python would differ on other values."""
    if pristine is None:
        return
    other = [_shuffled(x, torch.Generator().manual_seed(k)) for k, x in enumerate(inputs)]
    with torch.no_grad():
        try:
            want = pristine(*other)
        except Exception:  # the model refuses shuffled inputs (structured ones): nothing to compare
            return
        got = gm(*other)
    pairs = list(zip(*(o if isinstance(o, (tuple, list)) else [o] for o in (want, got))))
    if not all(_same(w, g) for w, g in pairs):
        raise CannotCapture("the graph recorded at these shapes differs from the model on other inputs of the "
                            "same shapes: its forward depends on values, not only shapes (random numbers, a size "
                            "that depends on the data)")


_HELD = ("_parameters", "_buffers", "_modules")
"""A module's own dictionaries of tensors and children: copied, since assigning a tensor attribute
writes into them."""


ModuleState = tuple[list[tuple[nn.Module, dict[str, Any]]], list[list[Any]]]


def _module_state(model: nn.Module) -> ModuleState:
    """Every submodule's attributes, as they are, and its buffers' contents: a forward that stores a
    value on its module (``self.hidden = ...``) stores a tracer's proxy there while it is traced, and
    one that updates a buffer in place (``self.avg.mul_(0.9)``) runs once for real at fixed shapes.
    The contents are kept on the host with each buffer's version: copies, not kernels, and only a
    buffer written since is put back."""
    attributes = [(m, {k: dict(v) if k in _HELD else v for k, v in vars(m).items()}) for m in model.modules()]
    return attributes, [[b, b._version, b.detach().to("cpu", copy=True)] for b in model.buffers()]


def _restore(state: ModuleState) -> None:
    attributes, buffers = state
    for module, held in attributes:
        module.__dict__.clear()
        module.__dict__.update({k: dict(v) if k in _HELD else v for k, v in held.items()})
    with torch.no_grad():
        for kept in buffers:
            buffer, version, contents = kept
            if buffer._version != version:
                buffer.copy_(contents)
                kept[1] = buffer._version


def _graph_module(model: nn.Module, graph: torch.fx.Graph, state: ModuleState) -> torch.fx.GraphModule:
    """The GraphModule of a traced ``graph``, built once ``model`` holds its own values again (a
    GraphModule copies the attributes its graph reads), with the constants the tracer stored on it."""
    constants = {str(n.target): getattr(model, str(n.target)) for n in graph.nodes
                 if n.op == "get_attr" and str(n.target).startswith("_tensor_constant")}
    _restore(state)
    for name, value in constants.items():
        setattr(model, name, value)
    try:
        return torch.fx.GraphModule(model, graph, model.__class__.__name__)
    finally:
        _restore(state)


def _module(gm: torch.fx.GraphModule, node: torch.fx.Node) -> nn.Module | None:
    return gm.get_submodule(node.target) if node.op == "call_module" else None


def anchor_kind(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str | None:
    """What kind of region ``node`` starts, or None for a node that only joins one."""
    if node.op == "call_module":
        module = _module(gm, node)
        for cls, kind in ANCHOR_MODULES.items():
            if isinstance(module, cls):
                return kind
        if isinstance(module, POINTWISE_MODULES) or _inference_batch_norm(module):
            return "pointwise"
        return "module"
    if node.op == "call_function":
        if node.target in ANCHOR_FUNCTIONS:
            return ANCHOR_FUNCTIONS[node.target]
        if node.target in POINTWISE_FUNCTIONS:
            return "pointwise"
    if node.op == "call_method":
        if node.target in POINTWISE_METHODS:
            return "pointwise"
        if node.target in ("softmax", "log_softmax"):
            return "softmax"
        if node.target in ("mean", "sum", "amax", "max", "var"):
            return "reduction"
        return "view"
    return None


def _inference_batch_norm(module: nn.Module | None) -> bool:
    """BatchNorm in eval mode with running statistics: one scale and shift per channel, so it joins a
    convolution's or a linear's epilogue like any pointwise op (in training it reduces over the batch)."""
    return (isinstance(module, nn.modules.batchnorm._BatchNorm) and not module.training
            and module.running_mean is not None)


def _is_pointwise(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    return anchor_kind(gm, node) == "pointwise"


def _tensor_meta(node: torch.fx.Node) -> Any:
    return node.meta.get("tensor_meta")


def partition(gm: torch.fx.GraphModule) -> list[Region]:
    """Cut the graph into regions, in graph order (see the module's docstring)."""
    taken: dict[str, str] = {}
    regions: list[Region] = []
    nodes = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in nodes:
        if node.name in taken:
            continue
        kind = anchor_kind(gm, node)
        if kind not in WORK_KINDS:
            continue
        members = [node]
        members += _only_first_item(gm, node)
        # Extend along pointwise ops that consume this region's latest value (an epilogue; a
        # residual add reads one more input), as long as that value has no other user: the region
        # keeps one output.
        while kind != "module" and len(members[-1].users) == 1:
            (user,) = members[-1].users
            if user.name in taken or not _is_pointwise(gm, user) or not _ready(user, members, order):
                break
            members.append(user)
        names = [m.name for m in members]
        for m in members:
            taken[m.name] = f"r{len(regions)}"
        member_set = set(names)
        inputs: list[str] = []
        for m in members:
            for a in m.all_input_nodes:
                if a.name not in member_set and a.op != "get_attr" and a.name not in inputs:
                    inputs.append(a.name)
        modules = [str(m.target) for m in members if m.op == "call_module"]
        region = Region(name=f"r{len(regions)}_{kind}", kind=kind, nodes=names, inputs=inputs, output=names[-1],
                        modules=modules)
        why = _unsupported(gm, members, inputs)
        if why:
            region.supported, region.reason = False, why
        regions.append(region)
    return regions


def _only_first_item(gm: torch.fx.GraphModule, node: torch.fx.Node) -> list[torch.fx.Node]:
    """The items of an attention module's result that join its region where only ``[0]`` (its output;
    the averaged weights are ``[1]``) is read: items unpacked and never read, then ``[0]`` last, so that
    the region ends in one tensor. Empty otherwise."""
    if not isinstance(_module(gm, node), nn.MultiheadAttention):
        return []
    items = list(node.users)
    if any(u.op != "call_function" or u.target is not operator.getitem for u in items):
        return []
    read = [u for u in items if u.users]
    if len(read) != 1 or read[0].args[1] != 0:
        return []
    return [u for u in items if not u.users] + read


def _ready(user: torch.fx.Node, members: list[torch.fx.Node], order: dict[torch.fx.Node, int]) -> bool:
    """Can ``user`` join the region? Only if its other inputs exist before the region starts: a value
    computed later (``0.5 * x * (1 + tanh(...x...))`` joins ``0.5 * x`` with the tanh's result) would
    make the region wait for work placed after it."""
    start = order[members[0]]
    # a tensor the network holds (get_attr) exists before anything runs, wherever fx placed its read
    return all(a in members or a.op == "get_attr" or order[a] < start for a in user.all_input_nodes)


def _unsupported(gm: torch.fx.GraphModule, members: list[torch.fx.Node], inputs: list[str]) -> str | None:
    by_name = {n.name: n for n in gm.graph.nodes}
    if all(m.op == "call_module" and type(_module(gm, m)) in (nn.Identity, nn.Dropout) for m in members):
        return "it computes nothing (nn.Identity and nn.Dropout pass their input on in inference)"
    for m in members:
        if m.op == "call_module" and module_init(_module(gm, m)) is None:
            return f"module type {type(_module(gm, m)).__name__} cannot be re-created in a task"
        for a in m.all_input_nodes:
            if a.op != "get_attr":
                continue
            value = fetch_attribute(gm, str(a.target))
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                kind = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
                return (f"it reads {a.target}, a {kind} the network holds, whose values matter (indices, a mask): "
                        "a task would draw other values")
    meta = _tensor_meta(members[-1])
    if meta is None or not hasattr(meta, "shape"):
        return "its output is not one tensor"
    for name in inputs:
        if not hasattr(_tensor_meta(by_name[name]), "shape"):
            return f"input {name} is not a tensor"
    return None


def _read_attrs(gm: torch.fx.GraphModule, region: Region) -> list[torch.fx.Node]:
    """The get_attr nodes the region's nodes read: tensors the network holds outside any submodule
    (``torch.matmul(x, self.clusters)``), which the region task holds as its own."""
    by_name = {n.name: n for n in gm.graph.nodes}
    read: list[torch.fx.Node] = []
    for name in region.nodes:
        for a in by_name[name].all_input_nodes:
            if a.op == "get_attr" and a not in read:
                read.append(a)
    return read


def attribute(qualified: str) -> str:
    """A submodule's qualified name as one attribute name (``blocks.0.fc1`` -> ``blocks_0_fc1``)."""
    return re.sub(r"\W", "_", qualified)


def region_graph_module(gm: torch.fx.GraphModule, region: Region) -> torch.fx.GraphModule:
    """The region alone as a GraphModule: placeholders for its inputs, its nodes, its output; the
    submodules it calls as attributes of a fresh root (flattened names)."""
    by_name = {n.name: n for n in gm.graph.nodes}
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    root = nn.Module()
    for name in region.inputs:
        env[name] = graph.placeholder(name)
        env[name].meta = dict(by_name[name].meta)
    for node in _read_attrs(gm, region):
        flat, value = attribute(str(node.target)), fetch_attribute(gm, str(node.target))
        if isinstance(value, nn.Parameter):
            root.register_parameter(flat, value)
        else:
            root.register_buffer(flat, value)
        env[node.name] = graph.get_attr(flat)
        env[node.name].meta = dict(node.meta)
    for name in region.nodes:
        node = by_name[name]
        if node.op == "call_module":
            flat = attribute(str(node.target))
            root.add_module(flat, gm.get_submodule(node.target))
            new = graph.call_module(flat, tuple(torch.fx.map_arg(node.args, lambda a: env[a.name])),
                                    {k: torch.fx.map_arg(v, lambda a: env[a.name]) for k, v in node.kwargs.items()})
        else:
            new = graph.node_copy(node, lambda a: env[a.name])
        new.meta = dict(node.meta)
        env[name] = new
    graph.output(env[region.output])
    return torch.fx.GraphModule(root, graph)


def region_task_source(gm: torch.fx.GraphModule, region: Region, allow_partial: bool = True) -> str:
    """The region as a KernelBench-format task file with the captured shapes and dtypes."""
    sub = region_graph_module(gm, region)
    by_name = {n.name: n for n in gm.graph.nodes}
    metas = [_tensor_meta(by_name[name]) for name in region.inputs]
    dtypes = {dtype_name(m.dtype) for m in metas if m.dtype.is_floating_point}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    init_lines = ["        super().__init__()"]
    for node in _read_attrs(gm, region):
        value, flat = fetch_attribute(gm, str(node.target)), attribute(str(node.target))
        draw = drawn_like(value)
        init_lines.append(f"        self.{flat} = nn.Parameter({draw})" if isinstance(value, nn.Parameter)
                          else f"        self.register_buffer({flat!r}, {draw})")
    for qualified in region.modules:
        module = gm.get_submodule(qualified)
        init_lines.append(f"        self.{attribute(qualified)} = {module_init(module)}")
        init_lines += varied_constants(attribute(qualified), module)
    code = sub.graph.python_code(root_module="self").src
    forward = code.strip().splitlines()
    body = "\n".join("    " + line for line in forward)
    inputs = []
    for meta in metas:
        shape = tuple(meta.shape)
        if meta.dtype.is_floating_point:
            inputs.append(f"torch.randn({shape})")
        elif meta.dtype == torch.bool:
            inputs.append(f"torch.rand({shape}) > 0.5")
        else:
            inputs.append(f"torch.randint(0, 8, {shape}, dtype=torch.{dtype_name(meta.dtype)})")
    header = [f'"""Region {region.name} of a captured model: {", ".join(region.nodes)}."""', "",
              "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "from torch import device",
              "from math import inf, nan",
              "import operator", "", f'DESCRIPTION = "region {region.name} ({region.kind}) of a captured model"']
    if dtype and dtype != "float32":
        header.append(f"DTYPE = torch.{dtype}")
    if allow_partial:
        header.append("ALLOW_PARTIAL = True")
    return "\n".join([
        *header, "", "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        *init_lines, "",
        body, "", "",
        "def get_inputs():",
        f"    return [{', '.join(inputs)}]", "", "",
        "def get_init_inputs():",
        "    return []", "",
    ])


def split(gm: torch.fx.GraphModule, regions: list[Region]) -> torch.fx.GraphModule:
    """The network as one submodule per region (``submod_<i>``, i its index in ``regions``) and one
    for each stretch of nodes between regions: the same function, cut where the regions are."""
    owner = {name: i for i, r in enumerate(regions) for name in r.nodes}
    gaps: dict[str, int] = {}
    counter = [len(regions)]
    last_gap: list[int | None] = [None]

    def place(node: torch.fx.Node) -> int:
        if node.name in owner:
            last_gap[0] = None
            return owner[node.name]
        if last_gap[0] is None:
            last_gap[0] = counter[0]
            counter[0] += 1
        gaps[node.name] = last_gap[0]
        return last_gap[0]

    return split_module(gm, gm, place, keep_original_order=True)
