"""manifest.json as records: what aggregate writes of each device (the SKU it is judged as, its
datasheet, price and the lab's bands; for a measured device what, when, where and with what it
was measured), and what the plot, report and check read of it. Aggregate builds these records
and writes them (`to_json`); the manifest is read back and checked once, when it is loaded
(`load_manifest`): a missing or malformed field is named with its file, device and field, and
past that point the deliverables read typed fields, never a key."""

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from roofline.configuration.params import KINDS, BenchParams
from roofline.core.errors import SchemaError
from roofline.core.measurement import fits, typing_name
from roofline.device.backends import Library
from roofline.device.timing import BenchSettings

REMAKE = "remake it from the recorded results: `uv run dvc repro --force -s aggregate`"

# A device record's states (roofline.machines.records.KNOWN; not imported from there, which would
# bring the several-machines code into the plot's and the report's dependencies).
STATUSES = ("measured", "pending", "lost")


# A field manifest.json holds only where it has a value (None here where it has not).
WHEN_SET = {"when_set": True}


@dataclass(frozen=True)
class Recorded:
    """A block the measuring stages record in a shape of their own (what the probe could tell on
    this platform, the versions it found), kept whole as recorded and written back so. A
    subclass names, as typed fields, the figures the deliverables read of it."""

    recorded: dict[str, object] = field(default_factory=dict, kw_only=True, repr=False)


@dataclass(frozen=True)
class Hardware(Recorded):
    """What a results record says it measured (roofline.device.hardware): a GPU's name, a CPU's
    model."""

    name: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Found(Recorded):
    """What the probe found of the device (a results record's `found`), as the report reads it."""

    sm_count: int | None = None
    cache_bytes: int | None = None  # a CPU's last-level cache
    l2_bytes: int | None = None  # a GPU's
    cublaslt: int | None = None
    driver: str | None = None
    microarchitecture: str | None = None
    core_types: list[dict[str, Any]] | None = None  # a CPU of two kinds of core only

    @property
    def slower_cores(self) -> str | None:
        """The name of a CPU's slower kind of core (a hybrid laptop's "E-cores"), or None."""
        kinds = [kind for kind in self.core_types or [] if kind.get("efficiency")]
        return str(kinds[0]["name"]) if kinds else None


@dataclass(frozen=True)
class Versions(Recorded):
    """Every package's version the run found; the report names torch's and CUDA's."""

    torch: str | None = None
    cuda: str | None = None


@dataclass(frozen=True)
class Fma(Recorded):
    """A CPU's FP32 FMA ceiling on every core at once (roofline.device.peakflops.measure_fma)."""

    gflops: float | None  # None: not measured, or not used (`reason` says which)
    vector: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Clock(Recorded):
    """A CPU's clock, as its run measured it (a dependent-add chain on every core) or read it."""

    ghz: float | None = None
    source: str = ""

    @property
    def measured_ghz(self) -> float | None:
        """The clock the run measured, plain code on every core; None where it read another."""
        return self.ghz if self.source == "measured all-core clock" else None


@dataclass(frozen=True)
class FmaClock(Recorded):
    """The clock every core ran at under the widest FMA load
    (roofline.device.peakflops.measure_fma_clock)."""

    ghz: float | None  # None: not measured (`reason` says why)
    vector: str = ""
    spread: float | None = None  # of its windows' slowest cores
    reason: str = ""


@dataclass(frozen=True)
class SideFigure:
    """One side of the CPU's breakdown: its median rate and its rounds' spread."""

    tflops: float
    spread: float  # (max - min) / median of its rounds' medians


@dataclass(frozen=True)
class CpuSteps:
    """A CPU's breakdown sides as measured in its run (roofline.measuring.cpu_steps), through the
    headline's library: every thread and one thread at `shape`, one thread in L2 at `in_l2`."""

    backend: str
    threads: int
    shape: list[int]
    in_l2: list[int]
    every_thread: SideFigure | None = None  # None: not measured (`reason`)
    one_thread: SideFigure | None = None
    in_l2_thread: SideFigure | None = None
    reason: str = ""
    shared: str = ""  # why the sides' windows were not the process's own, or ""


@dataclass(frozen=True)
class GpuSteps:
    """A GPU's breakdown sides as measured in its run (roofline.measuring.gpu_steps), at the lab
    kernel: random inputs, constant ones, and the random calls replayed from a CUDA graph; each
    side's mean SM clock and power where they were read."""

    backend: str
    shape: list[int]
    gpu: int
    random: SideFigure | None = None  # None: not measured (`reason`, `unmeasured`)
    constant: SideFigure | None = None
    graph: SideFigure | None = None
    sm_clock_mhz: dict[str, float] = field(default_factory=dict)  # by side
    power_w: dict[str, float] = field(default_factory=dict)
    unmeasured: dict[str, str] = field(default_factory=dict)  # a side not measured, and why
    reason: str = ""

    def clock_of(self, side: str) -> float | None:
        return self.sm_clock_mhz.get(side)

    def figures_of(self, side: str) -> str:
        """A side's clock and power in words: "1234 MHz (398 W)"."""
        watts, mhz = self.power_w.get(side), self.sm_clock_mhz.get(side)
        return f"{mhz:.0f} MHz" + (f" ({watts:.0f} W)" if watts is not None else "")


@dataclass(frozen=True)
class Counters(Recorded):
    """Whether a CPU's run could read its own performance counters
    (roofline.device.perf_counters)."""

    readable: bool
    reason: str = ""


@dataclass(frozen=True)
class CacheCeiling(Recorded):
    """A CPU's read bandwidth from one cache level (or DRAM) on every core at once, each core
    over a working set of its own (roofline.device.cache_ceilings.measure_cache_bandwidth)."""

    level: str  # "L1", "L2", "L3", "DRAM"
    working_set_bytes: int | None = None  # each core's; None: no size known for the level
    gbps: float | None = None  # summed over the cores; None: not measured, or not used (`reason`)
    reason: str = ""


@dataclass(frozen=True)
class PublishedFigure:
    """A figure someone published for a SKU's work (a datasheet line's `published`)."""

    dtype: str
    shape: list[int]  # [M, N, K]
    tflops: float
    source: str
    window: str = ""  # burst, sustained, or "": its source does not say (lab_config.WINDOWS)
    best_shape: bool = False  # its source's best shape: shown as such, never a yardstick


@dataclass(frozen=True)
class Datasheet:
    """The datasheet line the device is judged against (roofline.interpretation.datasheets.judged)."""

    sku_name: str | None  # the name torch reports that the line is for ("*": any)
    source: str
    missing: str | None  # why no line fits the name measured (so no MFU), or None
    peak_tflops: dict[str, float]  # dense, per dtype
    memory_bandwidth_gbps: float | None
    peak_clock_mhz: float | None  # the SM clock the dense 16-bit peaks assume
    sm_count: int | None
    published: list[PublishedFigure]


@dataclass(frozen=True)
class LabLine:
    """The datasheet line the lab's band and done threshold were written for."""

    sku: str
    lab_band_tflops: dict[str, list[float]]
    lab_done_tflops: dict[str, float]


@dataclass(frozen=True)
class LabBands:
    """The lab's sanity band ([low, high] TFLOP/s, +-20% allowed) and done threshold per dtype,
    as applied to the SKU measured: none where they were written for another (`written_for`)."""

    band_tflops: dict[str, list[float]]
    done_tflops: dict[str, float]
    written_for: str | None
    line: LabLine | None


@dataclass(frozen=True)
class Peak:
    """The dense peak a dtype's MFU is against, and where it comes from."""

    tflops: float
    source: str


@dataclass(frozen=True)
class MemoryCopy:
    """The large copy whose rate is the device's measured memory bandwidth."""

    bytes_moved: float
    median_s: float
    min_s: float
    max_s: float
    spread: float
    gbps: float
    how: str = ""  # what ran (a CPU's: STREAM's copy on every core, or why torch's instead)
    triad_gbps: float | None = None  # a CPU's STREAM triad beside it


@dataclass(frozen=True)
class SweepRun:
    """The sweep that measured a device's other shapes."""

    name: str
    measured_at: str
    wall_s: float
    git_revision: str | None


@dataclass(frozen=True)
class OlderStage:
    """A measuring stage whose record other code or params than today's measured
    (roofline.machines.keys)."""

    older: list[str]  # "code", "params"
    git_revision: str | None
    measured_at: str | None


@dataclass(frozen=True)
class KnobsRun:
    """The knobs a device measured (roofline.measuring.knobs)."""

    name: str
    measured_at: str
    tunableop_results: Any = None  # as TunableOp wrote them, where it ran


@dataclass(frozen=True)
class MeasuredRun:
    """What, when, where and with what a measured device was measured."""

    hardware: Hardware
    details: Found
    measured_at: str
    git_revision: str | None
    versions: Versions
    environment: dict[
        str, str
    ]  # the variables that change a measurement (roofline.measuring.provenance)
    threads: int | None
    wall_s: float
    run_cost_usd: float | None
    peaks_used: dict[str, Peak]  # per dtype
    memory_copy: MemoryCopy
    lab_checks: list[str]
    clock: Clock | None = field(
        default=None, metadata=WHEN_SET
    )  # a CPU's clock, as measured or read
    fma: Fma | None = field(default=None, metadata=WHEN_SET)
    fma_clock: FmaClock | None = field(default=None, metadata=WHEN_SET)  # a CPU's
    steps: CpuSteps | None = field(default=None, metadata=WHEN_SET)  # a CPU's breakdown sides
    gpu_steps: GpuSteps | None = field(default=None, metadata=WHEN_SET)  # a GPU's
    caches: list[CacheCeiling] | None = field(default=None, metadata=WHEN_SET)  # a CPU's
    counters: Counters | None = field(default=None, metadata=WHEN_SET)  # a CPU's
    libraries: dict[str, Library] | None = field(
        default=None, metadata=WHEN_SET
    )  # what each backend ran, by backend
    sweep: SweepRun | None = field(default=None, metadata=WHEN_SET)
    measured_by_older: dict[str, OlderStage] | None = field(
        default=None, metadata=WHEN_SET
    )  # by stage
    # Seconds each part of the measurement took (each point, the copy, a CPU's ceilings).
    spent: dict[str, float] | None = field(default=None, metadata=WHEN_SET)


@dataclass(frozen=True)
class DeviceEntry:
    """A device's entry: its interpretation, and for a measured device its run (`measured`,
    whose fields manifest.json holds beside the others)."""

    sku: str  # the datasheet line it is judged as
    kind: str  # cpu, cuda, mps
    status: str  # measured, pending, lost
    cost_per_hour_usd: float | None
    datasheet: Datasheet
    lab: LabBands
    show_pending: bool = True  # a device never measured still gets its line and roof
    measured: MeasuredRun | None = field(default=None, metadata={"flattened": True})
    knobs: KnobsRun | None = field(default=None, metadata=WHEN_SET)


@dataclass(frozen=True)
class Manifest:
    """manifest.json whole: the lab, its settings, and each device's entry in config order."""

    devices: dict[str, DeviceEntry]
    lab: str = ""
    bench: BenchSettings = field(default_factory=BenchSettings)  # the bench settings, as composed
    sweep: str = "none"
    knobs: str = "none"
    lab_devices: list[str] = field(default_factory=list)  # those the Definition of Done names


class ManifestJson(TypedDict):
    """manifest.json's content as JSON reads it (and as aggregate returns it), before it is
    records: a Manifest as `to_json` writes it."""

    devices: dict[str, dict[str, object]]  # each a DeviceEntry, its run's fields beside its own
    lab: str
    bench: BenchParams
    sweep: str
    knobs: str
    lab_devices: list[str]


def to_json(value: Any) -> Any:
    """A record as manifest.json holds it: a recorded block as recorded, a run beside its
    device's other fields, a field written only when set left out where it is not."""
    if isinstance(value, Recorded):
        return value.recorded
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.metadata.get("flattened"):
                out |= to_json(item) if item is not None else {}
            elif item is not None or not f.metadata.get("when_set"):
                out[f.name] = to_json(item)
        return out
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


def wrong(where: str, name: str, value: Any, allowed: str, fix: str = REMAKE) -> SchemaError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return SchemaError(f"{where}, field {name}: {shown}; allowed: {allowed}; {fix}")


def allowed(kind: Any) -> str:
    """A field's type in words, for a message."""
    if dataclasses.is_dataclass(kind):
        return "a JSON object"
    if typing.get_origin(kind) is dict:
        return f"a JSON object of {allowed(typing.get_args(kind)[1])}"
    if typing.get_origin(kind) is list:
        return f"a list of {allowed(typing.get_args(kind)[0])}"
    if isinstance(kind, types.UnionType):
        return " or ".join(allowed(part) for part in typing.get_args(kind))
    return "anything" if kind is Any or typing.is_typeddict(kind) else typing_name(kind)


def read_as(kind: Any, value: Any, name: str, where: str, fix: str = REMAKE) -> Any:
    """A JSON value as `kind`: a record, a list or JSON object of them, or a plain value checked
    as roofline.core.measurement checks a row's (bool is no number; numbers finite); SchemaError names
    the
    field (`name`, dotted) in `where` (the file and device), and `fix`, how to mend it. A typed
    dictionary (a block a measuring stage records in a shape of its own, roofline.device) is
    taken as recorded, unchecked, as Any is."""
    if kind is Any or typing.is_typeddict(kind):
        return value
    if isinstance(kind, types.UnionType):  # X | None: a record or container read as X
        parts = [part for part in typing.get_args(kind) if part is not type(None)]
        if value is None and len(parts) < len(typing.get_args(kind)):
            return None
        inner = parts[0] if len(parts) == 1 else None
        if dataclasses.is_dataclass(inner) or typing.get_origin(inner) in (dict, list):
            return read_as(inner, value, name, where, fix)
    if dataclasses.is_dataclass(kind):
        return record_from(kind, value, name, where, fix)
    origin = typing.get_origin(kind)
    if origin is dict and isinstance(value, dict):
        item = typing.get_args(kind)[1]
        return {key: read_as(item, v, f"{name}.{key}", where, fix) for key, v in value.items()}
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(kind)
        return [read_as(item, v, f"{name}[{i}]", where, fix) for i, v in enumerate(value)]
    if origin not in (dict, list) and fits(kind, value):
        return value
    raise wrong(where, name, value, allowed(kind), fix)


def record_from(
    cls: type, data: Any, name: str, where: str, fix: str = REMAKE, **given: Any
) -> Any:
    """A record of type `cls` from a JSON object, each field read as its declared type (`given`:
    fields already read). Fields it does not declare are refused, but in a recorded block
    (Recorded), which is the measuring stages' shape and kept whole."""
    if not isinstance(data, dict):
        raise wrong(where, name, data, "a JSON object", fix)
    dotted = f"{name}." if name else ""
    declared = [f for f in dataclasses.fields(cls) if f.name != "recorded" and f.name not in given]
    recorded = issubclass(cls, Recorded)
    unknown = sorted(set(data) - {f.name for f in declared}) if not recorded else []
    if unknown:
        raise SchemaError(f"{where}, field {dotted}{unknown[0]}: not one aggregate writes; {fix}")
    values = dict(given)
    for f in declared:
        if f.name in data:
            values[f.name] = read_as(f.type, data[f.name], dotted + f.name, where, fix)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SchemaError(f"{where}, field {dotted}{f.name}: missing; {fix}")
    return cls(**values, recorded=data) if recorded else cls(**values)


# What every device's entry has, whatever its status: refused first, all named at once.
ENTRY = ("status", "kind", "sku")
RUN_FIELDS = tuple(f.name for f in dataclasses.fields(MeasuredRun))


def entry_from_json(data: Any, where: str) -> DeviceEntry:
    """A device's entry, checked whole: a measured device's with its run, another's without."""
    lacks = [key for key in ENTRY if not isinstance(data, dict) or key not in data]
    if lacks:
        raise SchemaError(f"{where}: no {', '.join(lacks)}; {REMAKE}")
    if data["status"] not in STATUSES:
        raise wrong(where, "status", data["status"], ", ".join(STATUSES))
    if data["kind"] not in KINDS:
        raise wrong(where, "kind", data["kind"], ", ".join(KINDS))
    own = {k: v for k, v in data.items() if k not in RUN_FIELDS}
    if data["status"] != "measured":  # a run left in it (its status edited by hand) is not read
        return record_from(DeviceEntry, own, "", where, measured=None)
    run = record_from(MeasuredRun, {k: v for k, v in data.items() if k in RUN_FIELDS}, "", where)
    return record_from(DeviceEntry, own, "", where, measured=run)


def manifest_from_json(data: Any, path: Path | str) -> Manifest:
    """manifest.json's content as records, or SchemaError naming the file, device and field."""
    devices = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        raise SchemaError(f"{path}, field devices: missing or not a JSON object; {REMAKE}")
    entries = {
        name: entry_from_json(entry, f"{path}, device {name}") for name, entry in devices.items()
    }
    top = {k: v for k, v in data.items() if k != "devices"}
    return record_from(Manifest, top, "", str(path), devices=entries)


def load_manifest(path: Path) -> Manifest:
    """manifest.json as the plot, report and check read it, or SchemaError when it is not the
    one aggregate writes (not JSON, or a field missing or malformed: named)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SchemaError(f"{path} cannot be read as JSON ({err}); {REMAKE}") from err
    return manifest_from_json(data, path)


def as_manifest(manifest: Manifest | ManifestJson) -> Manifest:
    """The manifest as records: one loaded already, or its JSON content (as aggregate returns
    it), read and checked here."""
    if isinstance(manifest, Manifest):
        return manifest
    return manifest_from_json(manifest, "manifest.json")
