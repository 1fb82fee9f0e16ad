"""The results schema, defined once: one Row per (device, dtype, shape).

Each device's benchmark writes its rows (with every timing sample) to its own results.json;
aggregate checks them against this schema and writes results.csv."""

import contextlib
import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline import arithmetic as ar
from roofline.errors import SchemaError

STATUSES = ("measured", "pending", "skipped", "failed")


@dataclass
class Row:
    device: str
    dtype: str
    m: int
    n: int
    k: int
    status: str
    series: str = (
        "lab"  # lab (the device's configured shapes), or a sweep's square / skinny / best-shape
    )
    reason: str = ""
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    spread: float | None = None  # (max - min) / median
    repeats: int | None = None
    achieved_tflops: float | None = None
    achieved_bw_gbps: float | None = None
    arithmetic_intensity: float | None = None
    peak_tflops: float | None = None
    peak_source: str = ""
    mfu: float | None = None
    check_error: float | None = None
    # GPU telemetry over the timed window (NVML); empty on CPUs.
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_w: float | None = None
    temperature_max_c: float | None = None
    joules_per_tflop: float | None = None
    throttle_reasons: str = ""
    flag: str = ""  # non-empty marks a number that cannot be right
    samples_s: list[float] = field(default_factory=list)


NUMBERS = (
    "median_s",
    "min_s",
    "max_s",
    "spread",
    "repeats",
    "achieved_tflops",
    "achieved_bw_gbps",
    "arithmetic_intensity",
    "peak_tflops",
    "mfu",
    "check_error",
)
CSV_COLUMNS = [f.name for f in dataclasses.fields(Row) if f.name != "samples_s"]


def measured_row(
    device: str,
    dtype: str,
    shape: list[int],
    samples: list[float],
    peak_tflops: float | None,
    peak_source: str,
    check_error: float,
    telemetry: dict[str, Any] | None = None,
) -> Row:
    """A measured row: every figure derived from the median of the samples; `telemetry` is
    a summary from roofline.telemetry.summarize (GPUs)."""
    m, n, k = shape
    stats = ar.summarize(samples)
    flops, nbytes = ar.matmul_flops(m, n, k), ar.matmul_bytes(m, n, k, dtype)
    achieved = ar.tflops(flops, stats["median_s"])
    row = Row(
        device=device,
        dtype=dtype,
        m=m,
        n=n,
        k=k,
        status="measured",
        **stats,
        repeats=len(samples),
        achieved_tflops=achieved,
        achieved_bw_gbps=ar.gbps(nbytes, stats["median_s"]),
        arithmetic_intensity=ar.intensity(flops, nbytes),
        peak_tflops=peak_tflops,
        peak_source=peak_source,
        check_error=check_error,
        samples_s=list(samples),
    )
    if peak_tflops:
        row.mfu = ar.mfu(achieved, peak_tflops)
        if achieved > peak_tflops:
            row.flag = (
                f"above the dense peak ({achieved:.3g} > {peak_tflops:.3g} TFLOP/s): a bug "
                "in the timing, the FLOP count or the peak, not a result"
            )
    if telemetry:
        row.sm_clock_mhz = telemetry["sm_clock_mhz"]
        row.sm_clock_max_mhz = telemetry["sm_clock_max_mhz"]
        row.power_w = telemetry["power_w"]
        row.temperature_max_c = telemetry["temperature_max_c"]
        row.throttle_reasons = "+".join(telemetry["throttle_reasons"])
        row.joules_per_tflop = ar.joules_per_tflop(row.power_w, stats["median_s"], flops)
    return row


def empty_row(device: str, dtype: str, shape: list[int], status: str, reason: str) -> Row:
    """A pending, skipped or failed row: it carries no numbers."""
    m, n, k = shape
    return Row(device=device, dtype=dtype, m=m, n=n, k=k, status=status, reason=reason)


def row_from_dict(data: dict[str, Any], where: str) -> Row:
    """A Row from JSON, or SchemaError naming the file and row at fault."""
    names = {f.name for f in dataclasses.fields(Row)}
    unknown, missing = set(data) - names, {"device", "dtype", "m", "n", "k", "status"} - set(data)
    if unknown or missing:
        raise SchemaError(f"{where}: unknown fields {sorted(unknown)}, missing {sorted(missing)}")
    row = Row(**data)
    if row.status not in STATUSES:
        raise SchemaError(f"{where}: status {row.status!r}; allowed: {', '.join(STATUSES)}")
    numbers = {name: getattr(row, name) for name in NUMBERS if getattr(row, name) is not None}
    for name, value in numbers.items():
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise SchemaError(f"{where}: {name}={value!r}; allowed: a finite number >= 0")
    if row.status == "measured":
        if row.median_s is None or not row.samples_s:
            raise SchemaError(f"{where}: measured without median_s or samples_s")
        if abs(ar.summarize(row.samples_s)["median_s"] - row.median_s) > 1e-12 * row.median_s:
            raise SchemaError(f"{where}: median_s {row.median_s} is not the median of samples_s")
    elif numbers or row.samples_s:
        raise SchemaError(f"{where}: a {row.status} row carries numbers {sorted(numbers)}")
    return row


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise SchemaError(
            f"{path} is not valid JSON ({err}); restore it with `uv run dvc checkout {path}`"
        ) from err


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to; renamed onto `path` when the block ends, and
    removed if it fails: readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
