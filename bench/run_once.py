"""Each candidate file run twice on the task's inputs, nothing timed: a process for a profiler to watch
(not a test; needs a GPU).

Usage:
  ncu --section SpeedOfLight -k regex:conv_kernel -c 4 \\
      python3 bench/run_once.py SUITE/level1/75_...py bench/variants/l1_75_seed0_5949f37.py
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    import torch

    from kernelevo.tasks.loader import instantiate, instantiate_candidate, load_task

    task = load_task(sys.argv[1])
    _, inputs = instantiate(task, device="cuda")
    with torch.no_grad():
        for name in sys.argv[2:]:
            fn = instantiate_candidate(task, Path(name), "cuda")
            fn(*inputs)
            fn(*inputs)
            torch.cuda.synchronize()
            print("ran", name)


if __name__ == "__main__":
    main()
