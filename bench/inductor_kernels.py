"""What torch.compile generates for built-in tasks (not a test): its Triton kernels and the launch
configurations its autotuner picked, next to do_bench times of eager and the compiled module.

We compare our templates against these when torch.compile wins: same bytes, so the difference is in
the kernel (indexing, masks, eviction hints, tile shape, warps).

Usage: python bench/inductor_kernels.py --out DIR TASK [TASK ...]   (needs a GPU)
Writes DIR/TASK/*.py (the kernels), DIR/TASK/*.best_config (the autotuner's picks) and DIR/times.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path


def dump(name: str, out: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix=f"inductor-{name}-"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    import torch
    import triton.testing

    from kernelevo.tasks.loader import instantiate, load_task

    task = load_task(name)
    model, inputs = instantiate(task, device="cuda")
    torch._dynamo.reset()
    compiled = torch.compile(model)
    with torch.no_grad():
        compiled(*inputs)
        times = {label: triton.testing.do_bench(lambda f=f: f(*inputs), return_mode="median")
                 for label, f in (("eager_ms", model), ("compile_ms", compiled))}
    target = out / name
    target.mkdir(parents=True, exist_ok=True)
    for path in cache.rglob("*"):
        if path.suffix in (".py", ".best_config") and path.is_file():
            shutil.copy(path, target / f"{path.parent.name}-{path.name}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    times = {name: dump(name, args.out) for name in args.tasks}
    (args.out / "times.json").write_text(json.dumps(times, indent=2))
    for name, t in times.items():
        print(f"{name}: eager {t['eager_ms']:.3f} ms, torch.compile {t['compile_ms']:.3f} ms")


if __name__ == "__main__":
    main()
