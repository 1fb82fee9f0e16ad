"""Measure one device: every (dtype, shape) point and the copy bandwidth, as a results record."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import torch

from roofline import arithmetic as ar
from roofline import telemetry
from roofline.errors import ConfigError
from roofline.hardware import cpu_clock_ghz
from roofline.kernels import WrongResult, measure_copy, measure_matmul, unsupported_reason
from roofline.progress import progress, say
from roofline.provenance import environment, git_revision, versions
from roofline.schema import Row, empty_row, measured_row
from roofline.timing import timer_for

if TYPE_CHECKING:  # omegaconf stays optional: the GPU suite runs without it
    from omegaconf import DictConfig


def points(dev: DictConfig) -> list[tuple[str, list[int]]]:
    return [(dtype.name, list(shape)) for dtype in dev.dtypes for shape in dev.shapes]


def pending_record(name: str, dev: DictConfig) -> dict[str, Any]:
    reason = f"never measured: run `uv run dvc repro` on a machine with {dev.sku}"
    rows = [empty_row(name, dtype, shape, "pending", reason) for dtype, shape in points(dev)]
    return {
        "device": name,
        "sku": dev.sku,
        "status": "pending",
        "rows": [asdict(row) for row in rows],
    }


def check_fits(name: str, dev: DictConfig, memory_bytes: int) -> None:
    """Refuse, before measuring anything, a shape whose operands (and the float64 copy of B
    the correctness check makes) cannot fit in this device's memory."""
    for dtype, (m, n, k) in points(dev):
        need = ar.matmul_bytes(m, n, k, dtype) + k * n * 8
        if need > 0.8 * memory_bytes:
            raise ConfigError(
                f"devices.{name}.shapes has {[m, n, k]}: {dtype} needs {need / 1e9:.1f} GB with "
                f"its check; allowed: at most 80% of this device's {memory_bytes / 1e9:.1f} GB"
            )


def cpu_peaks(dev: DictConfig, found: dict[str, Any], cores: int) -> dict[str, tuple[float, str]]:
    """The CPU's dense peak per dtype: from conf when set, else cores x clock x FLOP/cycle."""
    clock, clock_source = cpu_clock_ghz(dev, cores)
    peaks = {}
    for dtype in ar.CPU_FLOP_PER_CYCLE:
        if dtype in dev.peak_tflops:
            peaks[dtype] = (float(dev.peak_tflops[dtype]), "set in conf")
            continue
        native = ar.cpu_flop_per_cycle(dtype, set(found["isa"]))
        if native:
            flop, isa = native
            peaks[dtype] = (
                ar.cpu_peak_tflops(cores, clock, flop),
                f"{cores} cores x {clock:.2f} GHz ({clock_source}) x {flop} FLOP/cycle, {isa}",
            )
    return peaks


@dataclass
class Target:
    """Where the kernels run, and what is known of it before they do."""

    device: str  # torch device string
    cache_bytes: int | None  # last-level cache (CPU) or L2 (GPU), for buffer rotation
    memory_bytes: int
    peaks: dict[str, tuple[float, str]]  # dense peak TFLOP/s and its source, per dtype
    native: set[str] | None  # CPU dtypes with native hardware support
    monitor: Callable[[], Any] | None = None  # NVML sampler for the timed window (GPUs)

    @property
    def kind(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"


def cpu_target(dev: DictConfig, found: dict[str, Any]) -> Target:
    cores = found["logical_cores"]
    torch.set_num_threads(cores)  # all cores; torch.utils.benchmark would use one
    peaks = cpu_peaks(dev, found, cores)
    return Target("cpu", found.get("cache_bytes"), found["memory_bytes"], peaks, set(peaks))


def gpu_target(dev: DictConfig, found: dict[str, Any], log: Callable[[str], None]) -> Target:
    device = f"cuda:{found['index']}"
    torch.cuda.set_device(device)
    peaks = {dtype: (float(tf), "datasheet (dense)") for dtype, tf in dev["peak_tflops"].items()}
    try:
        handle = telemetry.nvml_handle(found["index"], found.get("uuid"))
        monitor = lambda: telemetry.Sampler(handle)  # noqa: E731
    except Exception as err:  # measure anyway; the report then says telemetry is missing
        log(f"no NVML telemetry: {err}")
        monitor = None
    return Target(device, found.get("l2_bytes"), found["memory_bytes"], peaks, None, monitor)


def measure_point(
    name: str,
    dtype: str,
    shape: list[int],
    target: Target,
    bench: DictConfig,
    found: dict[str, Any],
) -> Row:
    """One (dtype, shape): skipped, failed (wrong result, never timed) or measured."""
    skip = unsupported_reason(
        dtype, target.kind, target.native, found.get("compute_capability"), shape
    )
    if skip:
        return empty_row(name, dtype, shape, "skipped", skip)
    try:
        point = measure_matmul(
            *shape,
            dtype,
            target.device,
            timer_for(target.kind),
            seed=bench.seed,
            warmup=bench.warmup,
            repeats=bench.repeats,
            check_rows=bench.check_rows,
            cache_bytes=target.cache_bytes,
            min_seconds=bench.min_seconds,
            monitor=target.monitor,
        )
    except WrongResult as err:
        return empty_row(name, dtype, shape, "failed", f"wrong result, not timed: {err}")
    peak, source = target.peaks.get(dtype, (None, f"no datasheet peak for {dtype}"))
    summary = telemetry.summarize(point.telemetry, found.get("max_sm_clock_mhz"))
    return measured_row(name, dtype, shape, point.samples, peak, source, point.check_error, summary)


def describe_row(row: Row) -> str:
    where = f"{row.device} {row.dtype} {[row.m, row.n, row.k]}"
    if row.status != "measured":
        return f"{where}: {row.status}: {row.reason}"
    text = f"{where}: {row.achieved_tflops:.4g} TFLOP/s"
    if row.mfu is not None:
        text += f", MFU {row.mfu:.1%}"
    text += f" (median {row.median_s:.4g} s, spread {row.spread:.1%}, {row.repeats} reps)"
    if row.sm_clock_mhz is not None:
        text += f", SM {row.sm_clock_mhz:.0f} MHz, {row.power_w:.0f} W"
    return text


def measure_memory_ceiling(target: Target, bench: DictConfig, nbytes: int) -> dict[str, Any]:
    """A copy of `nbytes` on the device, bytes read and written both counted: its measured
    memory-bandwidth ceiling, with every sample."""
    samples = measure_copy(
        nbytes,
        target.device,
        timer_for(target.kind),
        seed=bench.seed,
        warmup=bench.warmup,
        repeats=bench.repeats,
        min_seconds=bench.min_seconds,
    )
    stats = ar.summarize(samples)
    return {
        "bytes_moved": 2 * nbytes,
        **stats,
        "gbps": ar.gbps(2 * nbytes, stats["median_s"]),
        "samples_s": samples,
    }


def target_for(dev: DictConfig, found: dict[str, Any], log: Callable[[str], None]) -> Target:
    return cpu_target(dev, found) if dev.kind.name == "cpu" else gpu_target(dev, found, log)


def run_info(started: datetime, t0: float, kind: str) -> dict[str, Any]:
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
    bench: DictConfig,
    found: dict[str, Any],
    identity: dict[str, Any],
    log: Callable[[str], None] = say,
) -> dict[str, Any]:
    """Every point of a device, then its copy bandwidth, as its results record."""
    kind = dev.kind.name
    started, t0 = datetime.now(UTC), time.perf_counter()
    target = target_for(dev, found, log)
    check_fits(name, dev, target.memory_bytes)
    rows = []
    with progress(points(dev), name) as bar:
        for dtype, shape in bar:
            bar.set_postfix_str(f"{dtype} {shape}")
            rows.append(measure_point(name, dtype, shape, target, bench, found))
            log(describe_row(rows[-1]))
    memory = measure_memory_ceiling(target, bench, bench.copy_mib * 2**20)
    log(f"{name} copy {bench.copy_mib} MiB: {memory['gbps']:.1f} GB/s (read + write)")
    return {
        "device": name,
        "sku": dev.sku,
        "status": "measured",
        "hardware": identity,
        "found": {k: v for k, v in found.items() if k != "uuid"},
        "run": run_info(started, t0, kind),
        "memory": memory,
        "rows": [asdict(row) for row in rows],
    }
