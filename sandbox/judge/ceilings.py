"""Measured limits of a GPU, for the speed-of-light check and the roofline.

Measured once per GPU (name, driver, torch version) by the clean reference process and cached:
device-to-device copy bandwidth (bytes read plus bytes written) and the peak of a large torch matmul
per dtype. ``tf32`` is the fp32 ceiling: fp32-accurate products on tensor cores (3xTF32, or bf16x3
and bf16x6, which split each operand into bf16 parts) run well below it, so no fp32 candidate can
legitimately beat it.
"""

from __future__ import annotations

import statistics

import torch

from kernelevo.sandbox.models import Ceilings

_MATMUL_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "tf32": torch.float32}


def _median_ms(fn, runs: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    fn()
    torch.cuda.synchronize()
    for _ in range(runs):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_copy_gbps(nbytes: int = 2 * 1024**3) -> float:
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), runs=20)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def measure_matmul_tflops(dtype_name: str, n: int = 8192) -> float:
    dtype = _MATMUL_DTYPES[dtype_name]
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    try:
        ms = _median_ms(lambda: a @ b, runs=10)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * n**3 / (ms * 1e-3) / 1e12


def measure_ceilings() -> Ceilings:
    """Measure this process's current GPU (a few seconds)."""
    props = torch.cuda.get_device_properties()
    return Ceilings(
        device=torch.cuda.get_device_name(),
        copy_gbps=measure_copy_gbps(),
        matmul_tflops={name: measure_matmul_tflops(name) for name in _MATMUL_DTYPES},
        sms=props.multi_processor_count,
        shared_bytes_per_sm=getattr(props, "shared_memory_per_multiprocessor", None),
        l2_bytes=getattr(props, "L2_cache_size", None),
        capability=f"{props.major}.{props.minor}",
    )


def compute_ceiling_tflops(ceilings: Ceilings, dtype: str) -> float:
    """The fastest matmul rate that can reach ``dtype``'s accuracy."""
    key = {"float32": "tf32", "float64": "tf32"}.get(dtype, dtype)
    return ceilings.matmul_tflops.get(key) or max(ceilings.matmul_tflops.values())


def speed_of_light_ms(flops: float, nbytes: float, ceilings: Ceilings, dtype: str) -> tuple[float, str]:
    """The floor of one call in ms and what sets it ("memory" or "compute")."""
    memory_ms = nbytes / (ceilings.copy_gbps * 1e9) * 1e3
    compute_ms = flops / (compute_ceiling_tflops(ceilings, dtype) * 1e12) * 1e3
    return (memory_ms, "memory") if memory_ms >= compute_ms else (compute_ms, "compute")
