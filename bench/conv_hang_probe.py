"""Does a generated convolution's first seed finish on the GPU? (not a test; needs a GPU)

Renders the built-in strategist's first seed for a KernelBench file and runs it in variants, each in
a process of its own with a watchdog that prints where it waited and exits: as generated; with the
tap-count divisors unguarded (``tl.maximum(n, 1)`` removed: the form that hung every launch of
L1/81, a ConvTranspose2d of stride 5 and dilation 2, at three pipeline stages); with one or two
stages; with TF32 products. Prints the first call's seconds, the second call's, and the largest
difference from the reference's own module.

Usage: python bench/conv_hang_probe.py FILE [--variants as_generated,unguarded,stages1,stages2,tf32]
                                             [--small] [--watchdog 50]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = r"""
import faulthandler, importlib.util, sys, time, torch
sys.path.insert(0, sys.argv[3])
faulthandler.dump_traceback_later(float(sys.argv[2]), exit=True)
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
candidate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(candidate)
task = importlib.util.spec_from_file_location("task", sys.argv[4])
reference = importlib.util.module_from_spec(task)
task.loader.exec_module(reference)
torch.manual_seed(0)
ref = reference.Model(*reference.get_init_inputs()).cuda()
new = candidate.ModelNew(*reference.get_init_inputs()).cuda()
new.load_state_dict(ref.state_dict())
x = [t.cuda() for t in reference.get_inputs()]
if sys.argv[5] == "small":
    x = [t[:2, :, : max(t.shape[2] // 8, 1), : max(t.shape[3] // 8, 1)].contiguous() if t.dim() == 4 else t for t in x]
for label in ("first call", "second call"):
    began = time.time(); out = new(*x); torch.cuda.synchronize()
    print(label, round(time.time() - began, 4), "s", flush=True)
print("max error", (out - ref(*x)).abs().max().item(), flush=True)
"""


def variant(source: str, name: str) -> str:
    if name == "unguarded":
        source = re.sub(r"(?m)^ +n[trs] = tl\.maximum\(n[trs], 1\).*\n", "", source)
        return source.replace("for k in range(0, steps):", "for k in range(0, nt * nr * ns * CHUNKS):")
    if name.startswith("stages"):
        return re.sub(r"num_stages=\d", f"num_stages={name[-1]}", source)
    if name == "tf32":
        return source.replace('"bf16x6")', '"tf32")')
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path)
    parser.add_argument("--variants", default="as_generated,unguarded,stages1,stages2,tf32")
    parser.add_argument("--small", action="store_true", help="the first 2 images and an eighth of each side")
    parser.add_argument("--watchdog", type=float, default=50.0)
    args = parser.parse_args()
    from kernelevo.agent.builtin.policy import seeds
    from kernelevo.agent.builtin.recognize import recognise
    from kernelevo.agent.builtin.templates import render
    from kernelevo.tasks import load_task

    plan = recognise(load_task(str(args.file), "full"))
    source = render(plan, *seeds(plan)[0])
    with tempfile.TemporaryDirectory() as folder:
        for name in args.variants.split(","):
            path = Path(folder) / f"{name}.py"
            path.write_text(variant(source, name))
            done = subprocess.run([sys.executable, "-c", RUN, str(path), str(args.watchdog), str(args.file.parent),
                                   str(args.file), "small" if args.small else "full"],
                                  capture_output=True, text=True, timeout=args.watchdog + 60)
            tail = (done.stdout + done.stderr).strip().splitlines()[-4:]
            print(f"== {name} (exit {done.returncode})", *tail, sep="\n  ", flush=True)


if __name__ == "__main__":
    main()
