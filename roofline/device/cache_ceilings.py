"""The cache ceilings of a CPU: the read bandwidth of each cache level and of DRAM, every core
at once, as the cache-aware roofline (Ilic et al.) measures it, with a compiled read kernel built
and run by roofline.device.programs, as every CPU kernel is; and the cache sizes the working
sets are sized from (sysfs, else py-cpuinfo)."""

import tempfile
from pathlib import Path
from typing import Any, NamedTuple, NotRequired, TypedDict

from roofline.device.programs import (
    MAX_CLOCK_GHZ,
    MAX_LOAD_BYTES,
    VECTORS,
    WINDOW_CLOCKS,
    WINDOWS,
    ProgramFailed,
    best_of,
    build,
    not_built,
    run_windows,
)

# --- the cache ceilings: read bandwidth per level, as the cache-aware roofline measures them ---
#
# Each copy reads its own buffer, pass after pass, as vector loads summed into ACC accumulators
# (as many chains in flight as the FMA kernel keeps: enough to cover the add's latency on every
# load port), window after window (argv[3]), each for a given time (argv[2]: every copy reads
# through the whole window, none finishes early and leaves the others a shared level to
# themselves), a line each. Loads only: no store, so no write-allocate and no write-back in the
# figure. Every page of the buffer is touched (huge pages asked for) and the buffer read once
# before the first window, so the windows find it where it fits.
READ_PROGRAM = (
    WINDOW_CLOCKS
    + r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
typedef float vec __attribute__((vector_size(VECTOR_BYTES)));
#define LANES (VECTOR_BYTES / 4)
static vec acc[ACC];
static void pass(const vec *data, long blocks) {
    vec a[ACC];
    for (int j = 0; j < ACC; j++) a[j] = acc[j];
    for (long i = 0; i < blocks; i++, data += ACC) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) a[j] += data[j];
    }
    for (int j = 0; j < ACC; j++) acc[j] = a[j];
}
int main(int argc, char **argv) {
    long blocks = atol(argv[1]) / (VECTOR_BYTES * ACC);
    double seconds = atof(argv[2]);
    size_t bytes = (size_t)blocks * ACC * VECTOR_BYTES;
    long chunk = bytes < (4L << 20) ? (4L << 20) / bytes : 1;  /* passes between clock reads */
    char *data;
    if (blocks < 1 || posix_memalign((void **)&data, 1 << 21, bytes)) return 1;
#ifdef MADV_HUGEPAGE
    madvise(data, bytes, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < bytes; i += 4096) data[i] = 1;  /* every page its own, zeroed */
    pass((const vec *)data, blocks);
    for (int window = atoi(argv[3]); window > 0; window--) {  /* a line each */
        struct window w;
        window_begin(&w);
        double s = 0;
        long passes = 0;
        while (s < seconds) {
            for (long p = 0; p < chunk; p++) pass((const vec *)data, blocks);
            passes += chunk;
            s = window_wall(&w);
        }
        double cpu = window_cpu(&w);
        float sum = 0;
        for (int j = 0; j < ACC; j++)
            for (int l = 0; l < LANES; l++) sum += acc[j][l];
        printf("%f %f %f\n", (double)bytes * passes / s / 1e9, cpu / s, sum);
    }
    free(data);
    return 0;
}
"""
)
SYSFS_CPUS = Path("/sys/devices/system/cpu")
CACHE_LEVELS = ("L1", "L2", "L3")
# DRAM's working set: this many times the largest cache one copy has, and at least DRAM_LEAST
# per copy (past any cache it might share), with every copy's together at most MEMORY_SHARE of
# the memory free.
DRAM_TIMES = 4
DRAM_LEAST = 64 << 20
MEMORY_SHARE = 0.25


class CacheSize(NamedTuple):
    """One cache level as this machine reports it."""

    level: str  # "L1" (its data cache), "L2", "L3"
    size_bytes: int  # one instance's capacity
    shared_by: int  # the CPUs measured (a copy each) that share that instance


class Planned(NamedTuple):
    """A level's working set per copy, or why it has none."""

    level: str  # "L1", "L2", "L3", "DRAM"
    working_set_bytes: int | None
    reason: str  # "" where it has a working set
    size: CacheSize | None  # None: DRAM


class CacheBandwidth(TypedDict):
    """A level's read bandwidth, every core at once, each copy over a buffer of its own
    (measure_cache_bandwidth)."""

    level: str  # "L1", "L2", "L3", "DRAM"
    working_set_bytes: int | None  # each copy's buffer; None: no size known for the level
    gbps: float | None  # summed over the copies; None: not measured, or not used (`reason`)
    vector: str
    reason: NotRequired[str]
    cache_bytes: NotRequired[int]  # the level's capacity (one instance), as read
    shared_by: NotRequired[int]  # ...the CPUs measured that share it
    sizes_from: NotRequired[str]  # ...and where they were read: "sysfs" or "py-cpuinfo"
    shared_gbps: NotRequired[float]  # what a shared window measured, kept but not used
    per_core_gbps: NotRequired[list[float]]
    cpu_shares: NotRequired[list[float]]


def size_bytes(text: object) -> int | None:
    """A cache size as sysfs ("48K") or py-cpuinfo (a number of bytes, or "256 KiB") writes it."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if text > 0 else None
    if not isinstance(text, str):
        return None
    number = text.strip().upper().removesuffix("B").removesuffix("I").strip()
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(number[-1:], 1)
    try:
        value = int(float(number.rstrip("KMG").strip()) * unit)
    except ValueError:
        return None
    return value if value > 0 else None


def binary_size(nbytes: int) -> str:
    """A size in the binary unit that reads best: 48 KiB, 1024 KiB, 1.5 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{nbytes} bytes"


def cpu_list(text: str) -> set[int]:
    """CPU numbers as sysfs lists them: "0-3,8"."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def sysfs_cache_sizes(usable: set[int] | None, sysfs: Path = SYSFS_CPUS) -> list[CacheSize]:
    """The data and unified caches of the first CPU measured, from Linux's sysfs, each shared by
    the CPUs measured in its shared_cpu_list ([] where sysfs does not tell)."""
    first = min(usable) if usable else 0
    sizes: dict[str, CacheSize] = {}
    for index in sorted((sysfs / f"cpu{first}" / "cache").glob("index*")):
        try:
            kind, level, size, shared = (
                (index / name).read_text(encoding="utf-8").strip()
                for name in ("type", "level", "size", "shared_cpu_list")
            )
        except OSError:
            continue
        name, capacity = f"L{level}", size_bytes(size)
        if kind not in ("Data", "Unified") or name not in CACHE_LEVELS or capacity is None:
            continue
        sharing = cpu_list(shared) & usable if usable else cpu_list(shared)
        sizes[name] = CacheSize(name, capacity, max(1, len(sharing)))
    return [sizes[name] for name in CACHE_LEVELS if name in sizes]


def cpuinfo_cache_sizes(info: dict[str, Any], cpus: int, system: str) -> list[CacheSize]:
    """The cache sizes py-cpuinfo reports. On Linux (read from lscpu) each is the sum over its
    instances, so one CPU's share is it over every CPU; elsewhere (macOS's sysctl) L1d and L2
    are one core's and L3 is shared by every core."""
    keys = {"L1": "l1_data_cache_size", "L2": "l2_cache_size", "L3": "l3_cache_size"}
    out = []
    for name, key in keys.items():
        capacity = size_bytes(info.get(key))
        if capacity is not None:
            shared = cpus if system == "Linux" or name == "L3" else 1
            out.append(CacheSize(name, capacity, max(1, shared)))
    return out


def cache_sizes(
    info: dict[str, Any], usable: set[int] | None, machine_cpus: int, system: str
) -> tuple[list[CacheSize], str]:
    """(this CPU's cache levels, where they were read): Linux's sysfs, else py-cpuinfo's `info`
    (the probe reads them once, roofline.device.hardware.cpu_facts)."""
    if system == "Linux" and (found := sysfs_cache_sizes(usable)):
        return found, "sysfs"
    return cpuinfo_cache_sizes(info, machine_cpus, system), "py-cpuinfo"


def working_sets(
    sizes: list[CacheSize], copies: int, memory_bytes: int, block: int = 64
) -> list[Planned]:
    """Each level's working set per copy, as the cache-aware roofline chooses them: about half
    of what one copy has of the level (its capacity over the CPUs measured that share it), above
    what it has of the level below (else halfway between the two, or none where the level gives
    a copy no more than the level below); DRAM's DRAM_TIMES the largest cache a copy has, at
    least DRAM_LEAST, all copies' together within MEMORY_SHARE of `memory_bytes` (the memory
    free). Each a whole number of `block`s (the kernel's step)."""
    known = {size.level: size for size in sizes}
    room = int(memory_bytes * MEMORY_SHARE) // max(1, copies)
    out, below = [], 0  # what one copy has of the level below
    for name in CACHE_LEVELS:
        size = known.get(name)
        if size is None:
            if not sizes:  # nothing known of any level: said, where a level unknown is absent
                out.append(
                    Planned(name, None, "not measured: the cache sizes are unknown here", None)
                )
            continue
        share = size.size_bytes // size.shared_by
        if share <= below:
            why = f"each copy's share of it, {share:,} bytes, is no more than of the level below"
            out.append(Planned(name, None, f"not measured: {why}", size))
            continue
        working = share // 2 if share // 2 > below else (below + share) // 2
        if working > room:  # a described cache larger than the memory (1 TiB of L3)
            why = f"each copy's working set, {working:,} bytes, would not fit in {MEMORY_SHARE:.0%} of the memory free"
            out.append(Planned(name, None, f"not measured: {why}", size))
            continue
        out.append(Planned(name, max(block, working // block * block), "", size))
        below = share
    working = max(DRAM_TIMES * below, DRAM_LEAST)
    if min(working, room) <= below:
        why = (
            f"{copies} buffers larger than the caches would not fit in {MEMORY_SHARE:.0%} of "
            "the memory free"
        )
        return [*out, Planned("DRAM", None, f"not measured: {why}", None)]
    return [*out, Planned("DRAM", min(working, room) // block * block, "", None)]


def read_bound_gbps(level: str, cores: int, clock_ghz: float | None) -> tuple[float, str]:
    """What no read of this level by these cores can exceed, and how: MAX_LOAD_BYTES a cycle
    per core at the measured clock (or MAX_CLOCK_GHZ)."""
    clock = clock_ghz or MAX_CLOCK_GHZ
    per_cycle = MAX_LOAD_BYTES[level]
    return cores * clock * per_cycle, f"{cores} cores x {clock:.3g} GHz x {per_cycle} bytes a cycle"


def measure_cache_bandwidth(
    cores: int,
    isa: list[str],
    sizes: list[CacheSize],
    sizes_from: str,
    seconds: float = 0.1,
    memory_bytes: int | None = None,
    clock_ghz: float | None = None,
) -> list[CacheBandwidth]:
    """The read bandwidth of each cache level and of DRAM, every core at once (a copy each,
    each over its own buffer, at the widest vector the flags show), summed over the copies:
    one entry per level, its gbps None with a reason where nothing here compiles the kernel, no
    working set fits the level, or every window was shared. `sizes`: the cache levels, as the
    probe read them from `sizes_from`; `memory_bytes`: the memory free (default: psutil's)."""
    import psutil

    _, width, accumulators, vector = next(v for v in VECTORS if not v[0] or v[0] in isa)
    free = psutil.virtual_memory().available if memory_bytes is None else memory_bytes
    plan = working_sets(sizes, cores, free, width * accumulators)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            binary = build(READ_PROGRAM, Path(tmp), {"VECTOR_BYTES": width, "ACC": accumulators})
            why = not_built()
        except ProgramFailed as err:
            binary, why = None, str(err)
        for level in plan:
            entry: CacheBandwidth = {
                "level": level.level,
                "working_set_bytes": level.working_set_bytes,
                "gbps": None,
                "vector": vector,
            }
            if level.size is not None:
                size = level.size
                entry |= {"cache_bytes": size.size_bytes, "shared_by": size.shared_by}
                entry |= {"sizes_from": sizes_from}
            if level.working_set_bytes is None:
                out.append(entry | {"reason": level.reason})
            elif binary is None:
                out.append(entry | {"reason": f"not measured: {why}"})
            else:
                read = read_bandwidth(binary, level.working_set_bytes, cores, seconds)
                bound, how = read_bound_gbps(level.level, cores, clock_ghz)
                if (read.get("gbps") or 0) > bound:
                    gbps = read["gbps"]
                    faster = (
                        f"{gbps:.4g} GB/s is above what these cores can load, {bound:.4g} ({how})"
                    )
                    read = {"gbps": None, "reason": f"refused: {faster}"}
                out.append(entry | read)
    return out


class ReadWindow(TypedDict, total=False):
    gbps: float | None
    reason: str
    shared_gbps: float
    per_core_gbps: list[float]
    cpu_shares: list[float]


def read_bandwidth(
    binary: Path, working: int, cores: int, seconds: float, windows: int = WINDOWS
) -> ReadWindow:
    """Every core reading a buffer of `working` bytes of its own, `windows` windows of about
    `seconds` one after another in the same processes (a buffer is filled once: DRAM's takes
    longer to fill than to read): the best window none of them shared."""
    try:
        seen = run_windows(binary, [str(working), str(seconds), str(windows)], cores)
    except ProgramFailed as err:
        return {"gbps": None, "reason": f"not measured: {err}"}
    if not seen:
        return {"gbps": None, "reason": "not measured: it printed nothing"}
    window, shared = best_of(seen)
    if shared:
        return {"gbps": None, "reason": f"not used: {shared}", "shared_gbps": sum(window.values)}
    return {"gbps": sum(window.values), "per_core_gbps": window.values, "cpu_shares": window.shares}
