"""A GPU probe (not a test): the candidate's ReLU timed in-process against do_bench, then one verdict
with the forensic pass, printing every check and the tail of every job's log."""
import importlib.util
import statistics
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from kernelevo.sandbox.child.inputs import InputBuffers  # noqa: E402
from kernelevo.sandbox.child.timed import TimedCall, warm_up  # noqa: E402

params = Path("/proc/driver/nvidia/params")
print([line for line in params.read_text().splitlines() if "Profiling" in line] if params.exists() else "no params")
n = 9_000_000
spec = importlib.util.spec_from_file_location("candidate", ROOT / "tests/candidates/ok_relu_empty.py")
candidate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(candidate)
model = candidate.ModelNew().cuda()
buffers = InputBuffers()
x = buffers.fill([torch.randn(n, device="cuda")])
warm_up(model, x, "cuda", 3, 0.25)
timer = TimedCall("cuda")
rows = [timer(model, buffers.fill([torch.randn(n, device="cuda")]))[1:] for _ in range(100)]
print("in-process TimedCall ms", statistics.median(r[0] for r in rows), "host", statistics.median(r[1] for r in rows))
print("do_bench ms", triton.testing.do_bench(lambda: model(*x), return_mode="median"))
print("eager do_bench ms", triton.testing.do_bench(lambda: torch.relu(*x), return_mode="median"))

