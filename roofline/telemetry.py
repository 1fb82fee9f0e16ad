"""GPU telemetry through NVML, sampled in a thread while the timed window runs.

`summarize` is pure, so recorded samples can be summarised and tested without a GPU."""

import threading
import time
from typing import Any

# NVML clock-event ("throttle") reason bits, as nvml.h defines them.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def nvml_handle(index: int, uuid: str | None = None):
    import pynvml

    pynvml.nvmlInit()
    if uuid:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except pynvml.NVMLError:
            pass  # fall back to the index (same order unless CUDA_VISIBLE_DEVICES reorders)
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def read_sample(handle) -> dict[str, float]:
    import pynvml

    return {
        "t": time.perf_counter(),
        "sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "mem_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000,
        "temp_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "reasons": pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
    }


class Sampler:
    """Context manager: samples NVML every `interval_s` until exit; `.samples` holds them."""

    def __init__(self, handle, interval_s: float = 0.01, read=read_sample) -> None:
        self.handle, self.interval_s, self.read = handle, interval_s, read
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(self.read(self.handle))
            if self._stop.wait(self.interval_s):
                break

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def summarize(samples: list[dict[str, float]], max_sm_mhz: float | None) -> dict[str, Any]:
    """Means over the window (power is what NVML reports, averaged by the driver), the
    hottest temperature, and every throttle reason seen in any sample."""
    if not samples:
        return {}
    n = len(samples)
    mask = 0
    for s in samples:
        mask |= int(s["reasons"])
    window = samples[-1]["t"] - samples[0]["t"]
    mean_power = sum(s["power_w"] for s in samples) / n
    return {
        "samples": n,
        "window_s": window,
        "sm_clock_mhz": sum(s["sm_mhz"] for s in samples) / n,
        "sm_clock_min_mhz": min(s["sm_mhz"] for s in samples),
        "sm_clock_max_mhz": max_sm_mhz,
        "mem_clock_mhz": sum(s["mem_mhz"] for s in samples) / n,
        "power_w": mean_power,
        "temperature_max_c": max(s["temp_c"] for s in samples),
        "throttle_reasons": reason_names(mask),
    }
