"""The static checks: honest multi-kernel candidates pass (the glue allowlist holds), each kind of
static rejection fires with a clear message."""

from __future__ import annotations

import pytest

from conftest import CANDIDATES, ROOT
from kernelevo.sandbox.judge.static_checks import check_candidate

HONEST = sorted(p for p in CANDIDATES.glob("ok_*.py")) + [ROOT / "tasks/examples/softmax_triton.py"]

HEADER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

"""


def model(body: str, init: str = "") -> str:
    init_block = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return HEADER + f"class ModelNew(nn.Module):\n{init_block}    def forward(self, x):\n{body}\n"


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_candidates_pass_static_checks(path) -> None:
    strict = "partial" not in path.stem
    report = check_candidate(path.read_text(), strict=strict)
    assert report.passed, report.first_failure()


def test_glue_allowlist_accepts_allocation_views_and_casts() -> None:
    body = """        y = torch.empty_like(x).contiguous()
        z = torch.zeros(4, device=x.device, dtype=torch.float32)
        w = x.reshape(-1).view(x.shape).to(torch.float32).float().transpose(0, 1).t()
        k[(triton.cdiv(x.numel(), 128),)](y, x.numel(), BLOCK=128)
        return y.view(x.shape)"""
    assert check_candidate(model(body)).passed


def test_names_bound_by_unpacking_are_the_candidates_own() -> None:
    """``a, b = [], []`` and ``for i, (s, *rest) in ...`` bind local names, as ``a = []`` does: writing
    into them is no monkeypatching. Unpacking a module's attribute still is not ownership of it."""
    body = """        sizes, (strides, *more) = [], ([], 0)
        for i, (s, *rest) in enumerate([(1, 2)]):
            sizes.append(s)
            strides.append(i)
        sizes[-1] *= 2
        strides[0] = 1
        k[(1,)](x, 1, BLOCK=4)
        return x"""
    assert check_candidate(model(body)).passed
    patched = "        a, b = 1, 2\n        torch.nn.functional.relu, c = None, 3\n        k[(1,)](x, 1, BLOCK=4)\n        return x"
    failed = {c.name: c.detail for c in check_candidate(model(patched)).checks if not c.passed}
    assert "torch.nn.functional.relu" in failed["static: no monkeypatching"]


@pytest.mark.parametrize("line", [
    "a = torch.autograd",
    "a, _ = torch.autograd, 0",
    "for m in [torch]:\n            pass",
    "ms = [m for m in (torch.nn.functional,)]",
    "(m := torch)",
    "print(torch)",
    "t = torch.Tensor",
    "t = type(x)",
])
def test_a_module_or_class_taken_as_a_value_is_refused(line: str) -> None:
    """A name for a module or a class (however it is bound: assignment, unpacking, a loop, a
    comprehension, a call's argument) would let the candidate set its attributes, the op recorder's
    among them, as the candidate's own; kernels never need one as a value."""
    body = f"        {line}\n        k[(1,)](x, 1, BLOCK=4)\n        return x"
    failed = {c.name: c.detail for c in check_candidate(model(body)).checks if not c.passed}
    assert "taken as a value" in failed.get("static: no monkeypatching", "") or \
        "type(...)" in failed.get("static: no monkeypatching", ""), failed


def test_classes_named_where_the_language_uses_them_pass() -> None:
    """Class bases, annotations and ``isinstance`` name classes without handing them out; dtypes,
    functions and constants are values, not modules or classes."""
    source = HEADER + """
@triton.jit
def scaled(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert isinstance(x, (torch.Tensor, float)) and not issubclass(torch.Tensor, nn.Module)
        y = torch.empty_like(x, dtype=torch.float32).to(torch.bfloat16)
        k[(1,)](y, 1, BLOCK=4)
        return y
"""
    report = check_candidate(source)
    assert report.passed, report.first_failure()


HONEST_IDIOMS = """
from typing import Any, Dict, List, Optional, Tuple
import torch
import torch.nn as nn
import triton
import triton.language as tl

_DT: dict[torch.dtype, tl.dtype] = {torch.float16: tl.float16}
libdevice = tl.math

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def helper(*ts: torch.Tensor, **kw: Any) -> Tuple[torch.Tensor, torch.Tensor]:
    return ts[0], ts[0]

class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: Optional[torch.Tensor] = None, z: "torch.Tensor | None" = None) -> torch.Tensor:
        xs: list[torch.Tensor] = [x]
        d: Dict[str, Any] = {}
        dt = getattr(tl, 'float16')
        if type(x) is not torch.Tensor:
            raise TypeError(f"bad {type(x)}")
        try:
            k[(1,)](x, 1, BLOCK=4)
        except torch.cuda.OutOfMemoryError:
            raise
        return x
"""


def test_honest_idioms_naming_modules_and_classes_pass() -> None:
    """What LLM-written candidates contain: typing annotations (``Optional[torch.Tensor]``, ``Dict[str,
    Any]``, on ``*args`` too), a dtype map annotated with classes, ``libdevice = tl.math``, ``getattr(tl,
    ...)``, ``type(x)`` compared or in a message, an ``except`` of a torch exception class."""
    report = check_candidate(HONEST_IDIOMS)
    assert report.passed, report.first_failure()


def test_the_static_check_imports_nothing_a_candidate_names() -> None:
    """Looking names up imports only torch and triton: a module the candidate names (here one that
    prints when imported) is never imported by the check."""
    import sys

    sys.modules.pop("this", None)
    check_candidate("import this\nx = this.s\n")
    assert "this" not in sys.modules


@pytest.mark.parametrize(("body", "check", "words"), [
    ("        k[(1,)](x, 1, BLOCK=4)\n        return torch.softmax(x, -1)", "no torch compute", "torch.softmax"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        import torch.nn.functional as F\n        return F.gelu(x)", "no torch compute", "gelu"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        return x @ x", "no torch compute", "`@`"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        return getattr(torch, 'soft' + 'max')(x, -1)", "no harness access", "computed name"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        return getattr(torch, 'softmax')(x, -1)", "no torch compute", "torch.softmax"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        return eval('x')", "no harness access", "eval"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        return x.__class__", "no harness access", "__class__"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        torch.compile(x)\n        return x", "no harness access", "torch.compile"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        torch.use_deterministic_algorithms(False)\n        return x",
     "no harness access", "poisoning"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        torch.Tensor.add = None\n        return x", "no monkeypatching", "torch.Tensor.add"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        setattr(torch, 'equal', None)\n        return x", "no monkeypatching", "setattr"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        import os\n        return x", "imports", "`os`"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        from torch import _C\n        return x", "no harness access", "torch._C"),
    ("        try:\n            k[(1,)](x, 1, BLOCK=4)\n        except:\n            pass\n        return x", "no fallback", "except everything"),
    ("        try:\n            k[(1,)](x, 1, BLOCK=4)\n        except (ValueError, BaseException):\n            pass\n        return x",
     "no fallback", "BaseException"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        open('/etc/passwd')\n        return x", "no harness access", "open"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        torch.hub.sys.modules['os']\n        return x", "no harness access",
     "torch.hub"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        t = torch\n        t.cuda.os.getcwd()\n        return x",
     "no harness access", "module `os`"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        getattr(torch.cuda, 'sys')\n        return x", "no harness access",
     "module `sys`"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        t = torch.serialization\n        t.tempfile._os.getcwd()\n        return x",
     "no harness access", "module `tempfile`"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        g = getattr\n        g(torch.cuda, 'x')\n        return x",
     "no harness access", "as a value"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        k.fn(torch)\n        return x", "no harness access", "`.fn`"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        torch.cuda.cudart().cudaProfilerStop()\n        return x",
     "no harness access", "torch.cuda.cudart"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        torch.cuda.profiler.stop()\n        return x",
     "no harness access", "torch.cuda.profiler"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        import triton.profiler as proton\n        proton.start()\n        return x",
     "no harness access", "triton.profiler"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        from triton import profiler\n        return x",
     "no harness access", "triton.profiler"),
    ("        k[(1,)](x, 1, BLOCK=4)\n        triton.knobs.runtime.debug = True\n        return x",
     "no harness access", "triton.knobs"),
])
def test_static_rejections(body: str, check: str, words: str) -> None:
    report = check_candidate(model(body))
    failed = {c.name: c.detail for c in report.checks if not c.passed}
    assert f"static: {check}" in failed, failed
    assert words in failed[f"static: {check}"]


@pytest.mark.parametrize("line", [
    "t = torch.from_file('/tmp/.env', shared=False, size=8, dtype=torch.uint8)",
    "t = torch.UntypedStorage.from_file('/tmp/.env', False, 8)",
    "t = x.untyped_storage().from_file('/tmp/.env', False, 8)",
    "t = getattr(torch, 'from_file')('/tmp/.env', size=8)",
    "t = torch.load('/tmp/weights.pt')",
    "ld = torch.load\n        t = ld('/tmp/weights.pt')",
    "t = torch.serialization.load('/tmp/weights.pt')",
    "torch.onnx.export(self, (x,), '/tmp/model.onnx')",
    "torch.cuda.memory._dump_snapshot('/tmp/snap.pickle')",
    "torch.save(x, '/tmp/out.pt')",
])
def test_reading_or_writing_files_through_torch_is_refused_in_partial_tasks_too(line: str) -> None:
    """Candidates compute; they do not read or write files, whether through ``open`` or through torch."""
    body = f"        k[(1,)](x, 1, BLOCK=4)\n        {line}\n        return x"
    report = check_candidate(model(body), strict=False)
    failed = {c.name: c.detail for c in report.checks if not c.passed}
    assert "static: no harness access" in failed, failed
    assert any(w in failed["static: no harness access"] for w in ("file", "torch internal")), failed


def test_torch_compute_is_allowed_when_the_task_allows_partial_replacement() -> None:
    body = "        k[(1,)](x, 1, BLOCK=4)\n        return torch.relu(x)"
    assert not check_candidate(model(body), strict=True).passed
    assert check_candidate(model(body), strict=False).passed


def test_nn_modules_may_hold_parameters_but_not_compute() -> None:
    init = "        self.lin = nn.Linear(4, 4)\n        self.w = nn.Parameter(torch.ones(4))"
    holds = "        k[(1,)](self.lin.weight, 1, BLOCK=4)\n        return self.w"
    assert check_candidate(model(holds, init)).passed
    computes = "        k[(1,)](x, 1, BLOCK=4)\n        return self.lin(x)"
    assert "self.lin" in check_candidate(model(computes, init)).first_failure()


def test_missing_model_new_and_syntax_errors() -> None:
    assert "no class ModelNew" in check_candidate(HEADER).first_failure()
    assert "syntax error" in check_candidate("def broken(:\n").first_failure()


def test_kernel_code_may_use_operators() -> None:
    """Inside @triton.jit bodies `@` and arithmetic are device code, not torch compute."""
    source = HEADER.replace("tl.load(x_ptr + offs, mask=offs < n)", "tl.load(x_ptr + offs, mask=offs < n) * 2") + (
        "@triton.jit\ndef mm(a_ptr, BLOCK: tl.constexpr):\n    a = tl.load(a_ptr + tl.arange(0, BLOCK))\n"
        "    b = a[:, None] * a[None, :]\n    c = b @ b\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        k[(1,)](x, 1, BLOCK=4)\n        mm[(1,)](x, BLOCK=16)\n        return x\n")
    assert check_candidate(source).passed, check_candidate(source).first_failure()


def test_cuda_sources_are_found_for_the_compile_gate() -> None:
    report = check_candidate((CANDIDATES / "ok_cuda_relu.py").read_text())
    assert report.kinds == ["cuda"]
    assert "relu_vec4" in report.cuda_sources[0]
    assert report.cpp_sources == ["torch::Tensor relu(torch::Tensor x);"]


@pytest.mark.parametrize(("source", "words"), [
    ("import triton\n@triton.jit\ndef triton_poi_fused_relu_0(x):\n    pass\n", "triton_poi_fused_relu_0"),
    ("import triton\n@triton.jit\ndef sm90_xmma_gemm_f32f32_tn(x):\n    pass\n", "sm90_xmma_gemm_f32f32_tn"),
    ("import triton\n@triton.jit\ndef spin_kernel(x):\n    pass\n", "spin_kernel"),
    ("import triton\n@triton.jit\ndef i0_vectorized4_kernel(x):\n    pass\n", "i0_vectorized4_kernel"),
    ("from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline('m', '', cuda_sources='__global__ void softmax_warp_forward(float* x) {}')\n",
     "softmax_warp_forward"),
    ("from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline('m', '', cuda_sources='namespace at { __global__ void k(float* x) {} }')\n", "namespace `at`"),
])
def test_kernel_names_a_library_prints_cannot_be_claimed(source: str, words: str) -> None:
    """A kernel named like one a library prints without a namespace (cuBLAS, inductor, torch's
    global softmax, the judge's marker) could have the library's kernel counted as the candidate's."""
    failed = {c.name: c.detail for c in check_candidate(source).checks if not c.passed}
    assert words in failed.get("static: kernel names", ""), failed


def test_a_parameter_named_self_is_no_way_past_the_module_attributes() -> None:
    source = ("import torch.utils.cpp_extension as ce\n\ndef grab(self):\n    return self.sys\n\n"
              "def walk(frame):\n    return frame.f_back.f_globals\n\nM = grab(ce)\n")
    failed = {c.name: c.detail for c in check_candidate(source).checks if not c.passed}
    assert "module `sys`" in failed.get("static: no harness access", "") and "f_back" in failed[
        "static: no harness access"], failed


def test_cuda_sources_built_at_run_time_are_refused_in_words() -> None:
    source = ("from torch.utils.cpp_extension import load_inline\nN = 256\n"
              "m = load_inline('m', '', cuda_sources=f'__global__ void k(float* x) {{ x[{N}] = 0; }}')\n")
    failed = {c.name: c.detail for c in check_candidate(source).checks if not c.passed}
    assert "strings the checker can read" in failed.get("static: kernel defined", ""), failed


@pytest.mark.parametrize(("native", "word"), [
    ("cudaProfilerStop();", "ProfilerStop"), ("cuProfilerStart();", "ProfilerStart"),
    ("void* f = dlsym(RTLD_DEFAULT, name);", "dlsym"), ("cuGetProcAddress(name, &f, 12000, 0, 0);", "GetProcAddress"),
    ("cudaGetDriverEntryPoint(name, &f, 0, 0);", "DriverEntryPoint"), ("#include <cupti.h>", "cupti"),
])
def test_cuda_sources_that_could_stop_the_forensic_trace_are_refused(native: str, word: str) -> None:
    """A kernel has no use for profiler control or run-time symbol lookup, with which it could stop
    ncu's collection before the torch work it hides; in the CUDA or the C++ sources."""
    for where in ("cuda_sources", "cpp_sources"):
        kernel = "__global__ void k(float* x) {}\n"
        cuda, cpp = (kernel + native, "") if where == "cuda_sources" else (kernel, native)
        source = ("from torch.utils.cpp_extension import load_inline\n"
                  f"m = load_inline('m', cpp_sources={cpp!r}, cuda_sources={cuda!r})\n")
        failed = {c.name: c.detail for c in check_candidate(source).checks if not c.passed}
        assert f"mention `{word}`" in failed.get("static: no harness access", ""), (where, failed, source)


def test_kernel_names_of_its_own_are_free() -> None:
    source = ("import triton\n@triton.jit\ndef gemm_kernel(x):\n    pass\n@triton.jit\ndef softmax_kernel(x):\n"
              "    pass\n")
    failed = {c.name for c in check_candidate(source).checks if not c.passed}
    assert "static: kernel names" not in failed


def test_cuda_namespaces_of_its_own_are_free_and_their_kernels_its_own() -> None:
    """``using namespace std;``, an alias and a comment open nothing; a nested namespace of the
    candidate's own holds kernels that count as its own; an anonymous one is refused in words."""
    from kernelevo.sandbox.judge.kernel_names import Owned, library_like_names

    source = ("#include <cooperative_groups.h>\nusing namespace std;\nnamespace cg = cooperative_groups;\n"
              "// namespace at { would be a library's }\nnamespace my::inner {\n"
              "__global__ void rows(const float* x, float* y, int n) {}\n}\n")
    owned = Owned.of([], [source])
    assert library_like_names(owned) == []
    assert owned.owns("void my::inner::rows(const float *, float *, int)")
    anonymous = Owned.of([], ["namespace {\n__global__ void k(float* x) {}\n}\n"])
    assert any("anonymous namespace" in p for p in library_like_names(anonymous))


def test_a_source_python_cannot_read_is_a_syntax_failure_not_a_crash() -> None:
    report = check_candidate("import torch\n# \ud800\nclass ModelNew: pass\n")
    assert not report.passed and "not readable text" in report.first_failure()


@pytest.mark.parametrize("line", [
    "        r = list(map('{0.__globals__}'.format, [x]))",
    "        r = getattr('{0.x}', 'format')(x)",
    "        f = str.format",
    "        r = '{0.__class__}'.format(x)",
    "        r = '{0[k]}'.format({'k': x})",
    "        f = torch.utils.cpp_extension._get_build_directory",
    "        r = torch.nn.init._no_grad_uniform_",
    "        r = k.get_capture_scope()['__builtins__']",
    "        r = k.asm",
    "        r = inspect.stack()",
])
def test_ways_around_the_attribute_checks_are_refused(line: str) -> None:
    """A format string's fields read attributes and items, a library's private names and a kernel's own
    view of its module reach what the attribute checks refuse, and a name the file never binds was put
    in its module from outside: each is refused."""
    report = check_candidate(model(f"        k[(1,)](x, 1, BLOCK=4)\n{line}\n        return x"), strict=False)
    assert not report.passed
    assert "no harness access" in report.first_failure(), report.first_failure()


def test_honest_code_near_the_refused_names_passes() -> None:
    """The candidate's own attributes under common names (`module`, `parse`), a literal format string,
    nn.Linear's fan-in helper and a tensor's version counter are not a library's internals."""
    body = ("        k[(1,)](x, 1, BLOCK=4)\n        m = self.module\n        n = self.parse\n"
            "        a, b = nn.init._calculate_fan_in_and_fan_out(self.w)\n        v = x._version\n"
            "        s = 'rows {} of {:.2f}'.format(1, 2.0)\n        return x")
    init = "        self.module = nn.Identity()\n        self.parse = 'x'\n        self.w = nn.Parameter(torch.ones(3, 4))"
    report = check_candidate(model(body, init), strict=False)
    assert report.passed, report.first_failure()


TABLE_HELPER = """
def positions(n, d):
    angles = torch.arange(n).float()[:, None] * torch.exp(torch.arange(0, d, 2).float() * -0.1)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)

"""


def test_a_constructor_may_compute_in_torch_before_any_input_exists() -> None:
    """A reference's ``__init__`` (copied into the candidate) builds tables with torch, and so may a
    module-level function only it calls: they run before any input exists, so a strict task allows
    them. Work in ``forward`` is still refused, as is torch kept by the constructor to run later (a
    lambda or a function it defines) and a helper ``forward`` calls too."""
    init = ("        freq = torch.exp(torch.arange(0, 8, 2).float() * -0.5)\n"
            "        self.register_buffer('table', torch.sin(freq) @ torch.ones(4, 4))\n"
            "        self.register_buffer('pe', positions(16, 8))")
    body = "        k[(1,)](x, 1, BLOCK=4)\n        return x"
    source = model(body, init).replace("class ModelNew", TABLE_HELPER + "class ModelNew")
    report = check_candidate(source)
    assert report.passed, report.first_failure()
    refused = {
        "forward": (model("        k[(1,)](x, 1, BLOCK=4)\n        return torch.sin(x)", init)
                    .replace("class ModelNew", TABLE_HELPER + "class ModelNew"), "torch.sin"),
        "lambda": (model("        k[(1,)](x, 1, BLOCK=4)\n        return self.f(x)",
                         init + "\n        self.f = lambda t: torch.softmax(t, -1)")
                   .replace("class ModelNew", TABLE_HELPER + "class ModelNew"), "torch.softmax"),
        "nested": (model("        k[(1,)](x, 1, BLOCK=4)\n        return self.f(x)",
                         init + "\n        def f(t):\n            return torch.tanh(t)\n        self.f = f")
                   .replace("class ModelNew", TABLE_HELPER + "class ModelNew"), "torch.tanh"),
        "helper also in forward": (model("        k[(1,)](x, 1, BLOCK=4)\n        return x + positions(4, 2)", init)
                                   .replace("class ModelNew", TABLE_HELPER + "class ModelNew"), "torch.exp"),
        "an __init__ nested in forward": (model("        def __init__(t):\n            return torch.sum(t)\n"
                                                "        k[(1,)](x, 1, BLOCK=4)\n        return __init__(x)", init)
                                          .replace("class ModelNew", TABLE_HELPER + "class ModelNew"), "torch.sum"),
        "a plain class built in forward": (model("        k[(1,)](x, 1, BLOCK=4)\n        return Box(x).out", init)
                                           .replace("class ModelNew", TABLE_HELPER + "class Box:\n    def __init__(self, t):\n"
                                                    "        self.out = torch.sum(t)\n\n\nclass ModelNew"), "torch.sum"),
        "torch reached again through a module": (model("        k[(1,)](x, 1, BLOCK=4)\n"
                                                       "        return torch.nn.init.torch.sum(x)", init)
                                                 .replace("class ModelNew", TABLE_HELPER + "class ModelNew"), "torch.sum"),
    }
    for what, (text, words) in refused.items():
        report = check_candidate(text)
        assert not report.passed and words in (report.first_failure() or ""), what
