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

KERNEL = """
@triton.jit
def {name}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    tl.store(out_ptr + offs, {expression}, mask=ok)
"""


def kernels(folder: Path) -> dict:
    """fmod three ways, one kernel each: Triton's float ``%``, the expression the strategist writes for
    ``torch.fmod`` and libdevice's ``fmod`` (not under the interpreter, which has no libdevice)."""
    from kernelevo.agent.builtin.expressions import elementwise

    ways = {"percent": "x % y", "generated": elementwise("fmod", ["x", "y"])}
    if not os.environ.get("TRITON_INTERPRET"):
        ways["libdevice_fmod"] = "tl.extra.cuda.libdevice.fmod(x, y)"
    path = folder / "fmod_kernels.py"
    path.write_text("import triton\nimport triton.language as tl\n" + "".join(
        KERNEL.format(name=name, expression=expression) for name, expression in ways.items()))
    spec = importlib.util.spec_from_file_location("fmod_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: getattr(module, name) for name in ways}


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
    for name, kernel in kernels(Path(tempfile.mkdtemp(prefix="fmod-"))).items():
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
