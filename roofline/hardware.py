"""What hardware is here, and whether a configured device is it.

`live_hardware()` describes this machine (CPU, RAM, NVIDIA GPUs). Setting ROOFLINE_HARDWARE to a
JSON file of the same form replaces the live machine with that description: tests use it to
play a pod, and a user can preview what `dvc repro` would do on another machine."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.dtypes import CPU_FLAGS
from roofline.errors import HardwareError

if TYPE_CHECKING:  # omegaconf stays optional here: the GPU suite runs without it
    from omegaconf import DictConfig

HARDWARE_ENV = "ROOFLINE_HARDWARE"


def _cpuinfo_field(name: str) -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    match = re.search(rf"^{name}\s*:\s*(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def _last_level_cache_bytes() -> int | None:
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1], 1)
        sizes.append(int(size.rstrip("KMG")) * unit)
    return max(sizes) if sizes else None


def cpu_info() -> dict[str, Any]:
    flags = set((_cpuinfo_field("flags") or "").split())
    return {
        "model": _cpuinfo_field("model name") or platform.processor() or platform.machine(),
        "logical_cores": len(os.sched_getaffinity(0)),
        "isa": [flag for flag in CPU_FLAGS if flag in flags],
        "cache_bytes": _last_level_cache_bytes(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
    }


def gpu_count() -> int:
    """NVIDIA GPUs the driver reports. No driver means no NVML library and so no CUDA GPU;
    asking NVML first keeps a CPU machine's probe from importing torch (seconds)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except Exception:
        return 0


def gpu_info() -> list[dict[str, Any]]:
    """NVIDIA GPUs through torch (always) and NVML (driver, power, clocks)."""
    if gpu_count() == 0:
        return []
    import torch

    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpus.append(
            {
                "index": index,
                "name": props.name,
                "compute_capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count,
                "memory_bytes": props.total_memory,
                "l2_bytes": getattr(props, "L2_cache_size", None),
                "uuid": f"GPU-{props.uuid}" if getattr(props, "uuid", None) else None,
                "cuda": torch.version.cuda,
                "cublaslt": cublaslt_version(),
                **_nvml_info(index),
            }
        )
    return gpus


def cublaslt_version() -> int | None:
    """cublasLtGetVersion() of the cuBLASLt that torch loaded (e.g. 130401), or None."""
    for soname in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"):
        try:
            return int(ctypes.CDLL(soname).cublasLtGetVersion())
        except (OSError, AttributeError):
            continue
    return None


def _nvml_info(index: int) -> dict[str, Any]:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return {
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "max_mem_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        }
    except Exception as err:  # NVML missing or refusing: keep what torch told us
        return {"nvml_error": str(err)}


# What a hardware description needs, per part: key -> (type, what is allowed).
CPU_FIELDS = {
    "model": (str, "a CPU model name"),
    "logical_cores": (int, "a positive integer"),
    "isa": (list, "a list of CPU flags, e.g. [avx2, fma]"),
    "memory_bytes": (int, "a positive integer"),
}
GPU_FIELDS = {
    "index": (int, "the GPU's index"),
    "name": (str, "the name torch reports"),
    "compute_capability": (str, 'e.g. "9.0"'),
    "sm_count": (int, "a positive integer"),
    "memory_bytes": (int, "a positive integer"),
}


def check_description(described: Any, where: str) -> None:
    """Raise HardwareError naming the first missing or malformed part of a description."""
    form = '{"cpu": {"model": ..., "logical_cores": ..., "isa": [...], "memory_bytes": ...}, "gpus": [...]}'
    if not isinstance(described, dict):
        raise HardwareError(f"{where}: a {type(described).__name__}; allowed: {form}")
    if not isinstance(described.get("cpu"), dict) or not isinstance(described.get("gpus"), list):
        raise HardwareError(f"{where}: needs {form}")
    parts = [("cpu", described["cpu"], CPU_FIELDS)]
    parts += [(f"gpus[{i}]", gpu, GPU_FIELDS) for i, gpu in enumerate(described["gpus"])]
    for part, found, fields in parts:
        if not isinstance(found, dict):
            raise HardwareError(f"{where}: {part} is not an object")
        for key, (kind_, allowed) in fields.items():
            value = found.get(key)
            bad = not isinstance(value, kind_) or isinstance(value, bool)
            if bad or (kind_ is int and key != "index" and value < 1):
                raise HardwareError(f"{where}: {part}.{key}={value!r}; allowed: {allowed}")


def live_hardware() -> dict[str, Any]:
    """This machine, or the description in $ROOFLINE_HARDWARE when it is set."""
    override = os.environ.get(HARDWARE_ENV)
    if override:
        path = Path(override)
        where = f"{HARDWARE_ENV}={override}"
        try:
            described = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise HardwareError(f"{where}: cannot read it as JSON: {err}") from err
        check_description(described, where)
        return {**described, "described_by": str(path)}
    return {"cpu": cpu_info(), "gpus": gpu_info()}


def kind(dev: DictConfig | dict) -> str:
    """ "cpu" or "cuda", from a composed config (an enum) or a plain YAML dict (a string)."""
    return getattr(dev["kind"], "name", dev["kind"])


def find_device(dev: DictConfig | dict, hardware: dict[str, Any]) -> dict[str, Any] | None:
    """The part of `hardware` that is this configured device, or None if it is not here."""
    rec = dev["recognise"]
    if kind(dev) == "cpu":
        if hardware["gpus"] and not rec.get("with_gpu_present"):
            return None
        if re.search(rec.get("cpu_model") or ".*", hardware["cpu"]["model"]):
            return hardware["cpu"]
        return None
    for gpu in hardware["gpus"]:
        if rec.get("gpu_name") and re.search(rec["gpu_name"], gpu["name"]):
            return gpu
    return None


def locate(
    dev: DictConfig | dict, hardware: dict[str, Any] | None = None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the device's part of this machine, its stable identity), or (None, None) if not here."""
    found = find_device(dev, hardware or live_hardware())
    return found, identity(kind(dev), found) if found else None


def identity(kind: str, found: dict[str, Any]) -> dict[str, Any]:
    """The stable part of a device's description: what "the same hardware" means.

    No clocks, temperatures, driver builds or host names, so re-probing the same machine gives
    the same fingerprint."""
    if kind == "cpu":
        return {key: found[key] for key in ("model", "logical_cores", "isa")}
    return {
        "name": found["name"],
        "compute_capability": found["compute_capability"],
        "sm_count": found["sm_count"],
        "memory_gib": round(found["memory_bytes"] / 2**30),
    }


def describe(hardware_identity: dict[str, Any]) -> str:
    if "model" in hardware_identity:
        return f"{hardware_identity['model']} ({hardware_identity['logical_cores']} cores)"
    return f"{hardware_identity['name']} (sm_{hardware_identity['compute_capability']})"


def unmatched_gpus(devices: DictConfig | dict, hardware: dict[str, Any]) -> list[dict[str, Any]]:
    """GPUs here that no configured device recognises."""
    patterns = [d["recognise"].get("gpu_name") for d in devices.values()]
    patterns = [p for p in patterns if p]
    return [g for g in hardware["gpus"] if not any(re.search(p, g["name"]) for p in patterns)]


_CLOCK_PROGRAM = r"""
#include <stdio.h>
#include <time.h>
int main(void) {
    struct timespec t0, t1;
    unsigned long x = 0, y = 1, n = 200000000UL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                         : "+r"(x) : "r"(y));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("%f\n", 4.0 * n / s / 1e9);
    return x == 0;
}
"""


def measure_cpu_clock_ghz(cores: int) -> float | None:
    """The clock all cores run at together: a chain of dependent register adds (one per cycle;
    register operands, since recent cores fold add-immediate chains) on every core at once,
    slowest core taken. Needs a C compiler and x86-64; None otherwise."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or platform.machine() not in ("x86_64", "AMD64"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp, "clock.c"), Path(tmp, "clock")
        source.write_text(_CLOCK_PROGRAM)
        built = subprocess.run([compiler, "-O1", "-o", binary, source], capture_output=True)
        if built.returncode != 0:
            return None
        rounds = []
        for _ in range(3):  # a busy neighbour only ever slows a round: keep the fastest
            runs = [
                subprocess.Popen([binary], stdout=subprocess.PIPE, text=True) for _ in range(cores)
            ]
            rounds.append(min(float(run.communicate()[0]) for run in runs))
    return max(rounds)


def cpu_clock(cores: int) -> dict[str, Any]:
    """The CPU clock, as measured or read on this machine: {"ghz", "source"}; ghz is None when
    nothing here tells it (the aggregate stage then needs devices.<name>.clock_ghz)."""
    measured = measure_cpu_clock_ghz(cores)
    if measured:
        return {"ghz": measured, "source": "measured all-core clock"}
    max_freq = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if max_freq.exists():
        return {"ghz": int(max_freq.read_text()) / 1e6, "source": "cpufreq max"}
    mhz = _cpuinfo_field("cpu MHz")
    if mhz:
        return {"ghz": float(mhz) / 1e3, "source": "/proc/cpuinfo cpu MHz"}
    return {"ghz": None, "source": "no C compiler, cpufreq or /proc/cpuinfo here"}
