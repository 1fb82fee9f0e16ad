"""Measure one device: every (dtype, shape) point and the copy bandwidth, as a results record."""

import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import torch
from omegaconf import DictConfig

from roofline import arithmetic as ar
from roofline.config import ConfigError, operand_bytes
from roofline.hardware import cpu_clock_ghz
from roofline.kernels import WrongResult, measure_copy, measure_matmul, unsupported_reason
from roofline.provenance import git_revision, versions
from roofline.schema import empty_row, measured_row
from roofline.timing import timer_for


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
        need = operand_bytes([m, n, k], dtype) + k * n * 8
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


def measure_device(
    name: str,
    dev: DictConfig,
    bench: DictConfig,
    found: dict[str, Any],
    identity: dict[str, Any],
    log=print,
) -> dict[str, Any]:
    kind = dev.kind.name
    started, t0 = datetime.now(UTC), time.perf_counter()
    if kind == "cpu":
        cores = found["logical_cores"]
        torch.set_num_threads(cores)  # all cores; torch.utils.benchmark would use one
        device, cache, memory = "cpu", found.get("cache_bytes"), found["memory_bytes"]
        peaks = cpu_peaks(dev, found, cores)
        native = set(peaks)
    else:
        device, cache, memory = (
            f"cuda:{found['index']}",
            found.get("l2_bytes"),
            found["memory_bytes"],
        )
        torch.cuda.set_device(device)
        peaks = {dtype: (float(tf), "datasheet (dense)") for dtype, tf in dev.peak_tflops.items()}
        native = None
    check_fits(name, dev, memory)
    timer = timer_for(kind)
    rows = []
    for dtype, shape in points(dev):
        skip = unsupported_reason(dtype, kind, native, found.get("compute_capability"))
        if skip:
            rows.append(empty_row(name, dtype, shape, "skipped", skip))
            log(f"{name} {dtype} {shape}: skipped: {skip}")
            continue
        try:
            point = measure_matmul(
                *shape,
                dtype,
                device,
                timer,
                seed=bench.seed,
                warmup=bench.warmup,
                repeats=bench.repeats,
                check_rows=bench.check_rows,
                cache_bytes=cache,
            )
        except WrongResult as err:
            rows.append(empty_row(name, dtype, shape, "failed", f"wrong result, not timed: {err}"))
            log(f"{name} {dtype} {shape}: FAILED: {err}")
            continue
        peak, source = peaks.get(dtype, (None, "no peak known for this dtype"))
        row = measured_row(name, dtype, shape, point.samples, peak, source, point.check_error)
        rows.append(row)
        mfu = f", MFU {row.mfu:.1%}" if row.mfu is not None else ""
        log(
            f"{name} {dtype} {shape}: {row.achieved_tflops:.3f} TFLOP/s{mfu} "
            f"(median {row.median_s:.4g} s, spread {row.spread:.1%}, {row.repeats} reps)"
        )
    copy_bytes = bench.copy_mib * 2**20
    copy_samples = measure_copy(
        copy_bytes, device, timer, seed=bench.seed, warmup=bench.warmup, repeats=bench.repeats
    )
    copy = ar.summarize(copy_samples)
    copy_gbps = ar.gbps(2 * copy_bytes, copy["median_s"])
    log(f"{name} copy {bench.copy_mib} MiB: {copy_gbps:.1f} GB/s (read + write)")
    return {
        "device": name,
        "sku": dev.sku,
        "status": "measured",
        "hardware": identity,
        "run": {
            "started_at": started.isoformat(timespec="seconds"),
            "wall_s": time.perf_counter() - t0,
            "git_revision": git_revision(),
            "versions": versions(),
            "threads": torch.get_num_threads() if kind == "cpu" else None,
        },
        "memory": {
            "bytes_moved": 2 * copy_bytes,
            **copy,
            "gbps": copy_gbps,
            "samples_s": copy_samples,
        },
        "rows": [asdict(row) for row in rows],
    }
