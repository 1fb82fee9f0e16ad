"""A machine's description as the probe records it, defined once: the JSON document in the boot
cache, in $ROOFLINE_HARDWARE (written by hand for tests and demos) and, per device, in each
record's `found` and its identity. Typed dictionaries, because they are read and written as
JSON; `check_description` checks one read from a file before anything uses it."""

from typing import Any, NotRequired, TypedDict

from roofline.core.errors import HardwareError


class CacheLevel(TypedDict):
    """One cache level as the probe read it (roofline.device.cache_ceilings.CacheSize, as JSON)."""

    level: str  # "L1" (its data cache), "L2", "L3"
    size_bytes: int  # one instance's capacity
    shared_by: int  # the CPUs a run uses that share that instance


class CoreType(TypedDict):
    """One kind of core on a CPU that has two (Intel's P- and E-cores since its 12th generation,
    as Linux's sysfs lists them; Apple's performance levels, as macOS's sysctl does:
    roofline.device.core_types): each kind counts in the computed peak with its own cores, FLOP
    per cycle and clock."""

    name: str  # "P-cores", "E-cores"
    cores: int  # its physical cores among those a run uses
    logical_cores: int
    efficiency: bool  # an E-core: its vector units are its microarchitecture's own
    microarchitecture: str | None  # an E-core's ("gracemont"); None: not known (no peak)
    max_clock_ghz: float | None  # the highest clock sysfs says its cores run at; None: not said
    clusters: NotRequired[int]  # Apple's: its clusters, each with one matrix unit (AMX, SME)


class CpuInfo(TypedDict):
    """The CPU, as the probe records it (roofline.device.hardware.cpu_info)."""

    model: str
    logical_cores: int  # the threads a run uses
    physical_cores: NotRequired[int]  # of those: what the computed peak counts
    machine_cores: NotRequired[int | None]
    fence: NotRequired[str | None]  # why fewer cores than the machine has, or None
    isa: list[str]  # the CPU flags the dtype registry knows (roofline.core.dtypes.CPU_FLAGS)
    microarchitecture: NotRequired[str | None]
    system: NotRequired[str]
    machine: NotRequired[str]
    cache_bytes: NotRequired[int | None]  # the largest level's capacity, for buffer rotation
    caches: NotRequired[list[CacheLevel]]  # each level (none: not known, as a described machine)
    caches_from: NotRequired[str]  # where they were read: "sysfs" or "py-cpuinfo"
    core_types: NotRequired[list[CoreType]]  # a CPU of two kinds of core only
    memory_bytes: int


class NvmlLimits(TypedDict, total=False):
    """What NVML says of a GPU (roofline.device.telemetry.limits); a field it refused is left
    out and named in `nvml_error`."""

    driver: str
    mig_parent: str  # a MIG slice: its GPU, whose power and clocks it shares
    power_limit_w: float
    max_sm_clock_mhz: float
    max_mem_clock_mhz: float
    nvml_error: str
    smi_error: str  # an AMD GPU's: what amdsmi refused (roofline.device.amd_telemetry.limits)


class GpuInfo(NvmlLimits):
    """A GPU torch can use: torch's properties, then NVML's (roofline.device.kinds.cuda_gpus)."""

    index: int
    name: str
    compute_capability: str  # e.g. "9.0"
    sm_count: int
    memory_bytes: int
    l2_bytes: NotRequired[int | None]
    uuid: NotRequired[str | None]
    cuda: NotRequired[str | None]
    cublaslt: NotRequired[int | None]
    # An AMD GPU (ROCm's torch): its architecture, from torch's gcnArchName without its feature
    # flags (e.g. "gfx942"), which identifies it where its name may not ("AMD Radeon Graphics"
    # on some ROCm builds); and torch.version.hip. compute_capability is then torch's major.minor.
    architecture: NotRequired[str]
    hip: NotRequired[str]


class AppleGpu(TypedDict):
    name: str
    memory_bytes: int  # the machine's, shared with the CPU
    cores: NotRequired[int]  # its GPU cores, as macOS's system_profiler says; absent: not said


# The part of a machine's description that is one configured device.
Found = CpuInfo | GpuInfo | AppleGpu


class Hardware(TypedDict):
    cpu: CpuInfo
    gpus: list[GpuInfo]
    apple_gpus: list[AppleGpu]
    described_by: NotRequired[str]  # the $ROOFLINE_HARDWARE file it was read from
    gpu_note: NotRequired[str]  # GPUs here that this torch cannot reach, and how it could


class Identity(TypedDict, total=False):
    """The stable part of a device's description: what "the same hardware" means
    (roofline.machines.identity). A CPU's: model, logical_cores, isa, and usable_cores where a
    fence left fewer; a GPU's: name, compute_capability (an AMD GPU's: architecture), sm_count, memory_gib; Apple's GPU:
    name, memory_gib."""

    model: str
    logical_cores: int
    isa: list[str]
    usable_cores: int
    name: str
    compute_capability: str
    architecture: str
    sm_count: int
    memory_gib: int


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
    check_cpu_parts(described["cpu"], where)


CACHE_LEVELS = ("L1", "L2", "L3")


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_cpu_parts(cpu: dict[str, Any], where: str) -> None:
    """The CPU's optional parts that the benchmark sizes its work by: physical cores within the
    logical ones, each cache level a known name with a positive size shared by at most every
    CPU a run uses."""
    logical = cpu["logical_cores"]
    if not all(isinstance(flag, str) for flag in cpu["isa"]):
        raise HardwareError(f"{where}: cpu.isa={cpu['isa']!r}; allowed: {CPU_FIELDS['isa'][1]}")
    physical = cpu.get("physical_cores")
    if physical is not None and not (positive_int(physical) and physical <= logical):
        raise HardwareError(
            f"{where}: cpu.physical_cores={physical!r}; allowed: a positive integer, at most "
            f"logical_cores ({logical})"
        )
    cache_bytes = cpu.get("cache_bytes")
    if cache_bytes is not None and not positive_int(cache_bytes):
        raise HardwareError(
            f"{where}: cpu.cache_bytes={cache_bytes!r}; allowed: a positive integer"
        )
    check_core_types(cpu, where)
    caches = cpu.get("caches", [])
    if not isinstance(caches, list):
        raise HardwareError(f"{where}: cpu.caches={caches!r}; allowed: a list of cache levels")
    for i, level in enumerate(caches):
        part = f"cpu.caches[{i}]"
        if not isinstance(level, dict):
            raise HardwareError(f"{where}: {part} is not an object")
        if level.get("level") not in CACHE_LEVELS:
            allowed = ", ".join(CACHE_LEVELS)
            raise HardwareError(f"{where}: {part}.level={level.get('level')!r}; allowed: {allowed}")
        if not positive_int(level.get("size_bytes")):
            size = level.get("size_bytes")
            raise HardwareError(f"{where}: {part}.size_bytes={size!r}; allowed: a positive integer")
        shared = level.get("shared_by")
        if not (positive_int(shared) and shared <= logical):
            raise HardwareError(
                f"{where}: {part}.shared_by={shared!r}; allowed: a positive integer, at most "
                f"logical_cores ({logical})"
            )


def check_core_types(cpu: dict[str, Any], where: str) -> None:
    """A described CPU's core kinds: each named, with positive cores that sum to the CPU's, and a
    clock that is a positive number of GHz or null."""
    kinds = cpu.get("core_types")
    if kinds is None:
        return
    form = "a list of {name, cores, logical_cores, efficiency, microarchitecture, max_clock_ghz}"
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, dict) for k in kinds):
        raise HardwareError(f"{where}: cpu.core_types={kinds!r}; allowed: {form}")
    for i, kind_ in enumerate(kinds):
        part = f"cpu.core_types[{i}]"
        if not isinstance(kind_.get("name"), str):
            raise HardwareError(f"{where}: {part}.name={kind_.get('name')!r}; allowed: a name")
        for key in ("cores", "logical_cores"):
            if not positive_int(kind_.get(key)):
                raise HardwareError(
                    f"{where}: {part}.{key}={kind_.get(key)!r}; allowed: a positive integer"
                )
        if not isinstance(kind_.get("efficiency"), bool):
            raise HardwareError(
                f"{where}: {part}.efficiency={kind_.get('efficiency')!r}; allowed: true or false"
            )
        if not isinstance(kind_.get("microarchitecture", ""), str | None):
            raise HardwareError(
                f"{where}: {part}.microarchitecture={kind_['microarchitecture']!r}; allowed: a "
                "name or null"
            )
        clock = kind_.get("max_clock_ghz")
        if clock is not None and not (
            isinstance(clock, int | float) and not isinstance(clock, bool) and clock > 0
        ):
            raise HardwareError(
                f"{where}: {part}.max_clock_ghz={clock!r}; allowed: a positive number or null"
            )
    logical = sum(k["logical_cores"] for k in kinds)
    if logical != cpu["logical_cores"]:
        raise HardwareError(
            f"{where}: cpu.core_types have {logical} logical cores in all; allowed: the CPU's "
            f"logical_cores ({cpu['logical_cores']})"
        )
