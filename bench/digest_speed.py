"""How long the output digest of one timed call takes, by output size, on this machine's device.

A timed call commits to its output with a SHA-256 tree digest (``sandbox/child/digest.py``); the
digest runs outside the timed window but inside the call's wall time, so its cost decides how much
of a verdict goes to hashing. This prints the first call's cost (the GPU kernel's compile and its
check against hashlib) and the median of later calls, per size, as a table or JSON.

    python3 bench/digest_speed.py --sizes-mb 1,64,1024,3600 [--json]
    python3 bench/digest_speed.py --kernel-only --sizes-mb 1024   # the GPU leaf kernel alone

``--kernel-only`` times one level of leaf hashes on the device (``digest_kernel.leaf_hashes``), without
the copy to the host or the tree's other levels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from kernelevo.sandbox.child import digest


def seconds(fn, repeats: int) -> list[float]:
    """Wall seconds of each of ``repeats`` calls of ``fn`` (the device synchronized around each)."""
    out = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mb", default="1,64,1024", help="output sizes in MB, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--kernel-only", action="store_true", help="time the GPU leaf kernel alone")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    first_start = time.perf_counter()
    uses_kernel = device.type == "cuda" and digest.kernel_agrees(device)
    rows = [{"what": "first use: compile and check against hashlib", "s": time.perf_counter() - first_start}]
    for mb in (float(text) for text in args.sizes_mb.split(",")):
        out = torch.rand(int(mb * (1 << 20)) // 4, device=device)
        if args.kernel_only and uses_kernel:
            from kernelevo.sandbox.child import digest_kernel

            words = digest.output_bytes(out)
            times = seconds(lambda data=words: digest_kernel.leaf_hashes(data), args.repeats)
        else:
            times = seconds(lambda value=out: digest.tensor_digest(value, 1, 0), args.repeats)
        rows.append({"what": f"{mb:g} MB fp32", "median_ms": 1e3 * statistics.median(times),
                     "gb_per_s": out.numel() * 4 / statistics.median(times) / 1e9})
        out = None  # freed before the next size is made
    report = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "kernel": uses_kernel, "kernel_only": bool(args.kernel_only and uses_kernel),
              "torch": torch.__version__, "rows": rows}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{report['device']}, digest kernel in use: {uses_kernel}")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
