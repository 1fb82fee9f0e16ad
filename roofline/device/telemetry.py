"""GPU telemetry through NVML over the timed window only (the warm-up is not in it): clocks,
temperature and clock-event reasons sampled in a thread, energy from the driver's counter at
both ends, and the other processes on the GPU. Each field is read on its own, so one that
fails leaves the others, and every failure is reported with the row.

`window_telemetry` is pure, so recorded windows can be summarised and tested without a GPU."""

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from roofline.core.measurement import WindowTelemetry
from roofline.device.description import NvmlLimits

# NVML clock-event reason bits, as nvml.h defines them. "gpu_idle" is left out of what a row
# reports: it only says the GPU was idle for part of a sample, not that a clock was limited.
CLOCK_EVENT_REASONS = {
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
IDLE = 0x1
# Each reason in a reader's words, as the report and the gap breakdown say what held the clock.
REASON_WORDS = {
    "gpu_idle": "idle",
    "applications_clocks_setting": "its applications clock setting",
    "sw_power_cap": "its software power cap",
    "hw_slowdown": "a hardware slowdown (power brake or overheating)",
    "sync_boost": "sync boost (held to the clock of another GPU in its group)",
    "sw_thermal_slowdown": "its software thermal limit",
    "hw_thermal_slowdown": "a hardware thermal slowdown",
    "hw_power_brake_slowdown": "an external power brake",
    "display_clock_setting": "its display clock setting",
}


def said(err: BaseException) -> str:
    """A telemetry library's error on one line (amdsmi's span several), as a row records it."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}"


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit and bit != IDLE]


def reason_words(name: str) -> str:
    """A clock-event reason in a reader's words (its NVML name where it has none here)."""
    return REASON_WORDS.get(name, name.replace("_", " "))


def reason_shares(masks: list[int]) -> dict[str, float]:
    """Each clock-event reason's share of the samples whose reasons were read, idleness
    included; {} where none was read."""
    if not masks:
        return {}
    return {
        name: sum(1 for mask in masks if mask & bit) / len(masks)
        for bit, name in CLOCK_EVENT_REASONS.items()
    }


def dominant_reason(shares: dict[str, float]) -> tuple[str, float | None]:
    """The reason but idleness set in the most samples, with its share: ("none", None) where
    reasons were read and none but idleness was ever set, ("", None) where none was read."""
    if not shares:
        return "", None
    held = {name: share for name, share in shares.items() if name != "gpu_idle" and share > 0}
    if not held:
        return "none", None
    name = max(held, key=lambda n: held[n])  # the first in NVML's order on a tie
    return name, held[name]


def open_gpu(uuid: str | None):
    """The NVML handle of the GPU (or MIG slice) with this UUID, as torch reports it (bare, or
    with its GPU-/MIG- prefix). By UUID only: NVML's indices ignore CUDA_VISIBLE_DEVICES, and a
    MIG slice's index is its parent's, so a lookup by index can read another GPU."""
    import pynvml

    if not uuid:
        raise LookupError("torch reported no UUID for this GPU, so NVML cannot tell which it is")
    pynvml.nvmlInit()
    bare = uuid.removeprefix("GPU-").removeprefix("MIG-")
    for name in dict.fromkeys((uuid, f"GPU-{bare}", f"MIG-{bare}")):
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(name)
        except pynvml.NVMLError:
            continue
    raise LookupError(f"NVML has no GPU or MIG slice with UUID {uuid}")


def is_mig(handle) -> bool:
    import pynvml

    try:
        return bool(pynvml.nvmlDeviceIsMigDeviceHandle(handle))
    except (pynvml.NVMLError, AttributeError):
        return False


# The figures `limits` reads of a GPU, each on its own.
Limit = Literal["power_limit_w", "max_sm_clock_mhz", "max_mem_clock_mhz"]


def limits(uuid: str | None) -> NvmlLimits:
    """What NVML says of one GPU that the probe records: driver, power limit, maximum clocks;
    for a MIG slice, that it is one and its parent (whose power and clocks it shares). A field
    NVML refuses is left out and named in `nvml_error`."""
    try:
        import pynvml

        handle = open_gpu(uuid)
        driver = pynvml.nvmlSystemGetDriverVersion()
    except Exception as err:  # NVML missing or refusing: keep what torch told us
        return {"nvml_error": said(err)}
    out: NvmlLimits = {"driver": driver}
    if is_mig(handle):
        parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        out["mig_parent"] = pynvml.nvmlDeviceGetName(parent)
        handle = parent  # power and clocks are the whole GPU's, shared by its slices
    reads: dict[Limit, Callable[[], float]] = {
        "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
        "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "max_mem_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(
            handle, pynvml.NVML_CLOCK_MEM
        ),
    }
    read, errors = each_read(reads)
    out |= read  # type: ignore[typeddict-item]
    if errors:
        out["nvml_error"] = errors
    return out


def each_read(reads: dict[str, Callable[[], Any]]) -> tuple[dict[str, Any], str]:
    """Each figure that its read gives, and what each that raised said ("" where none did):
    a library that refuses one field still gives the others."""
    out, errors = {}, []
    for key, read in reads.items():
        try:
            out[key] = read()
        except Exception as err:
            errors.append(f"{key}: {said(err)}")
    return out, "; ".join(errors)


def clock_event_reasons(handle) -> int:
    """The clock-event reasons mask, by the call's R535 name, else its older one: nvidia-ml-py
    before 12.535 lacks the new name, a driver before R535 the new C function."""
    import pynvml

    read = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if read is not None:
        try:
            return read(handle)
        except pynvml.NVMLError_FunctionNotFound:
            pass
    return pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)


class SharedBoard(Exception):
    """A figure of the whole board that a MIG slice shares with the other slices."""


def nvml_fields(handle: Any = None) -> dict[str, Callable[[Any], float]]:
    """What one sample reads, field by field. A MIG slice's handle refuses the board's figures:
    its clocks, temperature and clock limits are its GPU's (every slice runs at them), read
    there; the board's power is every slice's, so it is not read."""
    import pynvml

    fields = {
        "sm_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "power_w": lambda h: pynvml.nvmlDeviceGetPowerUsage(h) / 1000,
        "temp_c": lambda h: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "reasons": clock_event_reasons,
    }
    if handle is None or not is_mig(handle):
        return fields
    board = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)

    def shared(_: Any) -> float:
        raise SharedBoard("a MIG slice shares its board's power with the other slices")

    parent = {name: (lambda _, read=read: read(board)) for name, read in fields.items()}
    return parent | {"power_w": shared}


def energy_j(handle) -> float:
    """The driver's energy counter (millijoules since it loaded), in joules."""
    import pynvml

    return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000


def processes(handle) -> list:
    """Every process computing on the GPU, as NVML lists them (pid, usedGpuMemory)."""
    import pynvml

    return list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))


def other_processes(handle, own_pids: set[int] = frozenset()) -> list[str]:
    """Other processes computing on the GPU: a shared GPU measures less than its own.
    `own_pids`: this process as NVML lists it (a host PID in many containers)."""
    import pynvml

    found = []
    for process in processes(handle):
        if process.pid == os.getpid() or process.pid in own_pids:
            continue
        try:
            name = pynvml.nvmlSystemGetProcessName(process.pid)
        except pynvml.NVMLError:
            name = "?"
        memory = f", {process.usedGpuMemory / 2**30:.1f} GiB" if process.usedGpuMemory else ""
        found.append(f"pid {process.pid} {name}{memory}")
    return found


class Sampler:
    """Context manager around a timed window: samples every `interval_s` in a thread, reads the
    energy counter and the GPU's other processes at its ends. `.samples`, `.energy_j` (None
    when the counter failed), `.processes`, `.errors` (what failed, once each)."""

    def __init__(
        self,
        handle,
        interval_s: float = 0.01,
        fields: dict[str, Callable] | None = None,
        energy: Callable | None = energy_j,
        processes: Callable | None = other_processes,
        own_pids: set[int] = frozenset(),
        counters: Callable[[Any], Any] | None = None,
    ) -> None:
        self.handle, self.interval_s = handle, interval_s
        # Read at the window's two ends (roofline.device.gpm.Counters): begin(), end().
        self.counters = counters(handle) if counters else None
        self.fields = fields if fields is not None else nvml_fields(handle)
        self._energy, self._processes, self.own_pids = energy, processes, set(own_pids)
        self.samples: list[dict[str, float]] = []
        self.errors: set[str] = set()
        self.energy_j: float | None = None
        self.processes: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _read(self, what: str, read: Callable, *args: Any) -> Any:
        try:
            return read(*args)
        except Exception as err:  # NVML raises its own per field; keep the others
            self.errors.add(f"{what}: {said(err)}")
            return None

    def _energy_now(self) -> tuple[float | None, float]:
        """The energy counter (None where it is not read) and when it was read: the middle of
        the call, which can take milliseconds, so that energy over window is the power."""
        before = time.perf_counter()
        joules = self._read("energy", self._energy, self.handle) if self._energy else None
        return joules, (before + time.perf_counter()) / 2

    def _run(self) -> None:
        while True:
            reads = {
                name: self._read(name, read, self.handle) for name, read in self.fields.items()
            }
            self.samples.append({"t": time.perf_counter()} | reads)
            if self._stop.wait(self.interval_s):
                break

    def __enter__(self) -> "Sampler":
        if self._processes:
            self.processes = (
                self._read("processes", self._processes, self.handle, self.own_pids) or []
            )
        if self.counters is not None:
            self.counters.begin()
        self._start, self._t0 = self._energy_now()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        # The window ends now: its energy and counters are read before the sampler's last
        # sample returns (an AMD GPU's violation status sleeps 100 ms inside each call, which
        # the join would add to them).
        end, t1 = self._energy_now()
        if self.counters is not None:
            self.counters.end()
        self._thread.join()
        self.window_s = t1 - self._t0
        if self._start is not None and end is not None:
            self.energy_j = end - self._start


def mean(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


# The shortest window whose power comes from the energy counter: NVML's counter moves every
# 20-100 ms on recent GPUs (PETSc's PetscLogGpuEnergyMeter notes; Zeus reads 0 J over shorter
# windows), so over 1 s it is within about 10%; a shorter window takes the power readings.
ENERGY_MIN_WINDOW_S = 1.0


def window_telemetry(
    window: Any, max_sm_mhz: float | None, power_limit_w: float | None = None
) -> WindowTelemetry:
    """The timed window as its row records it: mean clocks, power from the energy counter where
    it was read (the driver's power reading is a one-second average on Hopper, wrong for a window
    that starts idle) else the mean reading, and the enforced `power_limit_w`; the hottest
    temperature, every clock-event reason but idleness, each reason's share of the samples and
    the one that held the clock most; the other processes and what failed. Every field its
    default where no window was sampled."""
    if window is None or not window.samples:
        return WindowTelemetry()
    samples = window.samples
    masks = [int(s["reasons"]) for s in samples if s.get("reasons") is not None]
    mask = 0
    for read in masks:
        mask |= read
    shares = reason_shares(masks)
    clock_reason, clock_reason_share = dominant_reason(shares)
    temps = [s.get("temp_c") for s in samples if s.get("temp_c") is not None]
    span = getattr(window, "window_s", None) or samples[-1]["t"] - samples[0]["t"]
    energy = getattr(window, "energy_j", None)
    counted = energy is not None and span >= ENERGY_MIN_WINDOW_S
    power = energy / span if counted else mean([s.get("power_w") for s in samples])
    power_source = "energy counter" if counted else ""
    if power is not None and not counted:
        why = "no energy counter" if energy is None else f"window under {ENERGY_MIN_WINDOW_S:g} s"
        power_source = f"mean of the power readings ({why})"
    return WindowTelemetry(
        sm_clock_mhz=mean([s.get("sm_mhz") for s in samples]),
        sm_clock_max_mhz=max_sm_mhz,
        mem_clock_mhz=mean([s.get("mem_mhz") for s in samples]),
        power_w=power,
        energy_j=energy if counted else None,  # a shorter window's count is a step or none
        power_source=power_source,
        temperature_max_c=max(temps) if temps else None,
        throttle_reasons="+".join(reason_names(mask)),
        clock_reason=clock_reason,
        clock_reason_share=clock_reason_share,
        clock_reason_shares=shares_text(shares),
        power_limit_w=power_limit_w,
        other_processes="; ".join(getattr(window, "processes", [])),
        telemetry_errors="; ".join(sorted(getattr(window, "errors", []))),
        **counter_fields(getattr(window, "counters", None)),
    )


def counter_fields(counters: Any) -> dict[str, Any]:
    """A window's counters (roofline.device.gpm.Counters) as WindowTelemetry's fields: each
    value read, and what was refused; nothing where none were asked (a CPU, an AMD GPU)."""
    if counters is None:
        return {}
    return counters.values | {"counter_errors": "; ".join(counters.errors)}


def shares_text(shares: dict[str, float]) -> str:
    """Each reason set in some samples, with its share: "sw_power_cap=0.9+gpu_idle=0.05"."""
    return "+".join(f"{name}={share:.3g}" for name, share in shares.items() if share > 0)
