"""The generated kernels' fmod (``expressions.FMOD_EXACT``) is C's fmod exactly, for every pair of
float32 values: quotients past 2^24 (a divisor tiny beside the dividend), past fp32's range, signed
zeros, denormals, infinities and NaNs. Run under Triton's interpreter (in a process of its own, as
TRITON_INTERPRET must be set before Triton decorates anything) against float64 ``np.fmod``, which is
exact for float32 operands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernelevo.agent.builtin import expressions

SCRIPT = '''
import json, math, sys
import numpy as np
import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction


{helper}


@triton.jit
def pairs(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside, other=1.0)
    y = tl.load(y_ptr + offs, mask=inside, other=1.0)
    tl.store(out_ptr + offs, fmod_exact(x, y), mask=inside)


@triton.jit
def by_number(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    x = tl.load(x_ptr + offs, mask=inside, other=1.0)
    tl.store(out_ptr + offs, {by_number}, mask=inside)


def wide(n, gen):
    """Signed values whose exponents span fp32's whole range, denormals included."""
    mantissa = torch.rand(n, generator=gen) + 0.5
    exponent = torch.randint(-140, 120, (n,), generator=gen).float()
    sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    return (sign * mantissa * torch.exp2(exponent)).float()


def wrong(fn, x, y):
    out = torch.empty_like(x)
    fn[((x.numel() + 255) // 256,)](x, y, out, x.numel(), BLOCK=256)
    with np.errstate(all="ignore"):
        want = torch.from_numpy(np.fmod(x.double().numpy(), y.double().numpy())).float()
    same = ((out == want) & (torch.signbit(out) == torch.signbit(want))) | (out.isnan() & want.isnan())
    return [(x[i].item(), y[i].item(), out[i].item(), want[i].item()) for i in torch.nonzero(~same).flatten()[:5]]


gen = torch.Generator().manual_seed(0)
special = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 3.4e38, -3.4e38, 1.0,
                        16777216.0, 16777217.0, 2.0 ** 24 + 2, 1e-38, 0.7, -5.5])
xs = torch.cat([wide(3000, gen), torch.randn(1000, generator=gen) * 1e4, special.repeat_interleave(len(special))])
ys = torch.cat([wide(3000, gen), torch.randn(1000, generator=gen) * 1e-4, special.repeat(len(special))])
q = (xs.double() / ys.double()).abs()
x = wide(1024, gen)
print(json.dumps({{"pairs": wrong(pairs, xs, ys), "by_number": wrong(by_number, x, torch.full_like(x, 0.7)),
                  "past_2_24": int(((q >= 2 ** 24) & (q < 3e38)).sum()), "past_fp32": int((q >= 3.5e38).sum())}}))
'''


def test_fmod_is_exact_for_every_kind_of_pair(tmp_path: Path) -> None:
    script = tmp_path / "fmod_pairs.py"
    script.write_text(SCRIPT.format(helper=expressions.FMOD_EXACT,
                                    by_number=expressions.elementwise("fmod", ["x", 0.7])))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["past_2_24"] > 1000 and found["past_fp32"] > 100  # the old formula's blind spots, tested
    assert found["pairs"] == [] and found["by_number"] == []


def test_a_kernel_calling_fmod_gets_the_helper() -> None:
    body = f"y = {expressions.elementwise('fmod', ['a', 'b'])}\n"
    assert expressions.helpers_for(body) == expressions.FMOD_EXACT + "\n\n"
    assert expressions.helpers_for("y = a + b\n") == ""
    assert expressions.elementwise("fmod", [5.5, 2.0]) == "1.5"
