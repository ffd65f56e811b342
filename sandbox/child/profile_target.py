"""The program Nsight Compute watches: a candidate's ``forward``, once, between profiler start and stop.

Run in the sandbox (under the GPU's lock) as
``ncu --profile-from-start off ... python -m kernelevo.sandbox.child.profile_target
job.json``. Two warm-up calls first (Triton compiles, caches fill, allocations settle), then one
call inside ``cudaProfilerStart``/``cudaProfilerStop``: ncu sees that call's kernels and nothing of
the input generation. The timing pass never runs under ncu, so its numbers stay clean; what ncu
reports is advice for the model, never a verdict.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

WARMUP_CALLS = 2


def run(job: dict) -> dict:
    """Build the candidate and its inputs as the harness does (same seeds), then the profiled call."""
    import torch

    from kernelevo.sandbox.child.importing import import_candidate
    from kernelevo.sandbox.child.inputs import build_model
    from kernelevo.tasks.loader import import_task_module

    task = import_task_module(Path(job["task"]), job["size"])
    candidate = import_candidate(Path(job["candidate"]))
    dtype = getattr(torch, job["dtype"]) if job.get("dtype") else None
    model = build_model(candidate.ModelNew, task, "cuda", job.get("dtype"), int(job.get("init_seed", 42)))
    torch.manual_seed(job.get("seed", 1))
    with torch.device("cuda"):
        inputs = [x.to("cuda") if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    if dtype is not None:
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            model(*inputs)
        torch.cuda.synchronize()
        cudart = torch.cuda.cudart()
        cudart.cudaProfilerStart()
        model(*inputs)
        torch.cuda.synchronize()
        cudart.cudaProfilerStop()
    return {"ran": True}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    try:
        result = run(job)
    except Exception as exc:
        result = {"ran": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    Path(job["result"]).write_text(json.dumps(result))
    return 0 if result["ran"] else 1


if __name__ == "__main__":
    sys.exit(main())
