"""Measure one device: every (dtype, shape) point, the copy bandwidth and, on a CPU, its clock,
as the device's results record. Measurements only: the aggregate stage interprets them."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from threading import BrokenBarrierError
from typing import TYPE_CHECKING, Any, cast

import psutil
import torch

from roofline.configuration.params import RENTED_KINDS
from roofline.core import arithmetic as ar
from roofline.core.dtypes import LAB_DTYPE
from roofline.core.errors import ConfigError, HardwareError
from roofline.core.measurement import (
    SCHEMA_VERSION,
    CopyCeiling,
    Measurement,
    StepSides,
    measurement_from_dict,
)
from roofline.core.progress import progress, say
from roofline.device.backends import libraries
from roofline.device.cache_ceilings import (
    CacheBandwidth,
    CacheSize,
    binary_size,
    measure_cache_bandwidth,
)
from roofline.device.description import CpuInfo, Found, GpuInfo
from roofline.device.hardware import BOOT_CACHE, live_hardware
from roofline.device.peakflops import (
    FmaCeiling,
    FmaClock,
    cpu_clock,
    measure_fma,
    measure_fma_clock,
)
from roofline.device.perf_counters import perf_counters
from roofline.device.stream import STREAM_WINDOW_S, measure_stream
from roofline.machines.identity import identity
from roofline.machines.record_types import Fingerprint, Record, RunInfo
from roofline.machines.records import points
from roofline.measuring.cpu_steps import measure_steps
from roofline.measuring.gpu_steps import describe_gpu_steps, measure_gpu_steps
from roofline.measuring.measure import (
    Target,
    describe,
    headline_point,
    measure_memory_ceiling,
    measure_point,
    measure_sustained,
    name_kernels,
    target_for,
)
from roofline.measuring.provenance import environment, git_revision, versions

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from roofline.device.timing import BenchSettings


def amount(nbytes: float) -> str:
    """Bytes as the refusals say them: GB from a tenth of one, MB below (never "0.0 GB")."""
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.3g} MB"


def check_fits(
    name: str,
    dev: DictConfig,
    memory_bytes: int,
    copy_bytes: int,
    available_bytes: int | None = None,
) -> None:
    """Refuse, before measuring anything, a shape whose operands (and the float64 copy of B
    the correctness check makes), or a copy buffer (source and destination), that cannot fit
    in this device's memory (memory_room)."""
    room, allowed = memory_room(memory_bytes, available_bytes)
    shapes = [
        (f"devices.{name}.shapes has {shape}", shape, dtype) for dtype, shape, _ in points(dev)
    ]
    check_shapes(shapes, room, allowed)
    if 2 * copy_bytes > room:
        raise ConfigError(
            f"bench.copy_mib={copy_bytes >> 20}: its two buffers need "
            f"{amount(2 * copy_bytes)}; {allowed}"
        )


def memory_room(memory_bytes: int, available_bytes: int | None) -> tuple[float, str]:
    """(bytes a measurement may use, what the refusal says is allowed): 80% of the device's
    memory, and for a CPU's (shared with the machine's other work) what is available now."""
    room = 0.8 * memory_bytes
    allowed = f"allowed: at most 80% of this device's {amount(memory_bytes)}"
    if available_bytes is not None and available_bytes < room:
        room = available_bytes
        allowed += f", and the {amount(available_bytes)} available now (free some memory)"
    return room, allowed


def check_shapes(shapes: list[tuple[str, list[int], str]], room: float, allowed: str) -> None:
    """Refuse the first (what, shape, dtype) whose operands and check do not fit in `room`."""
    for what, (m, n, k), dtype in shapes:
        need = ar.matmul_bytes(m, n, k, dtype) + k * n * 8
        if need > room:
            raise ConfigError(f"{what}: {dtype} needs {amount(need)} with its check; {allowed}")


def check_knobs_fit(config: DictConfig, kind: str, memory_bytes: int) -> None:
    """Refuse, before any knob runs, a knob shape that cannot fit in this device's memory
    (each side is float32 at most: 4 bytes an element)."""
    if kind != "cpu" and kind not in RENTED_KINDS:  # no knobs (an Apple GPU)
        return
    table = "cpu" if kind == "cpu" else "cuda"
    available = psutil.virtual_memory().available if kind == "cpu" else None
    shapes = [
        (f"knobs.{table}.{key}={list(shape)}", list(shape), "float32")
        for key, shape in config[table].items()
    ]
    check_shapes(shapes, *memory_room(memory_bytes, available))


# Room a measuring stage needs on disk: its record (every sample: up to ~250 kB a point), the
# copy DVC keeps in its cache, and margin for DVC's own temporary files.
RECORD_BYTES_PER_POINT = 1 << 20
DISK_MARGIN_BYTES = 64 << 20


def check_disk(output: Path, points: int) -> None:
    """Refuse, before measuring anything, a disk that could not take what the stage writes."""
    free = shutil.disk_usage(output.parent if output.parent.exists() else ".").free
    need = 2 * points * RECORD_BYTES_PER_POINT + DISK_MARGIN_BYTES
    if free < need:
        raise HardwareError(
            f"only {free / 2**20:.0f} MiB free on the disk of {output}; writing it and its DVC "
            f"cache copy needs about {need / 2**20:.0f} MiB: free some space, then run again"
        )


def started() -> tuple[datetime, float]:
    """When a run starts: the wall clock to record, the monotonic clock to time it by."""
    return datetime.now(UTC), time.perf_counter()


def run_info(started: datetime, t0: float, kind: str) -> RunInfo:
    """When, how long, at which revision and with what software a run measured."""
    return {
        "started_at": started.isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - t0,
        "git_revision": git_revision(),
        "versions": versions(),
        "environment": environment(),
        "threads": torch.get_num_threads() if kind == "cpu" else None,
    }


@contextlib.contextmanager
def timing(spent: dict[str, float], what: str) -> Iterator[None]:
    """Add the block's seconds to `spent[what]`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        spent[what] = round(spent.get(what, 0.0) + time.perf_counter() - start, 3)


def measure_device(
    name: str,
    dev: DictConfig,
    bench: BenchSettings,
    found: Found,
    fingerprint: Fingerprint,
    log: Callable[[str], None] = say,
) -> Record:
    """Every point of a device (on each of its GPUs here, where there are several), then its
    copy bandwidth (and a CPU's clock), as its record, with the fingerprint (hardware, torch)
    it was measured under."""
    kind = dev.kind.name
    begun, spent = started(), {}
    available = psutil.virtual_memory().available if kind == "cpu" else None
    check_fits(name, dev, found["memory_bytes"], bench.copy_mib * 2**20, available)
    node = node_gpus(kind, found)
    later: list[Callable[[], None]] = []  # kernels to name once every window is timed
    if len(node) > 1:  # before this process makes a context: no GPU is shared with it
        with timing(spent, f"{len(node)} GPUs' points"):
            rows = measure_node(name, dev, bench, node, log)
        target = target_for(kind, found, log)
    else:
        target = target_for(kind, found, log)
        rows = measure_points(name, dev, bench, target, found, log, spent, later)
    if kind in RENTED_KINDS:  # the breakdown's sides: the data's power, launches
        with timing(spent, "breakdown"):
            steps = measure_gpu_steps(target, rows, bench)
        log(f"{name} breakdown: {describe_gpu_steps(steps)}")
    if kind != "cpu":  # a CPU's is STREAM's, on every core, after its clock (below)
        with timing(spent, "copy"):
            memory = measure_memory_ceiling(target, bench, bench.copy_mib * 2**20)
        log(f"{name} copy {bench.copy_mib} MiB: {memory['gbps']:.1f} GB/s (read + write)")
    if later:
        with timing(spent, "kernel names"):  # the GPU's profiler, once every window is timed
            name_kernels(later)
    record: Record = {
        "schema": SCHEMA_VERSION,
        "device": name,
        "status": "measured",
        "hardware": fingerprint["hardware"],
        "fingerprint": fingerprint,
        # The same part, without the UUID that names one card of the model.
        "found": cast(Found, {k: v for k, v in found.items() if k != "uuid"}),
        "run": run_info(*begun, kind),
        "rows": [asdict(row) for row in rows],
    }
    if kind != "cpu":
        record["memory"] = memory
    if kind in RENTED_KINDS:
        record["gpu_steps"] = steps
    if kind == "cpu":  # the CPU itself: its clock, and its FMA ceiling at the widest vector
        cpu = cast(CpuInfo, found)
        cores, isa = cpu["logical_cores"], cpu["isa"]
        with timing(spent, "clock"):
            record["clock"] = cpu_clock(cores, compiled_window_s(bench, CLOCK_WINDOW_S))
        # The clock bounds what the kernels may claim, where it was measured (an OS's base
        # clock may be below the one they ran at).
        clock = record["clock"]
        measured_ghz = clock["ghz"] if clock["source"] == "measured all-core clock" else None
        with timing(spent, "FMA ceiling"):
            window = compiled_window_s(bench, FMA_WINDOW_S)
            record["fma"] = measure_fma(cores, isa, window, measured_ghz)
        log(f"{name} FMA ceiling: {describe_fma(record['fma'])}")
        with timing(spent, "clock under FMA load"):
            window = compiled_window_s(bench, CLOCK_WINDOW_S)
            record["fma_clock"] = measure_fma_clock(cores, isa, window)
        log(f"{name} clock under FMA load: {describe_fma_clock(record['fma_clock'])}")
        # The breakdown's sides through the headline's library: threading, one thread in L2.
        with timing(spent, "breakdown"):
            record["steps"] = measure_steps(target, cpu, rows, bench)
        log(f"{name} breakdown: {describe_steps(record['steps'])}")
        # The levels the probe read (a described machine may list none: then only DRAM's).
        sizes = [CacheSize(**level) for level in cpu.get("caches", [])]
        where = cpu.get("caches_from", "not known")
        window = compiled_window_s(bench, CACHE_WINDOW_S)
        with timing(spent, "cache ceilings"):
            record["caches"] = measure_cache_bandwidth(
                cores, isa, sizes, where, window, clock_ghz=measured_ghz
            )
        log(f"{name} read bandwidth, every core: {describe_caches(record['caches'])}")
        with timing(spent, "copy"):
            record["memory"] = cpu_memory_ceiling(target, bench, cores, sizes, measured_ghz)
        log(f"{name} copy: {describe_copy(record['memory'])}")
        # What would split the kernel's remaining loss (FP instructions per cycle), if readable.
        record["counters"] = perf_counters()
        log(f"{name} performance counters: {record['counters']['reason']}")
    record["libraries"] = libraries(list(dev.backends))
    record["run"]["spent"] = spent
    return record


def measure_points(
    name: str,
    dev: DictConfig,
    bench: BenchSettings,
    target: Target,
    found: Found,
    log: Callable[[str], None] = say,
    spent: dict[str, float] | None = None,
    later: list[Callable[[], None]] | None = None,
    only: list[str] | None = None,
) -> list[Measurement]:
    """Every (dtype, shape, backend) point of the device on `target`, then the headline point
    again in one long window (GPUs; a CPU only when asked); each one's seconds in `spent`.
    `later`: the kernels to name once every window is timed (measure.measure_point). `only`:
    the points of these backends alone, without the long window."""
    rows, spent = [], {} if spent is None else spent
    chosen = [p for p in points(dev) if only is None or p[2] in only]
    with progress(chosen, name) as bar:
        for dtype, shape, backend in bar:
            bar.set_postfix_str(f"{dtype} {shape} {backend}")
            with timing(spent, f"{dtype} {'x'.join(map(str, shape))} {backend}"):
                row = measure_point(
                    name, dtype, shape, target, bench, found, backend, log=log, later=later
                )
            rows.append(row)
            log(describe(rows[-1]))
    start = time.perf_counter()
    if only is not None:
        return rows
    if sustained := measure_sustained(name, rows, target, bench, found, log, later):
        spent["sustained"] = round(time.perf_counter() - start, 3)
        rows.append(sustained)
        log(f"[sustained] {describe(sustained)}")
    return rows


def remeasure_own(
    name: str,
    dev: DictConfig,
    bench: BenchSettings,
    found: Found,
    fingerprint: Fingerprint,
    previous: Record,
    backends: list[str],
    log: Callable[[str], None] = say,
) -> Record:
    """The previous record with the rows of `backends` (kernels of your own whose files
    changed, nothing else) measured afresh, under the new fingerprint. The CPU's breakdown is
    measured again only where its headline now goes through another library, or one of these."""
    begun, spent = started(), {}
    target = target_for(dev.kind.name, found, log)
    fresh = measure_points(name, dev, bench, target, found, log, spent, only=backends)
    by_point = {point_key(asdict(row)): row for row in fresh}
    rows = [by_point.pop(point_key(row), None) or row for row in previous["rows"]]
    rows = [asdict(row) if isinstance(row, Measurement) else row for row in rows]
    rows += [asdict(row) for row in by_point.values()]  # none, unless a point was missing
    record = cast(Record, dict(previous))
    kept = previous.get("libraries") or {}  # the kept rows' libraries as they ran them
    record |= {"fingerprint": fingerprint, "rows": rows, "libraries": kept | libraries(backends)}
    steps = previous.get("steps")
    if steps is not None:
        measured = [measurement_from_dict(row, name) for row in rows]
        head = headline_point(measured, LAB_DTYPE["cpu"])
        if head is not None and (head.backend in backends or head.backend != steps["backend"]):
            with timing(spent, "breakdown"):
                record["steps"] = measure_steps(target, cast(CpuInfo, found), measured, bench)
            log(f"{name} breakdown: {describe_steps(record['steps'])}")
    again = run_info(*begun, dev.kind.name) | {"spent": spent, "backends": backends}
    earlier = [
        r for r in previous["run"].get("remeasured", []) if set(r["backends"]) - set(backends)
    ]
    record["run"] = previous["run"] | {"remeasured": [*earlier, again]}
    return record


def point_key(row: dict[str, Any]) -> tuple:
    """Which point a row is: its dtype, shape, backend, series and GPU."""
    return (row["dtype"], row["m"], row["n"], row["k"], row["backend"], row["series"], row["gpu"])


def node_gpus(kind: str, found: Found) -> list[GpuInfo]:
    """Every GPU here that is the same hardware as `found` (the probe's GPU of the device), in
    torch's order: a node's GPUs are measured together. [] for a CPU or Apple's GPU."""
    if kind not in RENTED_KINDS:  # one device: a CPU's cores are measured together anyway
        return []
    gpus = live_hardware(BOOT_CACHE)["gpus"]  # as the probe found them this boot: no re-probe
    return [gpu for gpu in gpus if identity(kind, gpu) == identity(kind, found)]


# How long a GPU's process may wait for the node's others to be ready to time.
READY_TIMEOUT_S = 600.0
# In each GPU's process: the node's start barrier, and the node's processes (each adds itself).
_ready: Any = None
_node_pids: Any = None


def _join(barrier: Any, pids: Any) -> None:
    global _ready, _node_pids
    _ready, _node_pids = barrier, pids


def measure_gpu(
    name: str, dev: DictConfig, bench: BenchSettings, gpu: GpuInfo, slot: int = 0
) -> list[dict]:
    """One GPU's rows of a node, in a process of its own (the profiler and the CUDA context are
    per process): its points once every GPU of the node is ready, each row with its index."""
    index = gpu["index"]

    def log(line: str) -> None:
        say(f"[gpu {index}] {line}")

    try:
        target = target_for(dev.kind.name, gpu, log)
    except BaseException:
        _ready.abort()  # the others stop waiting for this GPU: the stage fails with its error
        raise
    _node_pids[slot] = os.getpid()
    later: list[Callable[[], None]] = []
    _ready.wait(READY_TIMEOUT_S)  # every GPU times at once, as on a loaded node
    # Its siblings are no other tenant: a ROCm process is listed on every GPU it opened.
    target.kind.own_pids |= set(_node_pids)
    rows = measure_points(f"{name} gpu {index}", dev, bench, target, gpu, log, later=later)
    name_kernels(later)  # once this GPU's windows are timed
    return [asdict(replace(row, device=name, gpu=index)) for row in rows]


def measure_node(
    name: str,
    dev: DictConfig,
    bench: BenchSettings,
    gpus: list[GpuInfo],
    log: Callable[[str], None] = say,
) -> list[Measurement]:
    """Every GPU of a node measured at once, one process each (mamf-finder's advice: a node's
    GPUs differ, by up to about 10% sustained, and a lone GPU runs cooler than a loaded node):
    each GPU's rows, by index. The interpretation takes the median GPU as the device's."""
    log(
        f"{name}: {len(gpus)} GPUs of it here, measured at once: "
        + ", ".join(f"{gpu['index']}" for gpu in gpus)
    )
    spawn = multiprocessing.get_context("spawn")  # a fresh process: CUDA does not survive fork
    barrier, pids = spawn.Barrier(len(gpus)), spawn.Array("q", len(gpus))  # a pid per slot
    with ProcessPoolExecutor(
        len(gpus), mp_context=spawn, initializer=_join, initargs=(barrier, pids)
    ) as pool:
        each = [
            pool.submit(measure_gpu, name, dev, bench, gpu, slot) for slot, gpu in enumerate(gpus)
        ]
    # A GPU's failure ends the stage, with its own error: not the others' broken barrier.
    errors = [error for future in each if (error := future.exception())]
    if errors:
        raise next((e for e in errors if not isinstance(e, BrokenBarrierError)), errors[0])
    done = [future.result() for future in each]
    return [
        measurement_from_dict(row, f"{name} gpu {i}") for i, rows in enumerate(done) for row in rows
    ]


# The compiled kernels' windows under the lab's timed window (bench.min_seconds, 2 s): an FMA
# window is calibrated to 0.3 s, each cache level's to 0.1 s, the clock's to 0.15 s (the 0.13 s
# its fixed count of adds had taken at 3 GHz); on this project's 2-core VM a tenth of that
# measures the same figures within their spread.
LAB_WINDOW_S, FMA_WINDOW_S, CACHE_WINDOW_S, CLOCK_WINDOW_S = 2.0, 0.3, 0.1, 0.15


def compiled_window_s(bench: BenchSettings, longest: float) -> float:
    """A compiled kernel's window: `longest` under the lab's timed window, shorter in
    proportion under a shorter one (a quick look, a test), never under 10 ms."""
    return max(0.01, min(longest, longest * bench.min_seconds / LAB_WINDOW_S))


def describe_fma(fma: FmaCeiling) -> str:
    if fma["gflops"] is None:
        return f"{fma['vector']}: {fma['reason']}"
    return f"{fma['gflops'] / 1e3:.4g} TFLOP/s ({fma['vector']}, every core)"


def describe_fma_clock(clock: FmaClock) -> str:
    if clock["ghz"] is None:
        return f"{clock['vector']}: {clock.get('reason', '')}"
    return f"{clock['ghz']:.3g} GHz ({clock['vector']}, every core)"


def describe_steps(steps: StepSides) -> str:
    if steps.get("reason"):
        return f"not measured: {steps['reason']}"
    flops = ar.matmul_flops(*steps["shape"])
    every, one = (ar.rounds_tflops(flops, steps[s]) for s in ("every_thread_s", "one_thread_s"))
    l2 = ar.rounds_tflops(ar.matmul_flops(*steps["in_l2"]), steps["in_l2_s"])
    shape, square = ("x".join(map(str, s)) for s in (steps["shape"], steps["in_l2"]))
    return (
        f"{steps['backend']} at {shape}: {steps['threads']} thread"
        f"{'s' * (steps['threads'] > 1)} {every:.4g} TFLOP/s, "
        f"1 thread {one:.4g}; 1 thread at {square} (in L2) {l2:.4g}"
    )


def cpu_memory_ceiling(
    target: Target,
    bench: BenchSettings,
    cores: int,
    sizes: list[CacheSize],
    clock_ghz: float | None,
) -> CopyCeiling:
    """A CPU's memory ceiling: STREAM's copy on every core at once (roofline.device.stream),
    else torch's copy of bench.copy_mib, saying why."""
    window = compiled_window_s(bench, STREAM_WINDOW_S)
    free = psutil.virtual_memory().available
    stream, why = measure_stream(cores, sizes, free, window, clock_ghz)
    if stream is not None:
        return stream
    copy = measure_memory_ceiling(target, bench, bench.copy_mib * 2**20)
    threads = f"{target.threads} threads" if target.threads else "its threads"
    how = f"torch's dst.copy_(src) of {bench.copy_mib} MiB on {threads}"
    return copy | {"how": f"{how} (STREAM's copy not measured: {why})"}


def describe_copy(memory: CopyCeiling) -> str:
    triad = memory.get("triad_gbps")
    also = f", triad {triad:.1f} GB/s" if triad is not None else ""
    return f"{memory['gbps']:.1f} GB/s (read + write{also}), {memory.get('how', '')}"


def describe_caches(caches: list[CacheBandwidth]) -> str:
    return "; ".join(
        f"{c['level']} {c['gbps']:.0f} GB/s ({binary_size(c['working_set_bytes'] or 0)} a core)"
        if c["gbps"] is not None
        else f"{c['level']} {c.get('reason', 'not measured')}"
        for c in caches
    )
