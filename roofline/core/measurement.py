"""The measurement schema, defined once: what a measuring stage records of each (device,
dtype, shape) point, a `Measurement` (every timing sample, the correctness check, GPU
telemetry), and of each knob, a `KnobMeasurement`; their checks when read back. Writing and
reading files is roofline/core/files.py's.

What the aggregate stage derives from them (results.csv's rows, knobs.csv's) is in
roofline/interpretation/rows.py, which no measuring stage imports: a renamed column or a
reworded flag re-renders the deliverables and re-measures nothing."""

import dataclasses
import enum
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from roofline.core.errors import SchemaError

STATUSES = ("measured", "pending", "skipped", "failed")
# The version of the records' schema this code writes and reads; a record without one is from
# before versions (1). A newer record is refused, never read as if it were this one. Bump it
# when a field's meaning changes or a field without a default is added; a field added with a
# default needs no bump (older records read it as its default, and older code a newer record's
# as absent: checked_fields).
# 3: a measured row records its timing mode (`timing_mode`).
# 4: a GPU row records which clock-event reason held its clock, and in what share of the
# samples (`clock_reason`, `clock_reason_share`, `clock_reason_shares`), and its power limit
# (`power_limit_w`); a results record may hold a "sustained" row; a measured row records the
# kernel that ran (`kernel`). Older records read as before.
# 5: on a node with several GPUs of the device, each GPU's rows, by its torch index (`gpu`).
SCHEMA_VERSION = 5


class TimingMode(enum.StrEnum):
    """How a point's samples were timed. Only a host clock times the host along with the work, so
    only its window's share of the host can say the figure is noisy (roofline.interpretation.rows).
    """

    HOST = "host"  # a host clock around each call (roofline.device.timing.HostTimer)
    EVENTS = "events"  # device events around calls queued back to back (EventTimer)
    GRAPH = "graph"  # a CUDA graph of calls, replayed back to back, per call


# How the timers (roofline.device.kinds) and roofline.measuring.matmul describe a timing: "host
# clock", "cuda events, calls back to back" (or "mps events"; "... (a CUDA graph was not faster)"),
# "CUDA graph of 4 calls, replayed back to back". The texts records written before timing_mode carry
# (what HostTimer and a graph said then).
TIMING_TEXTS = (("host clock", TimingMode.HOST), ("CUDA graph of", TimingMode.GRAPH))


def timing_mode_of(timing: str) -> TimingMode | None:
    """The mode a timing's description names, or None (not measured, or a timer not known
    here). The one place the text is read: a record from before schema 3 has only the text."""
    for prefix, mode in TIMING_TEXTS:
        if timing.startswith(prefix):
            return mode
    return TimingMode.EVENTS if " events" in timing else None


@dataclass(kw_only=True)
class WindowTelemetry:
    """A GPU's telemetry over a timed window (NVML's or amdsmi's), as a row records it: what
    roofline.device.telemetry.window_telemetry makes of the sampler's readings. A Measurement is one,
    so each field reaches results.json, results.csv and the appendix as it is. Every field its
    default on a CPU, or where no window was sampled."""

    sm_clock_mhz: float | None = None  # the window's mean
    sm_clock_max_mhz: float | None = None  # NVML's maximum, as the probe recorded it
    mem_clock_mhz: float | None = None  # the window's mean memory clock
    power_w: float | None = None
    energy_j: float | None = None  # the driver's energy counter over the timed window
    power_source: str = ""  # the energy counter, or the mean reading where it is unsupported
    temperature_max_c: float | None = None
    throttle_reasons: str = ""  # clock-event reasons seen, idleness left out
    # The clock-event reason but idleness set in the most samples, and its share of them:
    # "none" where reasons were read and none was set, "" where they were not (a CPU, NVML
    # refusing, or a record from before schema 4, which has throttle_reasons only).
    clock_reason: str = ""
    clock_reason_share: float | None = None
    clock_reason_shares: str = ""  # every reason set, e.g. "sw_power_cap=0.9+gpu_idle=0.05"
    power_limit_w: float | None = None  # the enforced power limit (NVML), as the probe read it
    other_processes: str = ""  # other processes computing on the GPU during the window
    telemetry_errors: str = ""  # NVML reads that failed
    # The GPU's own counters over the window (NVML GPM, Hopper and newer: roofline.device.gpm),
    # each a percentage, None where not read (counter_errors says why, by name).
    gpm_graphics_busy_pct: float | None = None
    gpm_sm_busy_pct: float | None = None
    gpm_sm_occupancy_pct: float | None = None
    gpm_tensor_active_pct: float | None = None
    gpm_hmma_active_pct: float | None = None
    gpm_dram_busy_pct: float | None = None
    # The time the driver held the clock for power, for heat, within the window (seconds).
    power_held_s: float | None = None
    thermal_held_s: float | None = None
    counter_errors: str = ""  # what the counters refused: each metric's refusal, by name


@dataclass
class Measurement(WindowTelemetry):
    """One point as measured (a row of results.json / sweep.json): its telemetry fields are
    WindowTelemetry's (keyword-only, after these)."""

    device: str
    dtype: str
    m: int
    n: int
    k: int
    status: str
    # lab (the device's configured shapes), or a sweep's square / skinny / best-shape, or
    # sustained: the headline point again in one long window (BenchSettings.sustained_seconds)
    series: str = "lab"
    backend: str = "torch"  # the library it went through (roofline.device.backends)
    # The GPU's torch index where several GPUs of the device were measured at once (each GPU
    # its rows); None where one device was (a CPU, a single GPU, a record before schema 5).
    gpu: int | None = None
    reason: str = ""
    check_error: float | None = None  # max relative error against float64, before timing
    samples_s: list[float] = field(default_factory=list)  # every timed call
    timing: str = ""  # how the samples were timed (host clock, events back to back, CUDA graph)
    timing_mode: TimingMode | None = None  # the same, as a mode; None: not measured
    # The kernel that ran, as its library names it, learnt from an untimed call (a CPU's
    # checked call, a GPU's one more after timing; roofline.device.kinds, Kind.kernel):
    # cuBLAS's from torch's profiler, a CPU's from MKL's or oneDNN's verbose output or numpy's
    # BLAS; "" where it was not learnt (the log says why).
    kernel: str = ""
    # The timed window (roofline.device.timing.TimedWindow), on every device: its length, whether
    # the call cap cut it, and how much of the host it had; None where the OS does not report it.
    window_s: float | None = None  # wall seconds of the timed calls, host clock
    window_cut: str = ""  # e.g. "0.04 s of the 0.5 s asked: cut by the 10,000-call cap"
    cpu_share: float | None = None  # our CPU time / (window_s x threads); CPU devices only
    cpu_idle: float | None = None  # share of every core's time that was idle in the window
    other_runnable: int | None = None  # others' runnable threads at both ends, the fewer
    steal: float | None = None  # share of every core's time the hypervisor took in the window

    def __post_init__(self) -> None:
        # Set where the point is measured; read back from JSON as its text, or, in a record
        # from before the mode was recorded, derived from its timing's description, once here.
        if self.timing_mode is not None:
            self.timing_mode = TimingMode(self.timing_mode)
        elif isinstance(self.timing, str):
            self.timing_mode = timing_mode_of(self.timing)


# The numbers a measurement records; a row that was not measured carries none of them.
MEASURED_NUMBERS = (
    "check_error",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "power_w",
    "temperature_max_c",
    "clock_reason_share",
    "power_limit_w",
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
    # The variant's own [M, N, K] where it runs another shape than the baseline's (m, n, k).
    variant_shape: list[int] | None = None
    # Each side's mean SM clock and power over its rounds, where the knob reads a GPU's
    # telemetry (DATA_POWER_KNOB's: what the data's own power does to the clock).
    baseline_sm_clock_mhz: float | None = None
    variant_sm_clock_mhz: float | None = None
    baseline_power_w: float | None = None
    variant_power_w: float | None = None


# The knob whose gain the breakdown reads as a CPU's threading: the same BLAS call on one
# thread and on every core (roofline.measuring.knobs).
THREADS_KNOB = "1 thread -> every core"
# The knob whose sides the breakdown reads as a CPU's micro-kernel apart from its memory: one
# thread at the knob's shape, and at one whose operands fit that core's L2 (no packing and
# memory traffic to speak of there: the library's inner kernel at its own rate).
MICRO_KERNEL_KNOB = "operands in L2"
# The knob that measures the data's own power: the lab's matmul on random inputs and on constant
# ones (bits that never toggle), interleaved; an A100 ran 257 TFLOP/s on random float16 and 295
# on zeros, power-limited (thonking.ai). Never the lab's headline.
DATA_POWER_KNOB = "random -> constant inputs"


def knob_from_dict(data: Any, where: str) -> KnobMeasurement:
    """A KnobMeasurement from JSON, or SchemaError naming the file, row and field at fault."""
    point = KnobMeasurement(**checked_fields(KnobMeasurement, data, where))
    shape = point.variant_shape
    if shape is not None and (len(shape) != 3 or min(shape) < 1):
        raise SchemaError(
            f"{where}, field variant_shape: {shape!r}; allowed: [M, N, K] of whole numbers "
            f">= 1, or null; {RESTORE}"
        )
    for side in ("baseline", "variant"):
        name = f"{side}_samples_s"
        samples = check_samples(getattr(point, name), name, where)
        if (point.status == "measured") != bool(samples):
            raise SchemaError(
                f"{where}, field {name}: {len(samples)} samples in a {point.status} knob; "
                f"allowed: one at least in a measured knob, none in another; {RESTORE}"
            )
    return point


def measurement(
    device: str,
    dtype: str,
    shape: list[int],
    samples: list[float],
    check_error: float,
    telemetry: WindowTelemetry | None = None,
    backend: str = "torch",
    timing: str = "",
    timed: Any = None,
    timing_mode: TimingMode | None = None,
    kernel: str = "",
) -> Measurement:
    """A measured point; `telemetry` its window's, from roofline.device.telemetry.window_telemetry (GPUs),
    `timed` the roofline.device.timing.TimedWindow its samples were timed in; `timing_mode` the mode
    of the timer that timed it (by default, the one `timing` describes); `kernel` the kernel
    that ran, as its library names it."""
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
        timing_mode=timing_mode,
        kernel=kernel,
        **dataclasses.asdict(telemetry or WindowTelemetry()),
    )
    if timed is not None:
        point.window_s, point.window_cut = timed.seconds, timed.cut
        point.cpu_share, point.cpu_idle = timed.cpu_share, timed.idle
        point.other_runnable, point.steal = timed.other_runnable, timed.steal
    return point


def empty(
    device: str, dtype: str, shape: list[int], status: str, reason: str, backend: str = "torch"
) -> Measurement:
    """A pending, skipped or failed point: it carries no numbers."""
    m, n, k = shape
    return Measurement(device, dtype, m, n, k, status, backend=backend, reason=reason)


def measurement_from_dict(data: Any, where: str) -> Measurement:
    """A Measurement from JSON, or SchemaError naming the file, row and field at fault."""
    point = Measurement(**checked_fields(Measurement, data, where))
    numbers = {k: getattr(point, k) for k in MEASURED_NUMBERS if getattr(point, k) is not None}
    for name, value in numbers.items():
        if value < 0:
            raise SchemaError(
                f"{where}, field {name}: {value!r}; allowed: a finite number >= 0; {RESTORE}"
            )
    if check_samples(point.samples_s, "samples_s", where):
        numbers["samples_s"] = point.samples_s
    if point.status == "measured" and not point.samples_s:
        raise SchemaError(
            f"{where}, field samples_s: [] in a measured row; allowed: the seconds of every "
            f"timed call, one at least; {RESTORE}"
        )
    if point.status == "measured" and point.check_error is None:
        raise SchemaError(
            f"{where}, field check_error: null in a measured row; allowed: the check's "
            f"relative error against float64, a number >= 0; {RESTORE}"
        )
    if point.status != "measured" and numbers:
        raise SchemaError(
            f"{where}: a {point.status} row carries numbers {sorted(numbers)}; {RESTORE}"
        )
    return point


def check_samples(samples: list[float], name: str, where: str) -> list[float]:
    """Timed calls' seconds (finite numbers, as checked_fields read them), each > 0; SchemaError
    names the first that is not and how many are not, never the whole list."""
    low = [v for v in samples if not v > 0]
    if low:
        raise SchemaError(
            f"{where}, field {name}: {len(low)} of its {len(samples)} samples are not > 0, the "
            f"first {low[0]!r}; allowed: seconds > 0; {RESTORE}"
        )
    return samples


# What a row's fields must be beyond their types: the kernel's sizes, a dtype this code knows.
SIZES = ("m", "n", "k")


def fits(kind: Any, value: Any) -> bool:
    """Whether a JSON value is of a field's declared type (bool is no number; numbers finite)."""
    if isinstance(kind, types.UnionType):
        return any(fits(part, value) for part in typing.get_args(kind))
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, list) and all(fits(item, v) for v in value)
    if kind is type(None):
        return value is None
    if isinstance(kind, type) and issubclass(kind, enum.Enum):  # as JSON writes it: its value
        return any(value == member.value for member in kind)
    if kind is float:
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def checked_fields(cls: type, data: Any, where: str) -> dict[str, Any]:
    """A row's fields, each checked against its declared type, its status and, for sizes and
    dtypes, the values this code can interpret; SchemaError names the row and the field."""
    from roofline.core.dtypes import DTYPES

    if not isinstance(data, dict):
        raise SchemaError(f"{where}: not a JSON object")
    declared = {f.name: f for f in dataclasses.fields(cls)}
    required = {
        n for n, f in declared.items() if f.default is f.default_factory is dataclasses.MISSING
    }
    missing = required - set(data)
    if missing:
        raise SchemaError(f"{where}: missing fields {sorted(missing)}; {RESTORE}")
    # A field this code does not know was added, with a default, by newer code of the same
    # schema version: read as absent, as newer code reads an older record's missing one.
    data = {name: value for name, value in data.items() if name in declared}
    for name, value in data.items():
        kind = declared[name].type
        if typing.get_origin(kind) is list and isinstance(value, list):  # samples: the first bad
            wrong = [v for v in value if not fits(typing.get_args(kind)[0], v)]
            if wrong:
                raise SchemaError(
                    f"{where}, field {name}: {len(wrong)} of its {len(value)} values are not "
                    f"finite numbers, the first {wrong[0]!r}; allowed: a list of finite "
                    f"numbers; {RESTORE}"
                )
        allowed = "a whole number >= 1" if name in SIZES else typing_name(kind)
        if not fits(kind, value) or (name in SIZES and value < 1):
            raise SchemaError(f"{where}, field {name}: {value!r}; allowed: {allowed}; {RESTORE}")
    if data["status"] not in STATUSES:
        raise SchemaError(
            f"{where}, field status: {data['status']!r}; allowed: {', '.join(STATUSES)}"
        )
    if data["dtype"] not in DTYPES:
        raise SchemaError(
            f"{where}, field dtype: {data['dtype']!r}; allowed: {', '.join(DTYPES)}; {RESTORE}"
        )
    return data


RESTORE = "restore that file (`uv run dvc checkout --force` it) or re-measure it"


def typing_name(kind: Any) -> str:
    if isinstance(kind, types.UnionType):
        return " or ".join(typing_name(part) for part in typing.get_args(kind))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return ", ".join(member.value for member in kind)
    if kind is type(None):
        return "null"
    return str(kind).replace("<class '", "").replace("'>", "").replace(" | None", " or null")


def check_version(record: Any, path: Path) -> None:
    """Refuse a record written by a newer version of this lab: read as this version's, its
    fields could be taken for others."""
    version = record.get("schema", 1) if isinstance(record, dict) else 1
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION:
        raise SchemaError(
            f"{path}: schema version {version!r}, and this code reads up to "
            f"{SCHEMA_VERSION}: it was written by a newer version of this lab. Nothing was "
            "measured, overwritten or rendered. Update this checkout (`git pull`) and run again"
        )


class CopyCeiling(TypedDict):
    """A copy on the device, bytes read and written both counted: its bandwidth ceiling. A
    GPU's is torch's dst.copy_(src), a sample a call; a CPU's STREAM's copy on every core at
    once (roofline.device.stream), a sample a window, or torch's where that was not measured."""

    bytes_moved: int
    median_s: float
    min_s: float
    max_s: float
    spread: float
    gbps: float
    samples_s: list[float]
    how: NotRequired[str]  # what ran (older records: torch's copy, unsaid)
    copies: NotRequired[int]  # STREAM's: the copies of the program, one a core...
    array_bytes: NotRequired[int]  # ...each one's each array
    triad_gbps: NotRequired[float | None]  # ...and its triad, the same way (None: not used)
    triad_reason: NotRequired[str]


class StepSides(TypedDict):
    """A CPU's breakdown sides as its results record keeps them (`steps`,
    roofline.measuring.cpu_steps): each side's per-call seconds, a list per round; empty lists
    and `reason` where they were not measured."""

    backend: str
    dtype: str
    threads: int  # every thread: the cores the run used
    shape: list[int]  # where every thread and one thread ran
    in_l2: list[int]  # the square whose operands fit one core's L2
    every_thread_s: list[list[float]]
    one_thread_s: list[list[float]]
    in_l2_s: list[list[float]]
    cpu_shares: dict[str, list[float]]  # each side's CPU time over its rounds' wall x threads
    reason: NotRequired[str]


class GpuStepSides(TypedDict):
    """A GPU's breakdown sides as its results record keeps them (`gpu_steps`,
    roofline.measuring.gpu_steps): the lab kernel on random and constant inputs and replayed from
    a CUDA graph; each side's per-call seconds, a list per round, and its SM clock and power a
    round where they were read. Empty, with `reason`, where they were not measured."""

    backend: str
    dtype: str
    shape: list[int]
    gpu: int  # torch's index of the GPU they ran on
    sides_s: dict[str, list[list[float]]]  # "random", "constant", "graph"
    sm_clock_mhz: dict[str, list[float]]
    power_w: dict[str, list[float]]
    unmeasured: dict[str, str]  # a side not measured, and why
    reason: NotRequired[str]
