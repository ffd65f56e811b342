"""What torch.compile makes of the reference, for the model to read (advice, never a verdict).

Runs as a job of its own that imports the task's reference only, never a candidate: it compiles the
reference with inductor into a cache of its own, calls it once, and writes the code inductor
generated (on a GPU its Triton kernels, on the CPU its C++, each with the wrapper that launches them)
to one file. Usage: ``python -m kernelevo.sandbox.advice.inductor_dump JOB.json``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def generated_code(cache: Path) -> str:
    """Inductor's output code in ``cache``: the files that launch kernels or define them, in order."""
    parts = []
    for path in sorted(cache.rglob("*.py")):
        text = path.read_text(errors="replace")
        if "def call(" in text or "@triton.jit" in text:
            parts.append(f"# ---- {path.name}\n{text.strip()}\n")
    return "\n".join(parts)


def main(job_file: str) -> int:
    job = json.loads(Path(job_file).read_text())
    cache = Path(job["cache"])
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)  # before torch is imported: its own, nothing shared
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    import torch

    from kernelevo.tasks.loader import instantiate, load_task

    task = load_task(job["task"], job["size"])
    if job.get("dtype"):
        task.dtype = job["dtype"]
    model, inputs = instantiate(task, device=job["device"])
    with torch.no_grad():
        torch.compile(model.eval())(*inputs)
    Path(job["result"]).write_text(generated_code(cache))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
