"""Nsight Compute: the metrics kernelevo asks for, where ncu is, and the parser of its ``--csv`` output.

ncu's long CSV format has one row per (kernel launch, metric), numbers with thousands separators
("2,147,532,032"), and ``==PROF==``/``==WARNING==``/``==ERROR==`` lines mixed in when it writes to a
terminal. Everything here is pure text handling, tested on captures from the H200
(tests/fixtures/ncu/).
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
from collections import OrderedDict
from pathlib import Path

from kernelevo.sandbox.models import KernelMetrics

STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"

METRICS = [
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__grid_size",
    "launch__block_size",
    "lts__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    f"regex:{STALL_PREFIX}.*_per_issue_active\\.ratio",
]

LAUNCH_LIMIT = 64
"""Kernel launches profiled per pass at most: each is replayed once per counter pass."""

STALL_WORDS = {
    "long_scoreboard": "long scoreboard (waiting on global/local memory)",
    "short_scoreboard": "short scoreboard (shared memory or special math)",
    "barrier": "barrier (waiting at __syncthreads)",
    "math_pipe_throttle": "math pipe throttle (an arithmetic unit is saturated)",
    "mio_throttle": "MIO throttle (shared-memory instruction queue full)",
    "lg_throttle": "LG throttle (too many global/local memory instructions)",
    "wait": "wait (fixed-latency dependency)",
    "not_selected": "not selected (other warps issued: plenty of work)",
    "no_instruction": "no instruction (instruction cache miss)",
    "branch_resolving": "branch resolving",
    "dispatch_stall": "dispatch stall",
    "drain": "drain (waiting for stores at exit)",
    "imc_miss": "immediate constant cache miss",
    "membar": "memory barrier",
    "gmma": "GMMA (waiting on warpgroup matrix multiply)",
    "tex_throttle": "texture throttle",
    "sleeping": "sleeping",
    "misc": "misc",
}


def install_folders(binary: str) -> list[Path]:
    """What a sandboxed job running ``binary`` must be able to read: its own folder, and, because
    the ``ncu`` in CUDA's bin folder and the one at the top of an install are shell scripts that
    look for the real binary, every Nsight Compute install in the usual places."""
    folders = {Path(binary).resolve().parent}
    for pattern in ("/opt/nvidia/nsight-compute/*", "/usr/local/cuda*/nsight-compute*"):
        folders.update(Path(p).resolve() for p in glob.glob(pattern) if Path(p).is_dir())
    if any(f.is_relative_to("/opt/nvidia") for f in folders):
        folders.add(Path("/opt/nvidia/nsight-compute"))
    return sorted(folders)


def _version_key(path: str) -> list[int]:
    """Numbers in a path, compared as numbers: 2025.10 after 2025.3."""
    return [int(n) for n in re.findall(r"\d+", path)]


def find_ncu() -> str | None:
    """The ncu binary: ``KERNELEVO_NCU``, then the PATH, then CUDA's and Nsight's usual places. The
    ``ncu`` in CUDA's bin folder is a shell script that looks for the real one; the real one is
    returned (its folder is what a sandboxed job must be able to read)."""
    explicit = os.environ.get("KERNELEVO_NCU")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    installs = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda*/nsight-compute*/ncu"),
                      key=_version_key)
    real = [p for p in installs if os.access(p, os.X_OK) and not _is_script(p)]
    found = shutil.which("ncu") or next(iter(glob.glob("/usr/local/cuda/bin/ncu")), None)
    if found and not _is_script(found):
        return found
    if real:
        return real[-1]
    return found if found and os.access(found, os.X_OK) else None


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def number(text: str) -> float | None:
    """ncu's number text ("2,147,532,032", "96.55", "n/a") as a float, or None."""
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in ("n/a", "nan"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def layout_problem(text: str) -> str | None:
    """Why ``text`` is not laid out as ncu writes a CSV log (None if it is): its own lines, each
    beginning with ``==``, then one header, then rows of the header's width, every field quoted,
    whole-number IDs, one row per launch and metric. Names ncu copies into its log (a process's path,
    a kernel's name) are the profiled program's to choose: a newline or an unescaped quote in one
    would otherwise let it add or overwrite rows."""
    try:
        return _layout_problem(text.splitlines())
    except csv.Error as exc:
        return f"a line the CSV reader refuses ({exc})"


_WHOLE_NUMBER = re.compile(r"[0-9]+")


def _layout_problem(lines: list[str]) -> str | None:
    headers = [k for k, line in enumerate(lines) if line.startswith('"ID","Process ID"')]
    if not headers and all(line.startswith("==") or not line.strip() for line in lines):
        return None  # ncu's own words only: no kernel was profiled, which the reader of the launches says
    if len(headers) != 1:
        return f"{len(headers)} header lines where ncu writes one"
    start = headers[0]
    stray = next((line for line in lines[:start] if line.strip() and not line.startswith("==")), None)
    if stray is not None:
        return f"a line before the table that ncu does not write: {stray[:80]!r}"
    header = next(csv.reader([lines[start]]))
    metric = header.index("Metric Name") if "Metric Name" in header else None
    seen: set[tuple[str, str]] = set()
    closing = False
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith("=="):
            closing = closing or line.startswith("==")  # ncu's own closing words, after every row
            continue
        if closing:
            return f"a row after ncu's closing lines: {line[:80]!r}"
        row = next(csv.reader([line]), [])
        if (len(row) != len(header) or not _WHOLE_NUMBER.fullmatch(row[0]) or not _WHOLE_NUMBER.fullmatch(row[1])
                or _quoted(row) != line or any(not field.isprintable() for field in row)):
            return f"a row that is not ncu's: {line[:80]!r}"
        key = (row[0], row[metric] if metric is not None else "")
        if key in seen:
            return f"launch {row[0]} reported twice for {key[1] or 'the same metric'}"
        seen.add(key)
    return None


def _quoted(row: list[str]) -> str:
    """``row`` as ncu writes it: every field in double quotes, quotes inside doubled."""
    return ",".join('"' + field.replace('"', '""') + '"' for field in row)


def _csv_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith('"'))


def parse_launches(text: str) -> list[dict]:
    """One dict per profiled launch: ``{"id", "name", "block", "grid", "metrics": {name: float}}``."""
    launches: OrderedDict[str, dict] = OrderedDict()
    for row in csv.DictReader(io.StringIO(_csv_lines(text))):
        if "Metric Name" not in row or row.get("ID") in (None, "ID"):
            continue
        try:
            launch_id = int(row["ID"])
        except ValueError:
            continue  # a line of ncu's own that happens to start with a quote
        launch = launches.setdefault(row["ID"], {"id": launch_id, "name": row.get("Kernel Name", "?"),
                                                 "block": row.get("Block Size", ""), "grid": row.get("Grid Size", ""),
                                                 "metrics": {}})
        value = number(row.get("Metric Value", ""))
        if value is not None:
            launch["metrics"][row["Metric Name"]] = value
    return list(launches.values())


def launch_streams(text: str) -> dict[int, str]:
    """The stream each profiled launch ran on, by launch id."""
    streams: dict[int, str] = {}
    for row in csv.DictReader(io.StringIO(_csv_lines(text))):
        if row.get("ID") not in (None, "ID") and "Stream" in row:
            try:
                streams[int(row["ID"])] = row["Stream"]
            except ValueError:
                continue
    return streams


def short_name(name: str) -> str:
    """A kernel's name without C++ template and argument noise (``void at::foo<4, ...>(int)`` -> ``at::foo``)."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth, out = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip() or name


def summarize(launches: list[dict]) -> list[KernelMetrics]:
    """Launches of the same kernel folded together (times summed, rates time-weighted), slowest first."""
    groups: OrderedDict[str, list[dict]] = OrderedDict()
    for launch in launches:
        groups.setdefault(short_name(launch["name"]), []).append(launch)
    kernels = []
    for name, group in groups.items():
        times = [g["metrics"].get("gpu__time_duration.sum", 0.0) for g in group]
        total_ns = sum(times)

        def weighted(metric: str, group: list[dict] = group, times: list[float] = times,
                     total_ns: float = total_ns) -> float | None:
            pairs = [(g["metrics"][metric], t) for g, t in zip(group, times, strict=True) if metric in g["metrics"]]
            if not pairs:
                return None
            if total_ns <= 0:
                return sum(v for v, _ in pairs) / len(pairs)
            return sum(v * t for v, t in pairs) / sum(t for _, t in pairs)

        first = group[0]["metrics"]
        stalls = {}
        for metric in first:
            if metric.startswith(STALL_PREFIX) and metric.endswith(STALL_SUFFIX):
                reason = metric[len(STALL_PREFIX):-len(STALL_SUFFIX)]
                value = weighted(metric)
                if value is not None:
                    stalls[reason] = round(value, 3)
        shared = sum(first.get(m, 0.0) for m in ("launch__shared_mem_per_block_static",
                                                  "launch__shared_mem_per_block_dynamic"))
        read = sum(g["metrics"].get("dram__bytes_read.sum", 0.0) for g in group)
        written = sum(g["metrics"].get("dram__bytes_write.sum", 0.0) for g in group)
        kernels.append(KernelMetrics(
            name=name, launches=len(group), duration_us=round(total_ns / 1000.0, 3),
            dram_pct=weighted("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            sm_pct=weighted("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            achieved_occupancy_pct=weighted("sm__warps_active.avg.pct_of_peak_sustained_active"),
            theoretical_occupancy_pct=first.get("sm__maximum_warps_per_active_cycle_pct"),
            registers=int(first["launch__registers_per_thread"]) if "launch__registers_per_thread" in first
            else None,
            shared_bytes=int(shared), l2_hit_pct=weighted("lts__t_sector_hit_rate.pct"),
            dram_bytes=read + written, block=group[0]["block"], grid=group[0]["grid"], stalls=stalls,
        ))
    kernels.sort(key=lambda k: -k.duration_us)
    return kernels


def parse(text: str) -> list[KernelMetrics]:
    """ncu's ``--csv`` output (a log file or captured stdout) as per-kernel summaries."""
    return summarize(parse_launches(text))


def refusal(log: str) -> str | None:
    """Why ncu could not profile, in words, from its log; None when it did not say it failed."""
    text = log or ""
    if "ERR_NVGPUCTRPERM" in text:
        return ("ncu was refused the GPU's performance counters (ERR_NVGPUCTRPERM): run as root or load the "
                "driver with NVreg_RestrictProfilingToAdminUsers=0")
    if "LibraryNotLoaded" in text or "Failed to initialize the profiler" in text:
        return "ncu cannot read hardware counters on this machine (the profiler did not initialise)"
    if "Failed to find metric" in text or "Invalid metric" in text:
        line = next((line for line in text.splitlines() if "metric" in line.lower() and "==ERROR==" in line), "")
        return f"this ncu does not know a metric kernelevo asks for: {line.strip()[:200]}"
    if "No kernels were profiled" in text:
        return "no kernel ran in the profiled call (is the candidate launching anything on the GPU?)"
    lines = text.splitlines()
    first = next((k for k, line in enumerate(lines) if line.startswith("==ERROR==")), None)
    if first is None:
        return None
    # an error often ends in a colon and gives its cause on the lines that follow
    said = [lines[first][9:].strip()] + [line.strip() for line in lines[first + 1:first + 4]
                                          if line.strip() and not line.startswith("==")]
    return "ncu failed: " + " ".join(said)[:300]
