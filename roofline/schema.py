"""The measurement schema, defined once: what a measuring stage records of each (device,
dtype, shape) point, a `Measurement` (every timing sample, the correctness check, GPU
telemetry), and of each knob, a `KnobMeasurement`; their checks when read back; atomic writes.

What the aggregate stage derives from them (results.csv's rows, knobs.csv's) is in
roofline/rows.py, which no measuring stage imports: a renamed column or a reworded flag
re-renders the deliverables and re-measures nothing."""

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

from roofline.errors import SchemaError

STATUSES = ("measured", "pending", "skipped", "failed")


@dataclass
class Measurement:
    """One point as measured (a row of results.json / sweep.json)."""

    device: str
    dtype: str
    m: int
    n: int
    k: int
    status: str
    # lab (the device's configured shapes), or a sweep's square / skinny / best-shape
    series: str = "lab"
    backend: str = "torch"  # the library it went through (roofline.backends)
    reason: str = ""
    check_error: float | None = None  # max relative error against float64, before timing
    samples_s: list[float] = field(default_factory=list)  # every timed call
    timing: str = ""  # how the samples were timed (host clock, events back to back, CUDA graph)
    # GPU telemetry over the timed window (NVML); empty on CPUs.
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    power_w: float | None = None
    energy_j: float | None = None  # the driver's energy counter over the timed window
    power_source: str = ""  # the energy counter, or the mean reading where it is unsupported
    temperature_max_c: float | None = None
    throttle_reasons: str = ""  # clock-event reasons seen, idleness left out
    other_processes: str = ""  # other processes computing on the GPU during the window
    telemetry_errors: str = ""  # NVML reads that failed


# The numbers a measurement records; a row that was not measured carries none of them.
MEASURED_NUMBERS = (
    "check_error",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "power_w",
    "temperature_max_c",
)


@dataclass
class KnobMeasurement:
    """One knob as measured (a row of knobs.json): both sides' samples, interleaved rounds."""

    device: str
    knob: str
    baseline: str
    variant: str
    dtype: str
    m: int
    n: int
    k: int
    status: str
    reason: str = ""
    lab_turns: bool | None = None  # the lab kernel runs the variant / leaves it / says nothing
    baseline_check_error: float | None = None
    variant_check_error: float | None = None
    baseline_samples_s: list[float] = field(default_factory=list)
    variant_samples_s: list[float] = field(default_factory=list)


def knob_from_dict(data: Any, where: str) -> KnobMeasurement:
    """A KnobMeasurement from JSON, or SchemaError naming the file and row at fault."""
    names = {f.name for f in dataclasses.fields(KnobMeasurement)}
    if not isinstance(data, dict) or set(data) - names:
        unknown = sorted(set(data) - names) if isinstance(data, dict) else "not an object"
        raise SchemaError(f"{where}: not a knob row ({unknown})")
    point = KnobMeasurement(**data)
    if point.status not in STATUSES:
        raise SchemaError(f"{where}: status {point.status!r}; allowed: {', '.join(STATUSES)}")
    for side in ("baseline", "variant"):
        samples = getattr(point, f"{side}_samples_s")
        positive = isinstance(samples, list) and all(
            isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in samples
        )
        if not positive or (point.status == "measured") != bool(samples):
            raise SchemaError(f"{where}: {side}_samples_s={samples!r} for a {point.status} knob")
    return point


def measurement(
    device: str,
    dtype: str,
    shape: list[int],
    samples: list[float],
    check_error: float,
    telemetry: dict[str, Any] | None = None,
    backend: str = "torch",
    timing: str = "",
) -> Measurement:
    """A measured point; `telemetry` is a summary from roofline.telemetry.summarize (GPUs)."""
    m, n, k = shape
    point = Measurement(
        device,
        dtype,
        m,
        n,
        k,
        "measured",
        backend=backend,
        check_error=check_error,
        samples_s=list(samples),
        timing=timing,
    )
    if telemetry:
        point.sm_clock_mhz = telemetry["sm_clock_mhz"]
        point.sm_clock_max_mhz = telemetry["sm_clock_max_mhz"]
        point.power_w = telemetry["power_w"]
        point.energy_j = telemetry.get("energy_j")
        point.power_source = telemetry.get("power_source", "")
        point.temperature_max_c = telemetry["temperature_max_c"]
        point.throttle_reasons = "+".join(telemetry["throttle_reasons"])
        point.other_processes = "; ".join(telemetry.get("other_processes", []))
        point.telemetry_errors = "; ".join(telemetry.get("errors", []))
    return point


def empty(
    device: str, dtype: str, shape: list[int], status: str, reason: str, backend: str = "torch"
) -> Measurement:
    """A pending, skipped or failed point: it carries no numbers."""
    m, n, k = shape
    return Measurement(device, dtype, m, n, k, status, backend=backend, reason=reason)


def measurement_from_dict(data: Any, where: str) -> Measurement:
    """A Measurement from JSON, or SchemaError naming the file and row at fault."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where}: not a JSON object")
    names = {f.name for f in dataclasses.fields(Measurement)}
    unknown, missing = set(data) - names, {"device", "dtype", "m", "n", "k", "status"} - set(data)
    if unknown or missing:
        raise SchemaError(f"{where}: unknown fields {sorted(unknown)}, missing {sorted(missing)}")
    point = Measurement(**data)
    if point.status not in STATUSES:
        raise SchemaError(f"{where}: status {point.status!r}; allowed: {', '.join(STATUSES)}")
    numbers = {k: getattr(point, k) for k in MEASURED_NUMBERS if getattr(point, k) is not None}
    for name, value in numbers.items():
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise SchemaError(f"{where}: {name}={value!r}; allowed: a finite number >= 0")
    samples = point.samples_s
    if not isinstance(samples, list) or not all(
        isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in samples
    ):
        raise SchemaError(f"{where}: samples_s={point.samples_s!r}; allowed: finite seconds > 0")
    if point.samples_s:
        numbers["samples_s"] = point.samples_s
    if point.status == "measured":
        if not point.samples_s or point.check_error is None:
            raise SchemaError(f"{where}: measured without samples_s or check_error")
    elif numbers:
        raise SchemaError(f"{where}: a {point.status} row carries numbers {sorted(numbers)}")
    return point


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise SchemaError(
            f"{path} is not valid JSON ({err}); restore it with `uv run dvc checkout --force {path}`"
        ) from err


@contextlib.contextmanager
def atomic_paths(*paths: Path) -> Iterator[list[Path]]:
    """A temporary path beside each of `paths` to write to; all renamed onto theirs when the
    block ends, and all removed if it fails: readers see the old files or the new ones, never
    half of one, and a failure part-way through the block changes none of them."""
    temps = []
    try:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
            os.close(fd)
            temps.append(Path(tmp))
        yield temps
        for tmp, path in zip(temps, paths, strict=True):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """atomic_paths for one file."""
    with atomic_paths(path) as (tmp,):
        yield tmp


def json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json_text(data))


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_texts_atomic(texts: dict[Path, str]) -> None:
    """Several files, all or none (atomic_paths)."""
    with atomic_paths(*texts) as temps:
        for tmp, text in zip(temps, texts.values(), strict=True):
            tmp.write_text(text)
