"""Sweeps: shapes across the ridge for one device, measured within a time budget."""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from roofline.core.arithmetic import matmul_flops
from roofline.core.measurement import empty
from roofline.core.progress import progress, say
from roofline.machines.record_types import Fingerprint, Record
from roofline.machines.records import sweep_record
from roofline.measuring.benchmark import run_info, started
from roofline.measuring.measure import describe, measure_point, name_kernels, target_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from omegaconf import DictConfig

    from roofline.device.description import Found
    from roofline.device.timing import BenchSettings


def sweep_shapes(sweep: DictConfig, kind: str) -> list[tuple[str, list[int]]]:
    """(series, [M, N, K]) for a device kind, cheapest first, so a budget that runs out skips
    the most expensive points."""
    shapes = [("square", [n, n, n]) for n in sweep.square.get(kind, [])]
    nk = sweep.skinny_nk.get(kind, 0)
    if nk:
        shapes += [("skinny", [m, nk, nk]) for m in sweep.skinny_m]
    shapes += [("best-shape", list(shape)) for shape in sweep.best_shape.get(kind, [])]
    return sorted(shapes, key=lambda item: matmul_flops(*item[1]))


def measure_sweep(
    name: str,
    dev: DictConfig,
    bench: BenchSettings,
    sweep: DictConfig,
    found: Found,
    fingerprint: Fingerprint,
    log: Callable[[str], None] = say,
) -> Record:
    """Every (shape, dtype) of the sweep on this device until its budget runs out."""
    kind = dev.kind.name
    begun = started()
    t0 = begun[1]
    target = target_for(kind, found, log)
    settings = replace(
        bench,
        min_seconds=sweep.min_seconds,  # the sweep's own window
        # The device is busy from one point to the next, so its clocks are warm: a short warm-up.
        warmup_seconds=min(bench.warmup_seconds, sweep.min_seconds),
    )
    budget = sweep.budget_s.get(kind, 0.0)
    rows, later = [], []  # `later`: the kernels to name once every window is timed
    plan = [
        (series, shape, d.name, backend)
        for series, shape in sweep_shapes(sweep, kind)
        for d in dev.dtypes
        for backend in dev.backends
    ]
    with progress(plan, f"{name} sweep {sweep.name}") as bar:
        for series, shape, dtype, backend in bar:
            bar.set_postfix_str(f"{series} {dtype} {shape} {backend}")
            if time.perf_counter() - t0 > budget:
                reason = f"the sweep's {budget:g} s budget ran out"
                row = empty(name, dtype, shape, "skipped", reason, backend)
            else:
                row = measure_point(
                    name, dtype, shape, target, settings, found, backend, log=log, later=later
                )
            row.series = series
            rows.append(row)
            log(f"[{series}] {describe(row)}")
    name_kernels(later)
    return sweep_record(
        name,
        sweep.name,
        "measured",
        fingerprint=fingerprint,
        run=run_info(*begun, kind),
        rows=[asdict(row) for row in rows],
    )
