"""AMD GPU telemetry through amdsmi (ROCm's SMI library, the `amdsmi` package), behind the
interface the NVML sampler offers (roofline.device.telemetry): the same `Sampler` reads these
fields one by one, the energy counter at both ends and the other processes, and `window_telemetry`
turns its samples into a row's fields unchanged.

amdsmi's Python package loads libamd_smi.so when it is imported: where ROCm is not installed
the import raises (KeyError 'libamd_smi.so', after printing to stdout, which `load` keeps out
of the probe's output). Each call here reads one figure; a call the driver or a VM guest does
not support raises amdsmi's AmdSmiLibraryException, which the sampler records per field.

What amdsmi 7.0's Python API returns (amdsmi/amdsmi_interface.py): clocks in MHz
(amdsmi_get_clock_info), socket power in W (amdsmi_get_power_info's current_socket_power, the
MI300 series'; average_socket_power on earlier GPUs), the power cap in microwatts
(amdsmi_get_power_cap_info), the energy counter as a count of `counter_resolution` microjoules
(amdsmi_get_energy_count), temperatures in degrees C (amdsmi_get_temp_metric), whether a
throttle is active now (amdsmi_get_violation_status, amd-smi's PVIOL and TVIOL), and the metrics
table (amdsmi_get_gpu_metrics_info): each XCD's clock, and the periods each limit held the clock
against its accumulation counter's ("N/A" where the GPU does not report one)."""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.core.depends import GPU_VISIBILITY
from roofline.device import telemetry
from roofline.device.description import NvmlLimits

# amdsmi's violation flags as the NVML clock-event reasons the rows name (telemetry's
# CLOCK_EVENT_REASONS), where they mean the same: package power tracking (PVIOL) is the power
# cap; socket thermal (TVIOL) the software thermal limit; PROCHOT, a voltage regulator's or
# HBM's thermal limit, a hardware thermal slowdown.
VIOLATIONS = {
    "active_ppt_pwr": 0x4,  # sw_power_cap
    "active_socket_thrm": 0x20,  # sw_thermal_slowdown
    "active_prochot_thrm": 0x40,  # hw_thermal_slowdown
    "active_vr_thrm": 0x40,
    "active_hbm_thrm": 0x40,
}
# The metrics table's residency counters (the periods a limit held the clock, against its
# accumulation counter's), by the held time each gives: the power cap (amd-smi's PVIOL); heat,
# the longest of the thermal limits' (they may overlap, so never their sum).
RESIDENCIES = {
    "power_held_s": ("ppt_residency_acc",),
    "thermal_held_s": (
        "socket_thm_residency_acc",
        "prochot_residency_acc",
        "vr_thm_residency_acc",
        "hbm_thm_residency_acc",
    ),
}
# The ROCm kernel driver's device node: a ROCm runtime (a container's too) needs it.
KFD = Path("/dev/kfd")
_loaded: list = []  # amdsmi, initialised, once per process


def load() -> Any:
    """amdsmi, initialised for AMD GPUs (once per process); raises where it cannot be: no
    libamd_smi.so (the import's own error), or no AMD GPU driver (amdsmi_init's)."""
    if _loaded:
        return _loaded[0]
    with contextlib.redirect_stdout(io.StringIO()):  # its import prints where it fails
        import amdsmi
    amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
    _loaded.append(amdsmi)
    return amdsmi


def gpu_count() -> int | None:
    """AMD GPUs amdsmi reports; None when it cannot say but a ROCm driver is here (/dev/kfd:
    then only torch can tell), 0 where neither amdsmi nor a ROCm driver is."""
    try:
        amdsmi = load()
        return len(amdsmi.amdsmi_get_processor_handles())
    except Exception:  # no libamd_smi.so, or amdsmi_init refused: no usable amdsmi here
        return None if KFD.exists() else 0


def architecture(gcn_arch_name: str) -> str:
    """An AMD GPU's architecture from torch's gcnArchName: "gfx942:sramecc+:xnack-" is gfx942
    (the rest are its feature flags)."""
    return gcn_arch_name.split(":")[0]


def pci_address(index: int) -> str | None:
    """The PCI address of the GPU torch calls `index`, as amdsmi writes one ("0000:c1:00"), from
    torch's device properties; None where this torch does not say."""
    import torch

    props = torch.cuda.get_device_properties(index)
    try:
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}"
    except AttributeError:
        return None


def open_gpu(uuid: str | None, index: int) -> Any:
    """amdsmi's handle of the GPU torch calls `index` with this UUID: by its PCI address, which
    torch and amdsmi read alike (their UUIDs differ before amdsmi 7.1, rocm-systems PR 3614, and
    a container's amdsmi lists every GPU of the host); else by UUID; else by index, only where
    nothing renumbered the GPUs torch sees and amdsmi lists as many (its order is the host's)."""
    amdsmi = load()
    handles = amdsmi.amdsmi_get_processor_handles()
    address = pci_address(index)
    for handle in handles:
        try:
            if address and amdsmi.amdsmi_get_gpu_device_bdf(handle).startswith(address):
                return handle
        except amdsmi.AmdSmiException:
            continue
    wanted = (uuid or "").lower().removeprefix("gpu-")
    for handle in handles:
        try:
            if wanted and amdsmi.amdsmi_get_gpu_device_uuid(handle).lower() == wanted:
                return handle
        except amdsmi.AmdSmiException:
            continue
    import torch

    renumbered = [name for name in GPU_VISIBILITY if os.environ.get(name)]  # amdsmi lists all
    if not renumbered and len(handles) == torch.cuda.device_count() and index < len(handles):
        return handles[index]
    raise LookupError(
        f"amdsmi has no GPU at torch's PCI address {address} nor with its UUID {uuid}, and its "
        "order cannot stand in for it "
        f"({', '.join(renumbered) or 'a different GPU count'})"
    )


def limits(uuid: str | None, index: int) -> NvmlLimits:
    """What amdsmi says of one GPU that the probe records: driver, power cap, maximum clocks; a
    field it refuses is left out and named in `smi_error`."""
    try:
        amdsmi = load()
        handle = open_gpu(uuid, index)
    except Exception as err:  # amdsmi missing or refusing: keep what torch told us
        return {"smi_error": f"amdsmi: {telemetry.said(err)}"}
    reads: dict[str, Callable[[], Any]] = {
        "driver": lambda: amdsmi.amdsmi_get_gpu_driver_info(handle)["driver_version"],
        "power_limit_w": lambda: amdsmi.amdsmi_get_power_cap_info(handle)["power_cap"] / 1e6,
        "max_sm_clock_mhz": lambda: clock(handle, "GFX", "max_clk"),
        "max_mem_clock_mhz": lambda: clock(handle, "MEM", "max_clk"),
    }
    out, errors = telemetry.each_read(reads)
    if errors:
        out["smi_error"] = "amdsmi: " + errors
    return out  # type: ignore[return-value]


def clock(handle: Any, which: str, key: str = "clk") -> float:
    """A clock in MHz: GFX (the compute clock, NVML's SM clock) or MEM (HBM)."""
    amdsmi = load()
    value = amdsmi.amdsmi_get_clock_info(handle, getattr(amdsmi.AmdSmiClkType, which))[key]
    if value == "N/A":
        raise LookupError(f"amdsmi reports no {which} {key}")
    return value


def lowest_xcd_mhz(handle: Any) -> float:
    """The compute clock as AMD reads an MI300X's: the lowest of its XCDs' current clocks (each
    compute die runs its own; the sampler's median of these is AMD's "lowest XCD's median
    clock"). A GPU whose metrics table has no per-XCD clock: its GFX clock."""
    amdsmi = load()
    try:
        clocks = amdsmi.amdsmi_get_gpu_metrics_info(handle)["current_gfxclks"]
    except amdsmi.AmdSmiException:  # a VM guest may refuse the table: Counters names it
        clocks = []
    known = [c for c in clocks if c != "N/A"]
    return min(known) if known else clock(handle, "GFX")  # MHz, an int as amdsmi gives it


def power_w(handle: Any) -> float:
    """Socket power now, in W: current_socket_power on the MI300 series, average_socket_power
    where only that is reported ("N/A": not reported)."""
    amdsmi = load()
    info = amdsmi.amdsmi_get_power_info(handle)
    for key in ("current_socket_power", "average_socket_power"):
        if info.get(key) not in (None, "N/A"):
            return float(info[key])
    raise LookupError("amdsmi reports no socket power")


def temperature_c(handle: Any) -> float:
    amdsmi = load()
    return amdsmi.amdsmi_get_temp_metric(
        handle, amdsmi.AmdSmiTemperatureType.HOTSPOT, amdsmi.AmdSmiTemperatureMetric.CURRENT
    )


def reasons(handle: Any) -> int:
    """What holds the clock now, as NVML's clock-event bits (VIOLATIONS)."""
    amdsmi = load()
    status = amdsmi.amdsmi_get_violation_status(handle)
    mask = 0
    for key, bit in VIOLATIONS.items():
        if status.get(key) is True:  # "N/A" where this GPU does not report it
            mask |= bit
    return mask


def fields() -> dict[str, Callable[[Any], float]]:
    """What one sample reads, field by field, under the NVML sampler's names."""
    return {
        "sm_mhz": lowest_xcd_mhz,
        "mem_mhz": lambda h: clock(h, "MEM"),
        "power_w": power_w,
        "temp_c": temperature_c,
        "reasons": reasons,
    }


def energy_j(handle: Any) -> float:
    """The energy counter in joules: its count times its resolution (microjoules)."""
    amdsmi = load()
    count = amdsmi.amdsmi_get_energy_count(handle)
    return count["energy_accumulator"] * count["counter_resolution"] / 1e6


def processes(handle: Any) -> list[dict]:
    """Every process using the GPU, as amdsmi lists them (name, pid, mem, ...)."""
    return list(load().amdsmi_get_gpu_process_list(handle))


def other_processes(handle: Any, own_pids: set[int] = frozenset()) -> list[str]:
    """Other processes on the GPU: a shared GPU measures less than its own."""
    found = []
    for process in processes(handle):
        if process["pid"] == os.getpid() or process["pid"] in own_pids:
            continue
        memory = f", {process['mem'] / 2**30:.1f} GiB" if process.get("mem") else ""
        found.append(f"pid {process['pid']} {process['name']}{memory}")
    return found


@dataclass
class Counters:
    """The time an AMD GPU's clock was held over one window, from its metrics table read at the
    window's two ends (the sampler calls `begin()` and `end()`, as NVML's gpm.Counters): each
    limit's residency periods over the accumulation counter's, times the window. A counter the
    GPU does not report, or a table it refuses, is named in `errors`, never a zero."""

    handle: Any
    values: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def begin(self) -> None:
        self._started = time.perf_counter()
        self._first = self._table()

    def end(self) -> None:
        window_s = time.perf_counter() - self._started
        last = self._table() if self._first is not None else None
        if last is None:
            return
        periods = advanced(self._first, last, "accumulation_counter")
        if not periods:
            self.errors.append("held times: the accumulation counter did not advance")
            return
        for name, counters in RESIDENCIES.items():
            held = [h for h in (advanced(self._first, last, c) for c in counters) if h is not None]
            if held:
                self.values[name] = max(held) / periods * window_s
            else:
                self.errors.append(f"{name}: amdsmi reports no {' or '.join(counters)}")

    def _table(self) -> dict[str, Any] | None:
        amdsmi = load()
        try:
            return amdsmi.amdsmi_get_gpu_metrics_info(self.handle)
        except amdsmi.AmdSmiException as err:
            self.errors.append(f"held times: amdsmi_get_gpu_metrics_info: {telemetry.said(err)}")
            return None


def advanced(first: dict[str, Any], last: dict[str, Any], counter: str) -> int | None:
    """How far a counter of the metrics table moved between two readings; None where the GPU
    does not report it ("N/A")."""
    before, after = first.get(counter, "N/A"), last.get(counter, "N/A")
    if before == "N/A" or after == "N/A":
        return None
    return after - before
