"""The lab's whole config schema: the measuring schema (roofline/configuration/measuring_config.py) and each
device's datasheet lines (`skus`), price and pod task. Read by the aggregate stage, composition and
the launcher; never by a measuring stage, so a datasheet fix re-measures nothing."""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig

from roofline.configuration.measuring_config import (
    PARAMS_FILE,
    Bound,
    Config,
    DeviceConfig,
    a_shape,
    entries,
    load_params,
)
from roofline.core.arithmetic import matmul_bytes
from roofline.core.dtypes import NAMES
from roofline.device.programs import MAX_CLOCK_GHZ, MIN_CLOCK_GHZ
from roofline.interpretation.datasheets import ANY


@dataclass
class Published:
    """A figure someone published for this SKU's work, beside which the report puts ours."""

    dtype: str = MISSING
    shape: list[int] = MISSING  # [M, N, K]
    tflops: float = MISSING
    source: str = MISSING  # where it is published, enough to find it
    # How long its timed window ran, where its source says (WINDOWS): "burst" (calls timed for
    # a second or less, as most benchmarks do), "sustained" (a window of a minute or so, its
    # clocks settled), "" unknown. The report sets ours of the same kind beside it.
    window: str = ""
    # Its source's best shape for the device (a vendor's "max achievable" figure), not this
    # SKU's lab shape: set beside ours as such, never a yardstick for a flag (interpret).
    best_shape: bool = False


# The kinds of window a published figure may be timed in ("": its source does not say).
WINDOWS = ("burst", "sustained", "")


@dataclass
class Sku:
    """One datasheet line. Peaks are dense TFLOP/s per dtype (null: none known); bandwidth in
    GB/s (1e9), memory in GB; `peak_clock_mhz` the SM clock the dense FP16 peak assumes."""

    name: str = MISSING  # exactly the name torch reports (a CPU: its model), or "*" for any
    sku: str = MISSING  # its name in the report, e.g. "H100 PCIe 80GB"
    source: str = ""  # where the figures come from
    peak_tflops: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(NAMES))
    memory_bandwidth_gbps: float | None = None
    memory_gb: float | None = None
    peak_clock_mhz: float | None = None
    sm_count: int | None = None
    clock_ghz: float | None = None  # a CPU's clock for its computed peak; null: as measured
    cost_per_hour: float | None = None  # US dollars; null where unknown
    # The lab's sanity band (low, high; the report allows +-20%) and done threshold per dtype,
    # on the line of the SKU the lab wrote them for.
    lab_band_tflops: dict[str, list[float]] = field(default_factory=dict)
    lab_done_tflops: dict[str, float] = field(default_factory=dict)
    published: list[Published] = field(default_factory=list)


@dataclass
class LabDevice(DeviceConfig):
    """A device's conf file whole: what it measures, and its datasheets."""

    skus: dict[str, Sku] = field(default_factory=dict)
    # Whether a device never measured gets its own line in the report and roof in the plot (the
    # lab's devices); otherwise it appears once measured.
    show_pending: bool = True
    # GPUs: SkyPilot's accelerator names for this device, in order of preference; empty: no
    # pod task file.
    sky_accelerators: list[str] = field(default_factory=list)


@dataclass
class LabConfig(Config):
    devices: dict[str, LabDevice] = field(default_factory=dict)
    # The devices the lab's Definition of Done asks to be measured.
    lab_devices: list[str] = field(default_factory=list)


def check(cfg: DictConfig, conf: Path | None = None) -> list[str]:
    """The datasheet values a schema's types let through but are wrong."""
    errors = [
        f"lab_devices has {name!r}; allowed: {', '.join(cfg.devices)}"
        for name in cfg.lab_devices
        if name not in cfg.devices
    ]
    errors += figure_errors(cfg)
    for name, dev in cfg.devices.items():
        if not dev.skus:
            errors.append(
                f"devices.{name}.skus is empty; allowed: datasheet lines, each with the exact "
                f"name torch reports, or {ANY!r} for any (docs/configuration.md: adding a SKU)"
            )
        named = [sku.name for sku in dev.skus.values()]
        for twice in sorted({n for n in named if named.count(n) > 1}):
            errors.append(f"devices.{name}.skus: {twice!r} names two lines; allowed: one each")
        for key, sku in dev.skus.items():
            where = f"devices.{name}.skus.{key}"
            for table in ("peak_tflops", "lab_band_tflops", "lab_done_tflops"):
                for dtype in sku[table]:
                    if dtype not in NAMES:
                        errors.append(
                            f"{where}.{table} has key {dtype!r}; allowed: {', '.join(NAMES)}"
                        )
            for dtype, band in sku.lab_band_tflops.items():
                if len(band) != 2 or not 0 < band[0] <= band[1] or not math.isfinite(band[1]):
                    errors.append(
                        f"{where}.lab_band_tflops.{dtype}={list(band)}; allowed: [low, high], "
                        "0 < low <= high"
                    )
            for i, figure in enumerate(sku.published):
                if figure.window not in WINDOWS:
                    errors.append(
                        f"{where}.published[{i}].window={figure.window!r}; allowed: burst, "
                        "sustained, or '' where its source does not say"
                    )
                if (
                    figure.dtype not in NAMES
                    or len(figure.shape) != 3
                    or not (math.isfinite(figure.tflops) and figure.tflops > 0)
                ):
                    errors.append(
                        f"{where}.published[{i}]: dtype {figure.dtype!r}, shape "
                        f"{list(figure.shape)}, {figure.tflops} TFLOP/s; allowed: a dtype of "
                        f"{', '.join(NAMES)}, [M, N, K], TFLOP/s > 0"
                    )
            if sku.memory_gb is not None and FIGURES[f"{SKU}.memory_gb"].holds(sku.memory_gb):
                errors += memory_errors(cfg, name, dev, sku.memory_gb, where)
    return errors


# Each datasheet figure and what it may be (its Bound's `why` is its unit): a finite number
# above 0 (at least 0: a laptop's price), a clock in the range a CPU or GPU runs at
# (roofline.device.programs.MIN_CLOCK_GHZ, MAX_CLOCK_GHZ); null where unknown, but for the
# done thresholds, which are never null.
SKU = "devices.*.skus.*"
FIGURES = {
    f"{SKU}.peak_tflops.*": Bound(0.0, math.inf, "TFLOP/s", above=True),
    f"{SKU}.memory_bandwidth_gbps": Bound(0.0, math.inf, "GB/s", above=True),
    f"{SKU}.memory_gb": Bound(0.0, math.inf, "GB", above=True),
    f"{SKU}.peak_clock_mhz": Bound(1e3 * MIN_CLOCK_GHZ, 1e3 * MAX_CLOCK_GHZ, "MHz", above=True),
    f"{SKU}.sm_count": Bound(0.0, math.inf, "SMs", above=True),
    f"{SKU}.clock_ghz": Bound(MIN_CLOCK_GHZ, MAX_CLOCK_GHZ, "GHz", above=True),
    f"{SKU}.cost_per_hour": Bound(0.0, math.inf, "US dollars an hour"),
    f"{SKU}.lab_done_tflops.*": Bound(0.0, math.inf, "TFLOP/s", above=True),
}


def figure_errors(cfg: DictConfig) -> list[str]:
    """The datasheet figures no device has: a peak, bandwidth, memory, clock, SM count, price
    or done threshold that is not a finite number in its range."""
    errors = []
    for pattern, bound in FIGURES.items():
        for key, value in entries(cfg, pattern):
            if value is None or bound.holds(value):
                continue
            span = f"{'above' if bound.above else 'at least'} {bound.low:g}"
            span += f", at most {bound.high:g}" if bound.high != math.inf else ""
            unknown = "" if "lab_done" in pattern else ", or null where unknown"
            errors.append(f"{key}={value}; allowed: a finite number of {bound.why} {span}{unknown}")
    return errors


def memory_errors(cfg: DictConfig, name: str, dev: Any, memory_gb: float, where: str) -> list[str]:
    """The device's shapes and copy buffers that a SKU's memory cannot hold."""
    errors = []
    copy_bytes = 2 * cfg.bench.copy_mib * 2**20  # source and destination
    if copy_bytes > 0.8 * memory_gb * 1e9:
        errors.append(
            f"bench.copy_mib={cfg.bench.copy_mib}: its two buffers need {copy_bytes / 1e9:.1f} "
            f"GB; allowed: at most 80% of {where}'s {memory_gb:g} GB"
        )
    for shape in dev.shapes:
        for dtype in dev.dtypes:
            need = matmul_bytes(*shape, dtype.name) if a_shape(shape) else 0  # else refused
            if need > memory_gb * 1e9:
                errors.append(
                    f"devices.{name}.shapes has {list(shape)}: its {dtype.name} operands need "
                    f"{need / 1e9:.1f} GB; allowed: at most {where}'s {memory_gb:g} GB"
                )
    return errors


def load_lab_params(path: Path = PARAMS_FILE) -> DictConfig:
    """params.yaml whole, datasheets included, checked."""
    return load_params(path, LabConfig, (check,))
