"""Is Triton's float ``%`` C's ``fmod`` on this GPU, bit for bit? (not a test; needs a GPU)

The built-in strategist writes ``torch.fmod`` (and ``remainder``/``floor_divide``, which start from
it) as Triton's ``%`` on floats. C's fmod is exact for every pair; a lowering as ``x - y * trunc(x / y)``
is not once the quotient outgrows the significand. This draws fp32 pairs whose quotient spans 1 to
2^40, both signs, and counts the results that differ from ``torch.fmod`` in their bits, for ``%``
and for libdevice's ``fmod``.

Usage: python bench/fmod_exact.py [--n 4000000] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def percent_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    tl.store(out_ptr + offs, x % y, mask=ok)


@triton.jit
def libdevice_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    tl.store(out_ptr + offs, tl.extra.cuda.libdevice.fmod(x, y), mask=ok)


GENERATED = """import triton
import triton.language as tl


@triton.jit
def generated_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    tl.store(out_ptr + offs, {expression}, mask=ok)
"""


def generated_kernel(folder: Path):
    """The kernel with the expression the strategist writes for ``torch.fmod``."""
    from kernelevo.agent.builtin.expressions import elementwise

    path = folder / "fmod_generated.py"
    path.write_text(GENERATED.format(expression=elementwise("fmod", ["x", "y"])))
    spec = importlib.util.spec_from_file_location("fmod_generated", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generated_kernel


def pairs(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.exp2(torch.empty(n).uniform_(-8, 8, generator=generator)) * torch.where(
        torch.rand(n, generator=generator) < 0.5, -1.0, 1.0)
    quotient = torch.exp2(torch.empty(n).uniform_(0, 40, generator=generator))
    x = y * quotient * torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0)
    return x.float(), y.float()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=4_000_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, y = (t.to(device) for t in pairs(args.n, torch.Generator().manual_seed(0)))
    want = torch.fmod(x, y)
    result = {"pairs": args.n, "gpu": torch.cuda.get_device_name() if device == "cuda" else "interpreter",
              "triton": triton.__version__}
    folder = Path(tempfile.mkdtemp(prefix="fmod-"))
    kernels = [("percent", percent_kernel), ("generated", generated_kernel(folder))]
    if not os.environ.get("TRITON_INTERPRET"):  # the interpreter has no libdevice
        kernels.append(("libdevice_fmod", libdevice_kernel))
    for name, kernel in kernels:
        got = torch.empty_like(x)
        kernel[(triton.cdiv(args.n, 1024),)](x, y, got, args.n, BLOCK=1024)
        differ = (got.view(torch.int32) != want.view(torch.int32)) & ~(got.isnan() & want.isnan())
        quotient = (x / y).abs()
        worst = differ.nonzero().flatten()[:3].tolist()
        result[name] = {"differ": int(differ.sum()),
                        "differ_quotient_below_2_24": int((differ & (quotient < 2**24)).sum()),
                        "examples": [(x[i].item(), y[i].item(), got[i].item(), want[i].item()) for i in worst]}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
