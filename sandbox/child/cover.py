"""The launch cover: one kernel, queued right before a timed call's start event, that evicts the L2
cache and then holds every SM of the GPU for a fixed time.

Why it exists. While the cover runs, the host launches the call, so the launch cost a Python
``forward`` pays is hidden the way a busy GPU's queue hides it in a model or in ``do_bench``'s loop.

Why one kernel of our own and not ``zero_()`` then ``torch.cuda._sleep``: a one-thread sleep leaves
every SM but one idle, and work the call puts on another stream (one that does not wait for the
start event) would run there and be finished before the clock starts. This kernel's blocks fill
every SM's thread slots (or its registers) from the moment it starts, so no other kernel's block can
start until it ends. And it measures itself: when another kernel's blocks already held SMs as it
launched, its own blocks start late and it ends late; the excess over its uncontended length is
added to the call's time (:meth:`LaunchCover.excess_ms`).

Bytes moved: the flush buffer (twice the L2 cache, at least 256 MB) written once, 0.07-0.09 ms at 3-4 TB/s,
then written on, wrapping around, for the rest of ``COVER_NS``: about 1 GB per call.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator

import torch
import triton
import triton.language as tl

_perf_counter = time.perf_counter

COVER_NS = 260_000
"""How long the cover holds the GPU, in nanoseconds of the GPU's global timer (so the same at any
clock): the L2 flush plus about 0.2 ms in which the host launches the call. A process that just woke
up to answer a request launches from Python two to four times slower than one in a loop; host work
shorter than this is hidden, longer host work counts (the user pays it)."""

COVER_OPTIONS = {"num_warps": 16, "maxnreg": 32}
"""512 threads a block, at most 32 registers each: four blocks fill an SM's 2048 thread slots and its
65536 registers."""
PROBE_GAP_NS = 10_000
"""The gap before the probe, on the global timer (a sleep counted in SM cycles would lengthen as the
clocks drop under load, and every call would read longer than the calibration)."""
PROBE_LIMIT_NS = 20_000_000
"""The most the probe waits for the GPU to be free of other work; work running longer is counted
up to here (and the host synchronize after it sees the rest)."""
CALIBRATION_RUNS = 7
HOLD_NS = 200_000
"""How long the hold before the cover keeps every SM busy: longer than a process that just woke up
takes to launch the cover (up to a tenth of a millisecond of host time)."""
LAUNCH_CREDIT_MS = 0.15
"""At most this much of the host's time to launch the hold is taken as the GPU waiting for it (a
cold launch measured up to 0.1 ms): a longer stall there (another thread holding the interpreter)
cannot hide someone else's work."""
WAIT_FLOOR_MS = 0.05
"""A wait for the hold's start beyond the launch's host time that is not counted: host and GPU
clocks do not line up to the microsecond (measured: the difference wanders by 0.01 ms)."""
EXCESS_FLOOR_MS = 0.002
"""Jitter of an uncontended cover (block scheduling, timer granularity) that is not counted."""


@triton.jit
def _now():
    """The GPU's global nanosecond timer."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _cover_kernel(buffer, words, ns, BLOCK: tl.constexpr):
    """Each program zeroes its share of the flush buffer (grid-strided), then keeps zeroing blocks of
    it, wrapping around, until ``ns`` have passed since it started. Memory traffic to the end, not a
    quiet spin: device memory left idle for a fraction of a millisecond serves the next kernel
    slowly at first, and that kernel is the one timed."""
    began = _now()
    zero = tl.zeros([BLOCK], dtype=tl.int32)
    first = tl.program_id(0) * BLOCK
    stride = tl.num_programs(0) * BLOCK
    for start in range(first, words, stride):
        offsets = start + tl.arange(0, BLOCK)
        tl.store(buffer + offsets, zero, mask=offsets < words)
    start = first
    now = _now()
    while now - began < ns:
        offsets = start + tl.arange(0, BLOCK)
        tl.store(buffer + offsets, zero, mask=offsets < words)
        start += stride
        if start >= words:
            start = first
        now = _now()


@triton.jit
def _probe_kernel(arrivals, generation, limit_ns, PROGRAMS: tl.constexpr):
    """A barrier across the whole grid: each program (as large as a cover program) arrives, then
    waits until every program of the grid has arrived, so the probe ends only once all of its
    programs were resident at the same moment: once no block of any other kernel held a slot on
    any SM. The last to arrive resets the count and opens the next generation. One atomic per
    program (a scalar atomic runs once per program)."""
    began = _now()
    opened = tl.atomic_add(generation, 0)
    arrived = tl.atomic_add(arrivals, 1)
    if arrived == PROGRAMS - 1:
        tl.atomic_xchg(arrivals, 0)
        tl.atomic_add(generation, 1)
    else:
        # plain volatile reads while waiting: atomics from every program on one address would queue
        # the last arrival's own update behind them
        current = tl.load(generation, volatile=True)
        while (current == opened) & (_now() - began < limit_ns):
            current = tl.load(generation, volatile=True)


def _warp_registers(registers_per_thread: int) -> int:
    """Registers the GPU allocates per warp (in units of 256)."""
    return -(-registers_per_thread * 32 // 256) * 256


def blocks_per_sm(threads: int, registers: int, props: object) -> tuple[int, bool]:
    """How many cover blocks fit on one SM at once, and whether they then leave no room for a warp of
    any other kernel (too few thread slots, or too few registers for one more warp)."""
    max_threads = getattr(props, "max_threads_per_multi_processor", 2048)
    max_registers = getattr(props, "regs_per_multiprocessor", 65536)
    per_block = _warp_registers(max(registers, 1)) * (threads // 32)
    fits = max(1, min(max_threads // threads, max_registers // per_block, 32))
    spare_threads = max_threads - fits * threads
    spare_registers = max_registers - fits * per_block
    return fits, fits == 32 or spare_threads < 32 or spare_registers < _warp_registers(16)


@contextlib.contextmanager
def _private_compile_cache() -> Iterator[None]:
    """Compile into a folder of this process's own: the shared compile cache is writable by every
    candidate, and one must not be able to plant a cover that does nothing for the next."""
    folder = tempfile.mkdtemp(prefix="kernelevo-cover-")
    before = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)


class LaunchCover:
    """The cover for one device: compiled and sized once, then queued before each timed call."""

    def __init__(self, device: str = "cuda") -> None:
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024
        self.flush = torch.empty(max(2 * l2, 256 * 1024 * 1024), dtype=torch.uint8, device=device)
        self.words = self.flush.view(torch.int32)
        threads = COVER_OPTIONS["num_warps"] * 32
        self.block = threads * 4
        self.began = torch.cuda.Event(enable_timing=True)
        self.probed = torch.cuda.Event(enable_timing=True)
        self.waited = torch.cuda.Event(enable_timing=True)
        self.arrivals = torch.zeros(1, dtype=torch.int32, device=device)
        self.generation = torch.zeros(1, dtype=torch.int32, device=device)
        self.uncontended_ms, self.uncontended_probe_ms, self.uncontended_hold_ms = 0.0, 0.0, 0.0
        self.launch_ms = 0.0
        with _private_compile_cache():
            compiled = _cover_kernel.warmup(self.words, self.words.numel(), COVER_NS, BLOCK=self.block,
                                            grid=(1,), **COVER_OPTIONS)
            if hasattr(compiled, "_init_handles"):
                compiled._init_handles()
            self.registers = int(getattr(compiled, "n_regs", 0) or COVER_OPTIONS["maxnreg"])
            per_sm, self.fills_every_sm = blocks_per_sm(threads, self.registers, props)
            self.grid = (props.multi_processor_count * per_sm,)
            # compiled here, in the private cache, not at the first timed call
            _probe_kernel.warmup(self.arrivals, self.generation, PROBE_LIMIT_NS, PROGRAMS=self.grid[0],
                                 grid=self.grid, **COVER_OPTIONS)
            self.uncontended_ms, self.uncontended_probe_ms, self.uncontended_hold_ms = self._calibrate()
        if self.uncontended_probe_ms > PROBE_LIMIT_NS / 2e6:
            # every probe would read as held up: no timing at all rather than every call too slow
            raise RuntimeError(f"the timing probe's barrier did not complete on this GPU "
                               f"({self.uncontended_probe_ms:.3f} ms with nothing else running)")

    def launch(self) -> None:
        """Queue the hold and the cover on the current stream.

        The hold (the same kernel, without flush, spinning ``HOLD_NS`` on every SM) goes first, so
        that ``began``, recorded after it, fires once the cover is queued: the host's time to
        launch the cover (slow in a process that just woke up) does not read as the cover being
        held up, and the cover's delay is measured on the GPU alone. A one-thread sleep there
        would leave the GPU free for work the call queues on a stream that does not wait for the
        start event. ``waited``, recorded before the hold, times how long the hold itself waited
        to start: work that already held the GPU (launched before the call) shows there, beside
        the host's time to launch the hold (``launch_ms``)."""
        began = _perf_counter()
        self.waited.record()
        _cover_kernel[self.grid](self.words, 0, HOLD_NS, BLOCK=self.block, **COVER_OPTIONS)
        self.launch_ms = min((_perf_counter() - began) * 1e3, LAUNCH_CREDIT_MS)
        self.began.record()
        _cover_kernel[self.grid](self.words, self.words.numel(), COVER_NS, BLOCK=self.block, **COVER_OPTIONS)

    def excess_ms(self, start: torch.cuda.Event) -> float:
        """Time in which someone else's kernels held the GPU around the last cover: how much longer
        than uncontended the cover took to reach ``start`` (the call's start event, recorded right
        after it), to the microsecond; plus the hold's wait to start beyond the host's time to
        launch it, when that exceeds ``WAIT_FLOOR_MS``."""
        excess = self.began.elapsed_time(start) - self.uncontended_ms
        wait = self.waited.elapsed_time(self.began) - self.launch_ms - self.uncontended_hold_ms
        return (excess if excess > EXCESS_FLOOR_MS else 0.0) + (wait if wait > WAIT_FLOOR_MS else 0.0)

    def probe(self, stream: torch.cuda.Stream | None = None) -> None:
        """Queue the probe on ``stream`` (the current one if None) right after a call's end event:
        a short gap (one program spinning ``PROBE_GAP_NS``), then a barrier of as many programs as
        the cover (:func:`_probe_kernel`). Work the call queued on another stream becomes ready as
        the call's own work ends; the gap lets it start first. The barrier completes only when its
        programs hold every slot of every SM at once, so any block of that work still running,
        even one per SM, holds it back; it ends at ``probed``."""
        with torch.cuda.stream(stream or torch.cuda.current_stream()):
            _cover_kernel[(1,)](self.words, 0, PROBE_GAP_NS, BLOCK=self.block, **COVER_OPTIONS)
            _probe_kernel[self.grid](self.arrivals, self.generation, PROBE_LIMIT_NS, PROGRAMS=self.grid[0],
                                     **COVER_OPTIONS)
            self.probed.record()

    def tail_ms(self, end: torch.cuda.Event) -> float:
        """How much longer than uncontended the probe took after ``end``: work of the call that was
        still running on another stream when the call returned."""
        excess = end.elapsed_time(self.probed) - self.uncontended_probe_ms
        return excess if excess > EXCESS_FLOOR_MS else 0.0

    def _calibrate(self) -> tuple[float, float, float]:
        end = torch.cuda.Event(enable_timing=True)
        covers, probes, holds = [], [], []
        for _ in range(CALIBRATION_RUNS):
            torch.cuda.synchronize()
            self.launch()
            end.record()
            self.probe()
            self.probed.synchronize()
            covers.append(self.began.elapsed_time(end))
            probes.append(end.elapsed_time(self.probed))
            holds.append(self.waited.elapsed_time(self.began) - self.launch_ms)
        return statistics.median(covers[1:]), statistics.median(probes[1:]), statistics.median(holds[1:])
