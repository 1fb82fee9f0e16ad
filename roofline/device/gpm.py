"""What an NVIDIA GPU's own counters say of a timed window: NVML's GPU Performance Monitoring
(GPM: Hopper and newer; no root needed on a host, NVIDIA/DCGM#62, but an unprivileged container
may be refused: NO_PERMISSION, NVIDIA/DCGM#214) sampled at the window's two ends, and the time the
driver held the clock for power or heat over it (nvmlDeviceGetViolationStatus). Every metric
is its value or the driver's refusal, by name: a figure not read is never a zero."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from roofline.device.telemetry import is_mig

# The record's field for each GPM metric, and nvidia-ml-py's name of its id. Activity is counted
# in the SMs' cycles, so each is read beside the window's clock (open-gpu-kernel-modules#1122).
METRICS = {
    "gpm_graphics_busy_pct": "NVML_GPM_METRIC_GRAPHICS_UTIL",  # any engine busy: launch gaps
    "gpm_sm_busy_pct": "NVML_GPM_METRIC_SM_UTIL",  # SMs given work, over all of them
    "gpm_sm_occupancy_pct": "NVML_GPM_METRIC_SM_OCCUPANCY",  # warps resident of the maximum
    "gpm_tensor_active_pct": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",  # the tensor pipes issuing
    "gpm_hmma_active_pct": "NVML_GPM_METRIC_HMMA_TENSOR_UTIL",  # ...half-precision MMA
    "gpm_dram_busy_pct": "NVML_GPM_METRIC_DRAM_BW_UTIL",  # DRAM bandwidth of its maximum
}
# The time the driver held the clock, by cause: the window's share is held_s / window_s.
HELD = {"power_held_s": "NVML_PERF_POLICY_POWER", "thermal_held_s": "NVML_PERF_POLICY_THERMAL"}
# NVML refreshes GPM's counters every 100 ms: two samples closer than that say nothing. The lab
# reads them over windows of MIN_WINDOW_S or more only.
MIN_WINDOW_S = 1.0


@dataclass
class Counters:
    """GPM and the violation counters over one window of one GPU or MIG slice: `begin()` at
    its start, `end()` at its end; then `values` (each field read) and `errors` (each refusal,
    by name). A slice's GPM is its own GPU instance's, asked through its board's handle
    (nvmlGpmMigSampleGet); the clock's held times are the board's, every slice's: not read."""

    handle: Any
    values: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def begin(self) -> None:
        import pynvml

        self._nvml, self._started = pynvml, time.perf_counter()
        mig = is_mig(self.handle)
        if mig:
            self.errors.append(f"{', '.join(HELD)}: not read on a MIG slice (its board's)")
        self._held = {} if mig else {name: self._violation(name) for name in HELD}
        self._samples = self._first_sample(mig)

    def end(self) -> None:
        window_s = time.perf_counter() - self._started
        for name, before in self._held.items():
            after = self._violation(name)
            if before is not None and after is not None:
                self.values[name] = (after - before) / 1e9  # violationTime counts nanoseconds
        if self._samples is None:
            return
        try:
            if window_s < MIN_WINDOW_S:
                self.errors.append(f"GPM: not read over a window under {MIN_WINDOW_S:g} s")
                return
            self._sample(self._samples[1])
            self._metrics()
        except self._nvml.NVMLError as err:
            self.errors.append(f"GPM: {named(self._nvml, err)}")
        finally:
            for sample in self._samples:
                self._nvml.nvmlGpmSampleFree(sample)

    def _violation(self, name: str) -> int | None:
        nvml = self._nvml
        try:
            held = nvml.nvmlDeviceGetViolationStatus(self.handle, getattr(nvml, HELD[name]))
        except nvml.NVMLError as err:
            self.errors.append(f"{name}: {named(nvml, err)}")
            return None
        return int(held.violationTime)

    def _gpm_reader(self, mig: bool) -> tuple[Any, Any]:
        """The handle GPM is asked of, and how one sample is read: a MIG slice's own GPU
        instance through its board's handle (nvmlGpmMigSampleGet), else the GPU's own."""
        nvml = self._nvml
        if not mig:
            sample_get = nvml.nvmlGpmSampleGet
            return self.handle, lambda sample: sample_get(self.handle, sample)
        mig_sample_get = nvml.nvmlGpmMigSampleGet
        board = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self.handle)
        instance = nvml.nvmlDeviceGetGpuInstanceId(self.handle)
        return board, lambda sample: mig_sample_get(board, instance, sample)

    def _first_sample(self, mig: bool) -> tuple[Any, Any] | None:
        """Two sample buffers, the first read now; None where GPM is not read, saying why."""
        nvml = self._nvml
        try:
            device, self._sample = self._gpm_reader(mig)
            if not nvml.nvmlGpmQueryDeviceSupport(device).isSupportedDevice:
                self.errors.append("GPM: this GPU has none (NVML GPM is Hopper's and newer)")
                return None
            samples = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
        except AttributeError:  # an nvidia-ml-py older than GPM, or a driver that lacks it
            self.errors.append("GPM: this nvidia-ml-py or driver has no GPM calls")
            return None
        except nvml.NVMLError as err:
            self.errors.append(f"GPM: {named(nvml, err)}")
            return None
        try:
            self._sample(samples[0])
        except nvml.NVMLError as err:
            self.errors.append(f"GPM: {named(nvml, err)}")
            for sample in samples:
                nvml.nvmlGpmSampleFree(sample)
            return None
        return samples

    def _metrics(self) -> None:
        nvml = self._nvml
        asked = nvml.c_nvmlGpmMetricsGet_t()
        asked.version = nvml.NVML_GPM_METRICS_GET_VERSION
        asked.numMetrics = len(METRICS)
        asked.sample1, asked.sample2 = self._samples
        for slot, constant in zip(asked.metrics, METRICS.values(), strict=False):
            slot.metricId = getattr(nvml, constant)
        nvml.nvmlGpmMetricsGet(asked)
        for slot, name in zip(asked.metrics, METRICS, strict=False):
            if slot.nvmlReturn == nvml.NVML_SUCCESS:
                self.values[name] = float(slot.value)
            else:
                self.errors.append(f"{name}: {named(nvml, nvml.NVMLError(slot.nvmlReturn))}")


def named(nvml: Any, err: Exception) -> str:
    """An NVML refusal by its constant's name and its words: NVML_ERROR_NOT_SUPPORTED (Not
    Supported); a refused permission says where that happens."""
    code = getattr(err, "value", None)
    names = [n for n in dir(nvml) if n.startswith("NVML_ERROR_") and getattr(nvml, n) == code]
    said = f"{names[0]} ({err})" if names else str(err)
    if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", None):
        said += (
            ": this process may not read the GPU's own counters (an unprivileged container is "
            "refused them: NVIDIA/DCGM#214)"
        )
    return said
