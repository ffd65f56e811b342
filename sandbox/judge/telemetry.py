"""NVML telemetry: clocks, temperature, power, energy and throttle reasons, or "not available"."""

from __future__ import annotations

from typing import Any

_REASONS = {
    "GpuIdle": "idle",
    "ApplicationsClocksSetting": "application clocks setting",
    "SwPowerCap": "software power cap",
    "HwSlowdown": "hardware slowdown",
    "SyncBoost": "sync boost",
    "SwThermalSlowdown": "software thermal slowdown",
    "HwThermalSlowdown": "hardware thermal slowdown",
    "HwPowerBrakeSlowdown": "hardware power brake",
    "DisplayClockSetting": "display clock setting",
}


def decode_throttle_reasons(mask: int, nvml: Any) -> list[str]:
    """Words for each bit set in NVML's clocks-event (throttle) reason mask."""
    words = []
    for suffix, word in _REASONS.items():
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}", None)
        if bit is None:
            bit = getattr(nvml, f"nvmlClocksThrottleReason{suffix}", None)
        if bit is not None and mask & bit:
            words.append(word)
    return words


def snapshot(index: int = 0, nvml: Any = None) -> dict[str, Any]:
    """One reading of GPU ``index``; ``{"available": False, "reason": ...}`` where NVML is missing."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception as exc:  # no driver, no library: telemetry is optional
        return {"available": False, "reason": f"NVML not available ({type(exc).__name__})"}
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        reading: dict[str, Any] = {"available": True, "name": nvml.nvmlDeviceGetName(handle)}
        probes = {
            "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "energy_mj": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        }
        for key, probe in probes.items():
            try:
                reading[key] = probe()
            except Exception:
                reading[key] = None
        try:
            getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            mask = getter(handle)
            reading["throttle_reasons"] = decode_throttle_reasons(mask, nvml)
        except Exception:
            reading["throttle_reasons"] = None
        return reading
    except Exception as exc:
        return {"available": False, "reason": f"NVML query failed ({type(exc).__name__}: {exc})"}
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def around(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Telemetry for a timed stretch: the reading after it, with the energy it used."""
    if not after.get("available"):
        return after
    result = dict(after)
    if before.get("energy_mj") is not None and after.get("energy_mj") is not None:
        result["energy_used_j"] = (after["energy_mj"] - before["energy_mj"]) / 1000.0
    result.pop("energy_mj", None)
    return result


def gpu_memory_of(pids: set[int], nvml: Any = None) -> int | None:
    """Device memory held by the processes ``pids`` (host pids) over every GPU, as the driver counts
    it; None where NVML cannot say (no driver, or a driver that hides per-process figures)."""
    if not pids:
        return None
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # no driver, no library
        return None
    try:
        held, seen = 0, False
        for index in range(nvml.nvmlDeviceGetCount()):
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(index)):
                used = getattr(proc, "usedGpuMemory", None)
                if proc.pid in pids and isinstance(used, int):
                    held, seen = held + used, True
        return held if seen else 0
    except Exception:
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
