"""Measure one device: every (dtype, shape) point, the copy bandwidth and, on a CPU, its clock,
as the device's results record. Measurements only: the aggregate stage interprets them."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from roofline.core import arithmetic as ar
from roofline.core.errors import ConfigError, HardwareError
from roofline.core.progress import progress, say
from roofline.core.schema import SCHEMA_VERSION
from roofline.device.backends import libraries
from roofline.device.description import CpuInfo, Found
from roofline.device.peakflops import (
    CacheBandwidth,
    FmaCeiling,
    binary_size,
    cpu_clock,
    measure_cache_bandwidth,
    measure_fma,
)
from roofline.machines.records import Fingerprint, Record, RunInfo, points
from roofline.measuring.measure import (
    describe,
    measure_memory_ceiling,
    measure_point,
    measure_sustained,
    target_for,
)
from roofline.measuring.provenance import environment, git_revision, versions

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from roofline.device.timing import BenchSettings


def check_fits(name: str, dev: DictConfig, memory_bytes: int, copy_bytes: int) -> None:
    """Refuse, before measuring anything, a shape whose operands (and the float64 copy of B
    the correctness check makes), or a copy buffer (source and destination), that cannot fit
    in this device's memory."""
    allowed = f"allowed: at most 80% of this device's {memory_bytes / 1e9:.1f} GB"
    for dtype, (m, n, k), _ in points(dev):
        need = ar.matmul_bytes(m, n, k, dtype) + k * n * 8
        if need > 0.8 * memory_bytes:
            raise ConfigError(
                f"devices.{name}.shapes has {[m, n, k]}: {dtype} needs {need / 1e9:.1f} GB with "
                f"its check; {allowed}"
            )
    if 2 * copy_bytes > 0.8 * memory_bytes:
        raise ConfigError(
            f"bench.copy_mib={copy_bytes >> 20}: its two buffers need "
            f"{2 * copy_bytes / 1e9:.1f} GB; {allowed}"
        )


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


def measure_device(
    name: str,
    dev: DictConfig,
    bench: BenchSettings,
    found: Found,
    fingerprint: Fingerprint,
    log: Callable[[str], None] = say,
) -> Record:
    """Every point of a device, then its copy bandwidth (and a CPU's clock), as its record,
    with the fingerprint (hardware, torch) it was measured under."""
    kind = dev.kind.name
    begun = started()
    target = target_for(kind, found, log)
    check_fits(name, dev, target.memory_bytes, bench.copy_mib * 2**20)
    rows = []
    with progress(points(dev), name) as bar:
        for dtype, shape, backend in bar:
            bar.set_postfix_str(f"{dtype} {shape} {backend}")
            rows.append(measure_point(name, dtype, shape, target, bench, found, backend, log=log))
            log(describe(rows[-1]))
    # The headline point again, in one long window (GPUs; a CPU only when asked).
    if sustained := measure_sustained(name, rows, target, bench, found, log):
        rows.append(sustained)
        log(f"[sustained] {describe(sustained)}")
    memory = measure_memory_ceiling(target, bench, bench.copy_mib * 2**20)
    log(f"{name} copy {bench.copy_mib} MiB: {memory['gbps']:.1f} GB/s (read + write)")
    record: Record = {
        "schema": SCHEMA_VERSION,
        "device": name,
        "status": "measured",
        "hardware": fingerprint["hardware"],
        "fingerprint": fingerprint,
        # The same part, without the UUID that names one card of the model.
        "found": cast(Found, {k: v for k, v in found.items() if k != "uuid"}),
        "run": run_info(*begun, kind),
        "memory": memory,
        "rows": [asdict(row) for row in rows],
    }
    if kind == "cpu":  # the CPU itself: its clock, and its FMA ceiling at the widest vector
        cpu = cast(CpuInfo, found)
        cores, isa = cpu["logical_cores"], cpu["isa"]
        record["clock"] = cpu_clock(cores)
        record["fma"] = measure_fma(cores, isa, compiled_window_s(bench, FMA_WINDOW_S))
        log(f"{name} FMA ceiling: {describe_fma(record['fma'])}")
        record["caches"] = measure_cache_bandwidth(
            cores, isa, compiled_window_s(bench, CACHE_WINDOW_S)
        )
        log(f"{name} read bandwidth, every core: {describe_caches(record['caches'])}")
    record["libraries"] = libraries(list(dev.backends))
    return record


# The compiled kernels' windows under the lab's timed window (bench.min_seconds, 2 s): an FMA
# window is calibrated to 0.3 s, each cache level's to 0.1 s; on this project's 2-core VM a
# tenth of that measures the same figures within their spread.
LAB_WINDOW_S, FMA_WINDOW_S, CACHE_WINDOW_S = 2.0, 0.3, 0.1


def compiled_window_s(bench: BenchSettings, longest: float) -> float:
    """A compiled kernel's window: `longest` under the lab's timed window, shorter in
    proportion under a shorter one (a quick look, a test), never under 10 ms."""
    return max(0.01, min(longest, longest * bench.min_seconds / LAB_WINDOW_S))


def describe_fma(fma: FmaCeiling) -> str:
    if fma["gflops"] is None:
        return f"{fma['vector']}: {fma['reason']}"
    return f"{fma['gflops'] / 1e3:.4g} TFLOP/s ({fma['vector']}, every core)"


def describe_caches(caches: list[CacheBandwidth]) -> str:
    return "; ".join(
        f"{c['level']} {c['gbps']:.0f} GB/s ({binary_size(c['working_set_bytes'] or 0)} a core)"
        if c["gbps"] is not None
        else f"{c['level']} {c.get('reason', 'not measured')}"
        for c in caches
    )
