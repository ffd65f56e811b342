"""How fast does a device tensor cross between processes as a file? (not a test; needs a GPU)

The judge ships every checked output, and the forensic pass's inputs, as tensor files
(``sandbox/tensor_files.py``). This times, for one fp32 tensor per size, writing it from the GPU and
reading it back onto the GPU, two ways:

- ``pageable``: a fresh host copy per 64 MB slice (``tensor.cpu()``), written with numpy's ``tofile``
  and read with ``fromfile`` (how tensor files crossed before the staging buffer);
- ``staged``: ``tensor_files`` as it is (one page-locked buffer per process, plain system calls).

Each figure is the median of ``--repeats`` rounds; the file lies in ``--folder`` (default: the
system's temporary folder, where the judge's outboxes are) and is removed after each round.

Usage: python bench/tensor_file_probe.py [--sizes 64M,512M] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

SLICE = 64 << 20


def _pageable_write(t, path: Path) -> None:  # noqa: ANN001 - a CUDA tensor
    import torch

    raw = t.contiguous().reshape(-1).view(torch.uint8)
    with open(path, "wb") as handle:
        for start in range(0, raw.numel(), SLICE):
            raw[start:start + SLICE].cpu().numpy().tofile(handle)


def _pageable_read(path: Path, like):  # noqa: ANN001, ANN202 - a CUDA tensor
    import numpy as np
    import torch

    raw = torch.empty(like.numel() * like.element_size(), dtype=torch.uint8, device=like.device)
    with open(path, "rb") as handle:
        done = 0
        while done < raw.numel():
            piece = np.fromfile(handle, dtype=np.uint8, count=min(SLICE, raw.numel() - done))
            raw[done:done + piece.size].copy_(torch.from_numpy(piece))
            done += piece.size
    return raw.view(like.dtype).reshape(like.shape)


def _staged_write(t, path: Path) -> None:  # noqa: ANN001
    from kernelevo.sandbox import tensor_files

    tensor_files.write_tensor(t, path.parent, path.name)


def _staged_read(path: Path, like):  # noqa: ANN001, ANN202
    from kernelevo.sandbox import tensor_files

    meta = tensor_files.TensorFile(file=path.name, dtype="float32", shape=list(like.shape))
    return tensor_files.read_tensor(meta, path.parent, "cuda", 1 << 40)


def _timed(fn, *args):  # noqa: ANN001, ANN002, ANN202 - (seconds, what fn returned)
    import torch

    torch.cuda.synchronize()
    began = time.perf_counter()
    result = fn(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - began, result


def measure(values: int, repeats: int, folder: Path) -> list[dict]:
    import torch

    t = torch.randn(values, device="cuda")
    rows = []
    for way, write, read in (("pageable", _pageable_write, _pageable_read), ("staged", _staged_write, _staged_read)):
        writes, reads = [], []
        for _ in range(repeats):
            path = folder / f"probe-{way}.bin"
            writes.append(_timed(write, t, path)[0])
            seconds, back = _timed(read, path, t)
            reads.append(seconds)
            assert torch.equal(back, t), f"{way}: the tensor read back differs"
            del back
            path.unlink()
        gb = values * 4 / 1e9
        rows.append({"values": values, "gb": round(gb, 3), "way": way, "write_s": round(statistics.median(writes), 4),
                     "read_s": round(statistics.median(reads), 4),
                     "write_gbps": round(gb / statistics.median(writes), 2),
                     "read_gbps": round(gb / statistics.median(reads), 2)})
    return rows


def _count(text: str) -> int:
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * scale[text[-1]] if text[-1] in scale else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64M,512M", help="fp32 values per tensor, comma-separated (K, M, G)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per size and way; the median is shown")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the file lies (default: the temporary folder, where the judge's outboxes are)")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        parser.exit(3, "error: this probe needs a GPU (it times device tensors crossing as files)\n")
    try:
        sizes = [_count(size) for size in args.sizes.split(",")]
    except (ValueError, IndexError):
        parser.error(f"--sizes {args.sizes!r}: give counts such as 64M,512M")
    rows = [row for values in sizes for row in measure(values, args.repeats, args.folder)]
    if args.json:
        print(json.dumps(rows))
        return
    print("| values | GB | way | write s | read s | write GB/s | read GB/s |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['values']} | {r['gb']} | {r['way']} | {r['write_s']} | {r['read_s']} | {r['write_gbps']} | "
              f"{r['read_gbps']} |")


if __name__ == "__main__":
    main()
