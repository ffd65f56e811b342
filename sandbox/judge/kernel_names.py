"""Which GPU kernels in a trace are the candidate's own (pure logic).

The forensic pass sees kernels by the names Nsight Compute prints. A name alone is weak evidence: a
candidate may define a Triton function it never launches, named like the library kernel that really
does the work (``cunn_SoftMaxForward``), and have the library's kernel counted as its own. So a
traced kernel is the candidate's only where its printed name can be nothing else:

- a Triton kernel prints as its bare function name (no namespace, no template, no parameter list):
  the printed name must *equal* one of the candidate's ``@triton.jit`` names; a library kernel, which
  prints as ``void at::native::...cunn_SoftMaxForward<...>(...)``, never does;
- a CUDA kernel of the candidate's extension prints with its parameters: its short name must be the
  ``__global__`` name, in the global namespace or in namespaces the candidate's source opens itself,
  none of them a library's;
- and the static checks refuse kernel names that look like a library's plain-named kernels (cuBLAS,
  cuDNN and inductor kernels print without a namespace), so such a name cannot be claimed either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelevo.sandbox.advice import ncu

LIBRARY_NAMESPACES = frozenset({
    "at", "c10", "caffe2", "torch", "std", "cub", "thrust", "cutlass", "cute", "cublas", "cublasLt", "cudnn",
    "cufft", "curand", "cusparse", "cutensor", "nvjet", "flash", "fmha", "triton", "cuda", "native", "detail",
    "internal", "xformers", "transformer_engine", "apex", "pytorch_flash", "PyTorchMemEffAttention", "gemvx",
    "cudnn_frontend", "nvte", "xmma_cudnn", "cutlass_cudnn", "xmma_new", "xmma", "cudnn_infer", "cufft_internal",
})
"""Namespaces of the libraries torch calls into; a candidate's own kernel is never counted in one."""
ANONYMOUS = "(anonymous namespace)"

JITERATED = (
    r"i0e?", r"i1e?", "gcd", "lcm", "zeta", "erfcx", "airy_ai", "sinc", "polygamma", "digamma", "trigamma", "lgamma",
    "log_ndtr", "ndtri", "entr", "xlog1py", "xlogy", r"(modified_|scaled_modified_|spherical_)?bessel_\w+",
    r"(shifted_)?chebyshev_polynomial_\w+", r"hermite_polynomial_\w+", r"laguerre_polynomial_\w+",
    r"legendre_polynomial_\w+",
)
"""Ops torch compiles at run time with its jiterator, whose kernels (``<op>_kernel``,
``<op>_vectorized4_kernel``) are declared ``extern "C"`` and print without a namespace."""

LIBRARY_LIKE = re.compile(
    r"^((sm|compute)\d+|ampere|volta|turing|maxwell|pascal|hopper|blackwell|ada)_"  # cuBLAS/cuDNN, per architecture
    r"|^(nvjet|cutlass|cublas|cudnn|cutensor|xmma|fmha|flash_fwd|flash_bwd)"
    r"|^triton_(poi|red|per|tem|for|unk)_"  # inductor's generated kernels
    r"|^(gemv\d|gemvNSP|gemmSN|gemmk1|splitKreduce|reduce_1Block|implicit_convolve|explicit_convolve|nchwToNhwc"
    r"|nhwcToNchw|generateWinograd|winograd|fft\d|softmax_warp_(forward|backward)|spin_kernel)"
    r"|^(dot|scal|axpy|nrm2|asum|amax|amin|ger|rot|swap|gemvx)_kernel(_val)?$|^precomputed_convolve"
    r"|^(conv2d_grouped_direct|convolve_common_engine|vector_fft|regular_fft|fft_|cudnn|dgrad|wgrad|fprop)"
    r"|_vectorized\d+_kernel$|^(" + "|".join(JITERATED) + r")_kernel$",  # torch's jiterator: extern "C", bare
)
"""Names of library kernels that print without a namespace, so that a kernel of the candidate's named
alike could claim them: cuBLAS and cuDNN (``sm90_xmma_gemm_...``, ``nvjet_...``, ``gemv2T_kernel_val``,
``dot_kernel``, ``implicit_convolve_sgemm``), inductor (``triton_poi_fused_...``) and torch's
global-namespace softmax, the kernels torch's jiterator compiles. Honest names (``gemm_kernel``,
``softmax_kernel``) stay free."""

_DECLARATION = re.compile(r"[\w:<>,\s*&]*")
"""What may stand between ``__global__`` and a kernel's name: its return type, qualifiers, templates."""
_NAMESPACE = re.compile(r"(?<!using)\s\bnamespace\s+([\w:]*)\s*\{|^namespace\s+([\w:]*)\s*\{", re.MULTILINE)
"""A namespace the source opens (``namespace a::b {``, ``namespace {``); not ``using namespace std;``
nor an alias (``namespace cg = cooperative_groups;``)."""
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def _without_launch_bounds(code: str) -> str:
    """``code`` with every ``__launch_bounds__(...)`` blanked, in one pass (a pattern that looked for the
    closing parenthesis from each occurrence took time growing with the square of the source)."""
    out, at = [], 0
    while (found := code.find("__launch_bounds__", at)) >= 0:
        out.append(code[at:found])
        after = found + len("__launch_bounds__")
        while after < len(code) and code[after].isspace():
            after += 1
        if after < len(code) and code[after] == "(":
            close = code.find(")", after)
            if close < 0:
                return "".join(out)
            after = close + 1
        out.append(" ")
        at = after
    out.append(code[at:])
    return "".join(out)


def cuda_kernel_names(cuda: str) -> set[str]:
    """The ``__global__`` functions a CUDA source defines (``__launch_bounds__`` before or after the
    return type). One pass: the text before each ``(`` that holds ``__global__`` declares a kernel,
    whose name is its last word."""
    names = set()
    for piece in _without_launch_bounds(cuda).split("("):
        at = piece.rfind("__global__")
        if at < 0:
            continue
        declaration = piece[at + len("__global__"):].rstrip()
        if not declaration[:1].isspace() or not _DECLARATION.fullmatch(declaration):
            continue
        start = len(declaration)
        while start and (declaration[start - 1].isalnum() or declaration[start - 1] == "_"):
            start -= 1
        if start < len(declaration):
            names.add(declaration[start:])
    return names


@dataclass
class Owned:
    """The kernels a candidate's source defines, and the namespaces it opens."""

    triton: set[str] = field(default_factory=set)
    cuda: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, triton: list[str], cuda_sources: list[str]) -> Owned:
        owned = cls(triton=set(triton))
        for source in cuda_sources:
            code = _COMMENTS.sub(" ", source)
            owned.cuda |= cuda_kernel_names(code)
            for found in _NAMESPACE.findall(code):
                name = next((f for f in found if f), "")
                owned.namespaces |= set(name.split("::")) if name else {ANONYMOUS}
        return owned

    def names(self) -> set[str]:
        return self.triton | self.cuda

    def owns(self, printed: str) -> bool:
        """Is the kernel Nsight Compute printed as ``printed`` one of the candidate's own?"""
        printed = printed.strip()
        if printed in self.triton:
            return True
        parts = ncu.short_name(printed).split("::")
        *spaces, name = [p.strip() for p in parts]
        if name not in self.cuda:
            return False
        return all(s in self.namespaces and s not in LIBRARY_NAMESPACES for s in spaces)


def library_like_names(owned: Owned) -> list[str]:
    """Why some of the candidate's kernel names could be taken for a library's (empty if none can)."""
    problems = [f"kernel `{name}` is named like a library kernel: give it a name of its own"
                for name in sorted(owned.names()) if LIBRARY_LIKE.search(name)]
    if ANONYMOUS in owned.namespaces:
        problems.append("the CUDA source opens an anonymous namespace: its kernels print without a name of their "
                        "own there; put them in a named namespace or the global one")
    problems += [f"the CUDA source opens namespace `{space}`, a library's: put kernels in a namespace of their own"
                 for space in sorted((owned.namespaces - {ANONYMOUS}) & LIBRARY_NAMESPACES)]
    return problems
