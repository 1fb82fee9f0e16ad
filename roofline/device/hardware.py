"""What hardware is here (which configured device it is, and what "the same hardware" means, is
roofline/machines/identity.py's).

`live_hardware()` describes this machine (CPU, RAM, NVIDIA GPUs). Setting ROOFLINE_HARDWARE to a
JSON file of the same form replaces the live machine with that description: tests use it to
play a pod, and a user can preview what `dvc repro` would do on another machine."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from roofline.core.errors import HardwareError
from roofline.device.core_types import physical_cores_of
from roofline.device.description import (
    AppleGpu,
    CacheLevel,
    CoreType,
    CpuInfo,
    GpuInfo,
    Hardware,
    check_description,
)

# platform, roofline.device.kinds, .dtypes and .timing are imported where they are used: the probe
# of every device imports this module for boot() on every `dvc repro`, and answers from its cache
# when nothing changed (stages/probe.py).

HARDWARE_ENV = "ROOFLINE_HARDWARE"


def usable_cpus() -> set[int] | None:
    """The CPUs this process may run on (its affinity: `taskset`, a container's cpuset), or None
    where the OS does not say (macOS)."""
    from roofline.device.timing import our_cpus

    if (cpus := our_cpus()) is not None:  # Linux: what the timed windows are read over too
        return cpus
    import psutil

    process = psutil.Process()
    return set(process.cpu_affinity()) if hasattr(process, "cpu_affinity") else None


class CpuFacts(TypedDict):
    """This CPU as its libraries report it (cpu_facts), before cpu_info keeps what the probe
    records; a played one (tests) may leave out what a fence adds."""

    system: str  # platform.system(): "Linux", "Darwin", "Windows"
    machine: str  # platform.machine(): "x86_64", "arm64"
    brand: str  # the model name
    vendor: str | None  # CPUID's vendor, e.g. "GenuineIntel", "AuthenticAMD"
    family: int | None  # CPUID's family and model numbers
    model_number: int | None
    flags: list[str]
    caches: list[CacheLevel]  # each level, read once here (cache_ceilings.cache_sizes)
    caches_from: str  # "sysfs" or "py-cpuinfo"
    usable_cores: int  # the logical cores this process may use
    machine_cores: NotRequired[int]  # the machine's logical cores
    fence: NotRequired[str | None]  # why fewer are usable (fence()), or None
    physical_cores: int  # the physical cores under the usable ones
    core_types: NotRequired[list[CoreType] | None]  # two kinds of core (core_types), or None
    memory_bytes: int


def cpu_facts() -> CpuFacts:
    """This CPU as maintained libraries report it on Linux, macOS and Windows alike: py-cpuinfo
    (model, vendor, family, flags), psutil (cores, memory), platform (OS, architecture), and
    joblib the cores this process may use: its affinity and a cgroup CPU quota (a container's)."""
    import platform

    import cpuinfo
    import joblib
    import psutil

    from roofline.device.cache_ceilings import cache_sizes
    from roofline.device.core_types import apple_levels, core_types

    info = cpuinfo.get_cpu_info()
    machine = psutil.cpu_count(logical=True) or 1
    usable = min(joblib.cpu_count(), machine)  # affinity, quota (rounded up), LOKY_MAX_CPU_COUNT
    cpus = usable_cpus()
    physical = psutil.cpu_count(logical=False) or machine
    if cpus and len(cpus) < machine:  # the physical cores of the CPUs it may use: Linux's
        # sysfs says which; elsewhere (a Windows PC's affinity) no more than those CPUs
        on_linux = platform.system() == "Linux"
        physical = (on_linux and physical_cores_of(cpus)) or min(physical, len(cpus))
    physical = min(physical, usable)  # ...no more than the threads it may run (a quota)
    caches, caches_from = cache_sizes(info, cpus, machine, platform.system())
    kinds = None  # Windows lists no kinds of core to py-cpuinfo or psutil
    if platform.system() == "Darwin":
        kinds = apple_levels()
    elif platform.system() == "Linux":
        kinds = core_types(cpus or set(range(machine)), info.get("family"), info.get("model"))
    return {
        "system": platform.system(),
        "machine": platform.machine(),
        "brand": info.get("brand_raw") or platform.processor() or platform.machine(),
        "vendor": info.get("vendor_id_raw"),
        "family": info.get("family"),
        "model_number": info.get("model"),
        "flags": info.get("flags", []),
        "caches": [cast(CacheLevel, level._asdict()) for level in caches],
        "caches_from": caches_from,
        "usable_cores": usable,
        "machine_cores": machine,
        "fence": fence(usable, machine, cpus) if usable < machine else None,
        "physical_cores": physical,
        "core_types": kinds,
        "memory_bytes": psutil.virtual_memory().total,
    }


def fence(usable: int, machine: int, cpus: set[int] | None) -> str:
    """Why this process may use fewer cores than the machine has, in a reader's words."""
    if cpus is not None and len(cpus) == usable:
        return f"CPU affinity: {usable} of {machine} CPUs ({compact(cpus)})"
    if os.environ.get("LOKY_MAX_CPU_COUNT"):
        return f"LOKY_MAX_CPU_COUNT={os.environ['LOKY_MAX_CPU_COUNT']}"
    return f"a CPU quota (cgroup) of at most {usable} of {machine} CPUs"


def compact(cpus: set[int]) -> str:
    """CPU numbers as `taskset -c` writes them: 0-3,6."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def microarchitecture(vendor: str | None, family: int | None, model: int | None) -> str | None:
    """The microarchitectures whose vector units change the FLOP per cycle of an instruction
    set (AMD's Zen generations: Zen 4 runs AVX-512 on two 256-bit halves), from the CPUID
    family and model; None where it does not matter or is not known."""
    if vendor != "AuthenticAMD" or family is None or model is None:
        return None
    if family == 0x17:
        return "zen2" if model >= 0x30 else "zen"
    if family == 0x19:
        return "zen4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0xAF else "zen3"
    if family == 0x1A:
        return "zen5"
    return None


def cpu_info(facts: CpuFacts | None = None) -> CpuInfo:
    """This machine's CPU as the probe records it (`facts`: cpu_facts(), or a played one)."""
    from roofline.core.dtypes import CPU_FLAGS

    facts = facts or cpu_facts()
    flags = set(facts["flags"])
    return {
        "model": facts["brand"],
        "logical_cores": facts["usable_cores"],  # the threads a run uses
        "physical_cores": facts["physical_cores"],  # of those: what the peak counts
        "machine_cores": facts.get("machine_cores"),
        "fence": facts.get("fence"),
        "isa": [flag for flag in CPU_FLAGS if flag in flags],
        "microarchitecture": microarchitecture(
            facts["vendor"], facts["family"], facts["model_number"]
        ),
        "system": facts["system"],
        "machine": facts["machine"],
        "cache_bytes": max((level["size_bytes"] for level in facts["caches"]), default=None),
        "caches": facts["caches"],
        "caches_from": facts["caches_from"],
        **({"core_types": kinds} if (kinds := facts.get("core_types")) else {}),
        "memory_bytes": facts["memory_bytes"],
    }


def gpu_count() -> int | None:
    """GPUs torch could use here: NVIDIA's (nvidia_gpu_count), else AMD's (amdsmi's count; ROCm's
    torch reaches them through torch.cuda); None when neither library can say but a driver is
    here (then only torch can tell); 0: no GPU driver at all, and torch is not imported."""
    nvidia = nvidia_gpu_count()
    if nvidia:
        return nvidia
    from roofline.device import amd_telemetry

    amd = amd_telemetry.gpu_count()
    return None if nvidia is None and not amd else amd


def nvidia_gpu_count() -> int | None:
    """NVIDIA GPUs the driver reports; None when NVML cannot say (then only torch can tell):
    nvidia-ml-py is not installed, or a container has CUDA's driver library without NVML's
    (NVIDIA_DRIVER_CAPABILITIES=compute). Neither library means no driver and so no CUDA GPU;
    asking NVML first keeps a CPU machine's probe from importing torch (seconds)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError_LibraryNotFound:
        return None if cuda_driver_loads() else 0
    except Exception:
        return 0


def cuda_driver_loads() -> bool:
    """Whether CUDA's driver library (libcuda.so.1) loads here; loading it starts nothing."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:  # no NVIDIA driver here, or not Linux
        return False
    return True


# The oldest NVIDIA driver branch each CUDA major version runs on (NVIDIA's CUDA compatibility
# table: minor-version compatibility within a major version).
MIN_DRIVER = {13: 580, 12: 525, 11: 450}


def nvml_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()  # NVML answers nothing before it; another init only counts one more
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        return None


class TorchWithoutCuda(HardwareError):
    """NVIDIA GPUs are here, but the torch the lock installs on this OS has no CUDA (the package
    index's Windows build is CPU-only): the CPU is measured, and the note says how to measure
    the GPUs too."""


def nvml_sees(gpus: int, driver: str | None) -> str:
    return f"NVML sees {gpus} NVIDIA GPU{'s' if gpus > 1 else ''} (driver {driver or 'unknown'})"


def torch_install(torch_version: str) -> str:
    """The command that installs this torch version built for the machine's GPU, from PyTorch's
    index. --reinstall-package, because PEP 440 ignores the local label: the installed
    2.15.0+cu132 (or +cpu) satisfies torch==2.15.0, and uv would install nothing."""
    version = torch_version.split("+")[0]
    return f"uv pip install --reinstall-package torch --torch-backend=auto torch=={version}"


def without_cuda_note(gpus: int, torch_version: str, driver: str | None) -> str:
    """What a Windows PC with NVIDIA GPUs and the lock's CPU-only torch is told, once a run."""
    return (
        f"{nvml_sees(gpus, driver)}, but this torch ({torch_version}) is the package index's "
        "build for Windows, "
        "which has no CUDA: the CPU is measured, the GPU is not. To measure the GPU too, install "
        f"the same torch built for this driver from PyTorch's index: `{torch_install(torch_version)}`, then "
        "`$env:UV_NO_SYNC=1; uv run dvc repro` (PowerShell; docs/several-machines.md)"
    )


def driver_problem(
    gpus: int, torch_version: str, torch_cuda: str | None, driver: str | None, said: str
) -> str:
    """Why torch cannot use the GPUs NVML sees, and what to do, in a user's words."""
    seen = nvml_sees(gpus, driver)
    if torch_cuda is None:
        return (
            f"{seen}, but this torch ({torch_version}) is a CPU-only build: "
            "`uv sync --locked` installs the locked CUDA build"
        )
    major = int(torch_cuda.split(".")[0])
    need = MIN_DRIVER.get(major)
    have = int(driver.split(".")[0]) if driver and driver.split(".")[0].isdigit() else None
    why = (
        f"CUDA {major} needs driver >= {need}"
        if need and have is not None and have < need
        else f"torch said: {said or 'nothing'}"
    )
    runs = [m for m, oldest in MIN_DRIVER.items() if have is not None and have >= oldest]
    build = f"CUDA {max(runs)}" if runs else "a CUDA this driver runs"
    version = torch_version.split("+")[0]
    return (
        f"{seen}, but torch {torch_version} (built for CUDA {torch_cuda}) cannot use "
        f"{'them' if gpus > 1 else 'it'}: "
        f"{why}. Nothing was measured. Either use a host whose driver is >= {need or 'that'} "
        "(`nvidia-smi` shows it: check before you measure), or install the same torch built "
        f"for {build} from PyTorch's index and keep it: `{torch_install(version)}`, then "
        "`UV_NO_SYNC=1 uv run dvc repro` (`scripts/pod-setup` does "
        "the first; docs/several-machines.md: pods with older drivers)."
    )


def rocm_problem(gpus: int, torch_version: str, said: str) -> str:
    """Why torch cannot use the AMD GPUs amdsmi sees, and what to do, in a user's words."""
    return (
        f"amdsmi sees {gpus} AMD GPU{'s' if gpus > 1 else ''}, but torch {torch_version} cannot "
        f"use {'them' if gpus > 1 else 'it'} (torch said: {said or 'nothing'}): AMD GPUs need "
        "torch's ROCm build, and the lock's is CUDA's. Nothing was measured. `scripts/pod-setup` "
        f"installs the same torch built for ROCm (`{torch_install(torch_version)}`); then "
        "`UV_NO_SYNC=1 uv run dvc repro`."
    )


def gpu_info() -> list[GpuInfo]:
    """GPUs through torch (always) and NVML, or amdsmi on an AMD GPU (driver, power, clocks).
    GPUs that NVML or amdsmi sees and torch cannot use stop the probe, by name: a pod that
    measured nothing must not look as if it had no GPU."""
    from roofline.device import kinds

    count = gpu_count()
    if count == 0:
        return []
    available, said = kinds.cuda_available()
    if not available:
        if count is None:  # no NVML to ask, and torch sees no GPU: there is none to use
            return []
        import platform

        import torch

        if not nvidia_gpu_count():  # amdsmi's GPUs: AMD's, which only a ROCm torch reaches
            raise HardwareError(rocm_problem(count, torch.__version__, said))
        if torch.version.cuda is None and platform.system() == "Windows":  # no CUDA in the lock
            raise TorchWithoutCuda(without_cuda_note(count, torch.__version__, nvml_driver()))
        raise HardwareError(
            driver_problem(count, torch.__version__, torch.version.cuda, nvml_driver(), said)
        )
    return kinds.cuda_gpus()


def apple_gpus(cpu: CpuInfo) -> list[AppleGpu]:
    """Apple silicon's GPU, which torch reaches as `mps` (macOS on arm64 only); its memory is
    the machine's, shared with the CPU."""
    if cpu.get("system") != "Darwin" or cpu.get("machine") != "arm64":
        return []
    import torch

    if not torch.backends.mps.is_available():
        return []
    found: AppleGpu = {"name": f"{cpu['model']} GPU", "memory_bytes": cpu["memory_bytes"]}
    cores = apple_gpu_cores()
    return [found | {"cores": cores} if cores else found]


def apple_gpu_cores(profile: str | None = None) -> int | None:
    """Apple's GPU cores (chips of one name come with several counts: an M1 with 7 or 8), from
    `system_profiler SPDisplaysDataType -json` (its sppci_cores), or None where it does not say."""
    import subprocess

    if profile is None:
        try:
            command = ["system_profiler", "SPDisplaysDataType", "-json"]
            profile = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
    try:
        displays = json.loads(profile)["SPDisplaysDataType"]
        return int(next(d["sppci_cores"] for d in displays if "sppci_cores" in d))
    except (ValueError, KeyError, TypeError, StopIteration):
        return None


# This machine's description, found once per boot: the pipeline's stages read it from here
# (py-cpuinfo's full probe spawns a process, and torch takes seconds to import).
BOOT_CACHE = Path(".dvc/tmp/hardware.json")


# What joblib reads for the cores a process may use, besides its affinity: a cgroup's CPU quota
# (v2, v1) and its own variable.
QUOTA_FILES = (Path("/sys/fs/cgroup/cpu.max"), Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"))


# Raised when the description gains a part (2: the CPU's cache levels), so that a boot cache an
# older lab wrote is probed again rather than read without it.
DESCRIPTION_VERSION = 2


class BootKey(TypedDict):
    """What a cached description holds for (boot): it is probed again when any of it changes."""

    boot: str | float  # Linux's boot id, else psutil's boot time
    variables: dict[str, str | None]  # roofline.core.depends.HARDWARE_VARIABLES
    torch: str | None  # the installed torch's version (torch_version)
    cpus: list[int]  # the CPUs this process may use
    cpu_quota: list[str]  # the cgroup quota files' text
    description: int  # DESCRIPTION_VERSION: what the lab that wrote it records of a machine


def boot() -> BootKey:
    """What the cached description holds for: this boot, the variables that change which
    hardware a process sees (roofline.core.depends), the torch installed (another torch may
    see other GPUs), and the CPUs this process may use (a run under `taskset` or a CPU quota
    has fewer cores than the next one may)."""
    from roofline.core.depends import hardware_variables

    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
    except OSError:  # macOS, Windows
        import psutil

        boot_id = psutil.boot_time()
    return {
        "boot": boot_id,
        "variables": hardware_variables(),
        "torch": torch_version(),
        "cpus": sorted(usable_cpus() or []),
        "cpu_quota": [
            quota.read_text(encoding="utf-8").strip() for quota in QUOTA_FILES if quota.exists()
        ],
        "description": DESCRIPTION_VERSION,
    }


def torch_version() -> str | None:
    """The installed torch's version, from its package metadata's folder name (as
    importlib.metadata reads it, without importing either: the probe runs on every repro)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    found = sorted(Path(spec.origin).parent.parent.glob("torch-*.dist-info"))
    return found[-1].name.removeprefix("torch-").removesuffix(".dist-info") if found else None


# A description is a few kilobytes: more is not one (ROOFLINE_HARDWARE=/dev/zero).
DESCRIPTION_MAX_BYTES = 1 << 20


def read_description(path: Path, where: str) -> str:
    """A description file's text: a regular file (a FIFO or device would hang or never end)
    under DESCRIPTION_MAX_BYTES."""
    import stat

    try:
        found = path.stat()
    except OSError as err:
        raise HardwareError(f"{where}: cannot read it: {err.strerror}") from err
    if not stat.S_ISREG(found.st_mode):
        raise HardwareError(f"{where}: not a regular file; allowed: a JSON file")
    if found.st_size > DESCRIPTION_MAX_BYTES:
        raise HardwareError(
            f"{where}: {found.st_size:,} bytes; allowed: a JSON description of at most "
            f"{DESCRIPTION_MAX_BYTES:,}"
        )
    return path.read_text(encoding="utf-8")


def live_hardware(cache: Path | None = None) -> Hardware:
    """This machine, or the description in $ROOFLINE_HARDWARE when it is set. With `cache`,
    the description found earlier in this boot, if there is one (delete the file to probe
    again: after reconfiguring MIG, say)."""
    override = os.environ.get(HARDWARE_ENV)
    if override:
        path = Path(override)
        where = f"{HARDWARE_ENV}={override}"
        try:
            described = json.loads(read_description(path, where))
        except (OSError, ValueError) as err:
            raise HardwareError(f"{where}: cannot read it as JSON: {err}") from err
        check_description(described, where)
        return {"apple_gpus": [], **described, "described_by": str(path)}
    key = boot() if cache else None
    if cache and cache.exists():
        try:
            cached = json.loads(read_description(cache, str(cache)))
            if not isinstance(cached, dict):
                raise ValueError(f"a JSON {type(cached).__name__}")
            if cached.get("for") == key:
                check_description(cached.get("hardware"), str(cache))
                return cached["hardware"]
        except (OSError, ValueError, HardwareError) as err:  # probed again, and said
            print(
                f"{cache}: not a description this lab reads ({err}): probed again", file=sys.stderr
            )
    cpu = cpu_info()
    try:
        gpus, note = gpu_info(), None
    except TorchWithoutCuda as err:  # a laptop whose GPU this torch cannot reach: its CPU, then
        gpus, note = [], str(err)
    found: Hardware = {"cpu": cpu, "gpus": gpus, "apple_gpus": apple_gpus(cpu)}
    if note:
        found["gpu_note"] = note
    if cache:
        from roofline.core.files import write_json_atomic

        write_json_atomic(cache, {"for": key, "hardware": found})
    return found
