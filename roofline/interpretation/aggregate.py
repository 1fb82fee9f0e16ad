"""Recombine every device's measurements (results.json, sweep.json) with its interpretation
(conf: datasheet peaks, prices, the lab's bands) into results.csv, manifest.json and
metrics.json."""

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from omegaconf import DictConfig

from roofline.configuration.measuring_config import bench_settings, to_plain
from roofline.core import arithmetic as ar
from roofline.core.errors import SchemaError
from roofline.core.files import read_json
from roofline.core.measurement import (
    RESTORE,
    GpuStepSides,
    StepSides,
    check_version,
    fits,
    measurement_from_dict,
)
from roofline.interpretation.ceilings import headline, past_the_cache
from roofline.interpretation.datasheets import judged, measured_name
from roofline.interpretation.interpret import JudgedDevice, interpret, lab_checks, peaks
from roofline.interpretation.manifest import (
    CpuSteps,
    Datasheet,
    DeviceEntry,
    GpuSteps,
    KnobsRun,
    LabBands,
    LabLine,
    Manifest,
    ManifestJson,
    MeasuredRun,
    MemoryCopy,
    OlderStage,
    Peak,
    PublishedFigure,
    SideFigure,
    SweepRun,
    read_as,
    to_json,
)
from roofline.interpretation.noise import SHARE_MIN
from roofline.interpretation.rows import CSV_COLUMNS, KNOB_COLUMNS, Row, knob_row
from roofline.machines.record_types import Record
from roofline.machines.records import KNOWN

LAB = "x4-roofline: dense matmul, FP16 8192^3 on GPUs (FP32 through the BLAS on a CPU)"


# What the deliverables read of a measured record beyond its rows, by kind of record: a missing
# or malformed one is refused before anything is written, never a traceback half-way through.
MEASURED_RECORD = {
    "results": {"hardware": dict, "run": dict, "memory": dict},
    "sweep": {"sweep": str, "run": dict},
    "knobs": {"knobs": str, "run": dict},
}
RUN = {
    "started_at": str,
    "wall_s": float,
    "versions": dict,
    "git_revision": str | None,
    "threads": int | None,
}
MEMORY = ("bytes_moved", "median_s", "min_s", "max_s", "spread", "gbps")
# A CPU's cores as its results record found them, where it records them: its computed peak is
# cores x clock x FLOP per cycle (physical cores, where the probe could tell; null where not).
CORES = {"logical_cores": "a whole number >= 1", "physical_cores": "a whole number >= 1 or null"}


def check_record(record: Any, path: Path, name: str) -> None:
    """The record as a whole: this code's schema version or older, a known status, and what a
    measured one must carry; SchemaError names the file and the field."""
    check_version(record, path)
    if not isinstance(record, dict) or record.get("device") != name:
        raise SchemaError(f"{path}: not a record of device {name!r}; {RESTORE}")
    if record.get("status") not in KNOWN or not isinstance(record.get("rows"), list):
        raise SchemaError(
            f"{path}, field status: {record.get('status')!r}; allowed: {', '.join(KNOWN)}, with "
            f"a list of rows; {RESTORE}"
        )
    kind = path.stem
    if record["status"] != "measured" or kind not in MEASURED_RECORD:
        return
    wanted = dict(MEASURED_RECORD[kind])
    if kind in ("sweep", "knobs") and record.get(kind) == "none":  # nothing ran: no run
        wanted.pop("run")
    for field, kind_of in wanted.items():
        if not fits(kind_of, record.get(field)):
            raise SchemaError(f"{path}, field {field}: {record.get(field)!r}; {RESTORE}")
    for field, kind_of in RUN.items():
        if "run" in wanted and not fits(kind_of, record["run"].get(field)):
            raise SchemaError(f"{path}, field run.{field}: {record['run'].get(field)!r}; {RESTORE}")
    for field in MEMORY if kind == "results" else ():
        if not fits(float, record["memory"].get(field)):
            raise SchemaError(
                f"{path}, field memory.{field}: {record['memory'].get(field)!r}; {RESTORE}"
            )
    if kind == "results":
        check_cores(record.get("found", {}), path)


def check_cores(found: Any, path: Path) -> None:
    """A measured results record's `found`: a JSON object, and the cores it records (CORES)
    whole numbers >= 1, never a 0 that would make a CPU's peak nothing."""
    if not isinstance(found, dict):
        raise SchemaError(f"{path}, field found: {found!r}; allowed: a JSON object; {RESTORE}")
    for field, allowed in CORES.items():
        value = found.get(field)
        if field not in found or (value is None and "null" in allowed):
            continue
        if not fits(int, value) or value < 1:
            raise SchemaError(
                f"{path}, field found.{field}: {value!r}; allowed: {allowed} (a CPU's peak is "
                f"its cores x clock x FLOP per cycle); {RESTORE}"
            )


def load_record(
    name: str, path: Path, parse: Callable[[Any, str], Any] = measurement_from_dict
) -> Record:
    """A device's results.json, sweep.json or knobs.json (parse=knob_from_dict), checked whole:
    the record, then each row against the schema (its rows read as `parse` makes them)."""
    if not path.exists():
        raise SchemaError(f"{path} is missing: run `uv run dvc pull` or `uv run dvc repro`")
    record = read_json(path)
    check_record(record, path, name)
    record["rows"] = [parse(row, f"{path}, row {i + 1}") for i, row in enumerate(record["rows"])]
    for i, row in enumerate(record["rows"]):
        if row.device != name:
            raise SchemaError(
                f"{path}, row {i + 1}, field device: {row.device!r}, expected {name!r}; {RESTORE}"
            )
    return record


def device_rows(dev: JudgedDevice, record: Record, sweep: Record | None) -> list[Row]:
    """The device's lab rows, then its sweep's, interpreted against its datasheet (judged)."""
    points = record["rows"] + (sweep["rows"] if sweep else [])
    return interpret(points, dev, record)


def results_table(rows: list[Row]) -> pd.DataFrame:
    """Rows in the schema's columns, in the order given."""
    table = pd.DataFrame([vars(r) for r in rows], columns=CSV_COLUMNS)
    whole = ("m", "n", "k", "repeats", "gpu")
    return table.astype(dict.fromkeys(whole, "Int64"))


# A figure of metrics.json: TFLOP/s, MFU (None: no peak, or above it), and whether it is flagged.
Metric = dict[str, float | bool | None]
Metrics = dict[str, Metric]  # by dtype (and shape, and backend where a device has several)


def metrics(table: pd.DataFrame) -> dict[str, Metrics]:
    """TFLOP/s and MFU of each device's measured lab points, for `dvc metrics show / diff`:
    per dtype (and shape, where a device has several) the fastest backend's, and each
    backend's under `<key>_<backend>` where a device has several."""
    lab = table[(table.status == "measured") & (table.series == "lab")]
    out: dict[str, Metrics] = {}
    for device, rows in lab.groupby("device", sort=False):
        shapes = rows.groupby("dtype").apply(
            lambda g: len({(r.m, r.n, r.k) for r in g.itertuples()})
        )
        several = rows.backend.nunique() > 1
        for (dtype, m, n, k), group in rows.groupby(["dtype", "m", "n", "k"], sort=False):
            key = dtype if shapes[dtype] == 1 else f"{dtype}_{m}x{n}x{k}"
            best = group.loc[group.achieved_tflops.idxmax()]
            entries = {key: best} | (
                {f"{key}_{r.backend}": r for _, r in group.iterrows()} if several else {}
            )
            for name, r in entries.items():
                out.setdefault(device, {})[name] = {
                    "tflops": r["achieved_tflops"],
                    "mfu": None if pd.isna(r["mfu"]) else r["mfu"],
                    # a noisy, short or impossible figure is no result: results.csv says why
                    "flagged": isinstance(r["flag"], str) and bool(r["flag"]),
                }
    return out


def device_entry(
    name: str,
    dev: JudgedDevice,
    record: Record,
    rows: pd.DataFrame,
    sweep: SweepRun | None = None,
    older: dict[str, OlderStage] | None = None,
    knobs: KnobsRun | None = None,
) -> DeviceEntry:
    """The device's manifest entry: its interpretation (the SKU judged, its datasheet and price,
    the lab's bands), for a measured device what, when, where and with what it was measured
    (with its sweep, and the stages `older` code or params measured), and the knobs it
    measured."""
    measured = record["status"] == "measured"
    return DeviceEntry(
        sku=dev["sku"],
        kind=dev["kind"],
        status=record["status"],
        show_pending=dev["show_pending"],
        cost_per_hour_usd=dev["cost_per_hour"],
        datasheet=datasheet(dev),
        lab=lab_bands(dev),
        measured=measured_run(name, dev, record, rows, sweep, older) if measured else None,
        knobs=knobs,
    )


def datasheet(dev: JudgedDevice) -> Datasheet:
    """The datasheet line the device is judged against, as roofline.interpretation.datasheets.judged
    chose it."""
    return Datasheet(
        sku_name=dev["sku_name"],
        source=dev["source"],
        missing=dev["missing"],
        peak_tflops=dev["peak_tflops"],
        memory_bandwidth_gbps=dev["memory_bandwidth_gbps"],
        peak_clock_mhz=dev["peak_clock_mhz"],
        sm_count=dev["sm_count"],
        published=[PublishedFigure(**figure) for figure in dev["published"]],
    )


def lab_bands(dev: JudgedDevice) -> LabBands:
    """The lab's bands as applied to the SKU measured, and the line they were written for."""
    line = dev["lab_line"]
    return LabBands(
        band_tflops=dev["lab_band_tflops"],
        done_tflops=dev["lab_done_tflops"],
        written_for=dev["lab_sku"],
        line=None if line is None else LabLine(**line),
    )


# Each field of a run as MeasuredRun declares it: the blocks of a record are read as these.
RUN_TYPES = {f.name: f.type for f in dataclasses.fields(MeasuredRun)}


def measured_run(
    name: str,
    dev: JudgedDevice,
    record: Record,
    rows: pd.DataFrame,
    sweep: SweepRun | None,
    older: dict[str, OlderStage] | None,
) -> MeasuredRun:
    """A measured results record's run: the blocks the measuring stages record in shapes of
    their own, read as the report reads them; the peaks, the copy's rate, the price of the run
    and the lab's checks, from its interpretation; its sweep, and the stages older code or
    params measured."""
    where, run, price = f"{name}'s results record", record["run"], dev["cost_per_hour"]

    def recorded(field: str, value: Any, key: str) -> Any:
        """A block of the record (`key` in it) as the run's `field` declares it, checked."""
        return read_as(RUN_TYPES[field], value, key, where, RESTORE)

    caches = record.get("caches")  # a level no faster than DRAM is no ceiling of its own
    head = headline(rows[rows.series == "lab"], dev["kind"])
    checks = []
    if head is not None and head.dtype == "float16":
        checks = lab_checks(
            dev["lab_band_tflops"].get("float16"), dev["lab_done_tflops"].get("float16"), head
        )
    return MeasuredRun(
        hardware=recorded("hardware", record["hardware"], "hardware"),
        details=recorded("details", record.get("found", {}), "found"),
        measured_at=run["started_at"],
        git_revision=run.get("git_revision"),
        versions=recorded("versions", run["versions"], "run.versions"),
        environment=recorded("environment", run.get("environment", {}), "run.environment"),
        threads=run.get("threads"),
        wall_s=run["wall_s"],
        run_cost_usd=None if price is None else price * run["wall_s"] / 3600,
        peaks_used={
            dtype: Peak(tflops, source) for dtype, (tflops, source) in peaks(dev, record).items()
        },
        memory_copy=MemoryCopy(
            **{k: record["memory"][k] for k in MEMORY},
            how=record["memory"].get("how", ""),
            triad_gbps=record["memory"].get("triad_gbps"),
        ),
        lab_checks=checks,
        # A CPU's own ceilings; what each backend ran.
        clock=recorded("clock", record.get("clock"), "clock"),
        fma=recorded("fma", record.get("fma"), "fma"),
        fma_clock=recorded("fma_clock", record.get("fma_clock"), "fma_clock"),
        steps=cpu_steps(record.get("steps")),
        gpu_steps=gpu_steps(record.get("gpu_steps")),
        caches=recorded("caches", caches and past_the_cache(caches), "caches"),
        counters=recorded("counters", record.get("counters"), "counters"),
        libraries=recorded("libraries", record.get("libraries"), "libraries"),
        sweep=sweep,
        measured_by_older=older or None,
        spent=recorded("spent", run.get("spent"), "run.spent"),
    )


def side_figure(flops: float, rounds: list[list[float]]) -> SideFigure | None:
    """A breakdown side's median rate over every call, and the spread of its rounds' medians
    (a round is one call of a large product, hundreds of a small one)."""
    if not rounds or not all(rounds):
        return None
    medians = [ar.summarize(r)["median_s"] for r in rounds]
    spread = ar.summarize(medians)["spread"] if len(medians) > 1 else 0.0
    return SideFigure(ar.rounds_tflops(flops, rounds), spread)


def cpu_steps(sides: StepSides | None) -> CpuSteps | None:
    """A CPU record's breakdown sides as rates and spreads; None in a record from before they
    were measured."""
    if sides is None:
        return None
    shape, in_l2 = list(sides["shape"]), list(sides["in_l2"])
    flops = ar.matmul_flops(*shape) if shape else 0.0
    small = ar.matmul_flops(*in_l2) if in_l2 else 0.0
    return CpuSteps(
        sides["backend"],
        sides["threads"],
        shape,
        in_l2,
        side_figure(flops, sides["every_thread_s"]),
        side_figure(flops, sides["one_thread_s"]),
        side_figure(small, sides["in_l2_s"]),
        sides.get("reason", ""),
        shared_sides(sides.get("cpu_shares", {})),
    )


def gpu_steps(sides: GpuStepSides | None) -> GpuSteps | None:
    """A GPU record's breakdown sides as rates, spreads, mean clocks and powers; None in a
    record from before they were measured."""
    if sides is None:
        return None
    shape = list(sides["shape"])
    flops = ar.matmul_flops(*shape) if shape else 0.0
    figures = {side: side_figure(flops, rounds) for side, rounds in sides["sides_s"].items()}

    def means(read: dict[str, list[float]]) -> dict[str, float]:
        return {side: sum(v) / len(v) for side, v in read.items() if v}

    return GpuSteps(
        sides["backend"],
        shape,
        sides["gpu"],
        figures.get("random"),
        figures.get("constant"),
        figures.get("graph"),
        means(sides["sm_clock_mhz"]),
        means(sides["power_w"]),
        dict(sides["unmeasured"]),
        sides.get("reason", ""),
    )


def shared_sides(shares: dict[str, list[float]]) -> str:
    """Why the breakdown's sides shared the cores with other work, or "": a round in which the
    process had less of its threads' CPU than a quiet window gives (noise.SHARE_MIN)."""
    low = {side: min(values) for side, values in shares.items() if values}
    low = {side: share for side, share in low.items() if share < SHARE_MIN}
    if not low:
        return ""
    side, share = min(low.items(), key=lambda item: item[1])
    return f"the process had {share:.0%} of its threads' CPU in a round of {SIDE_WORDS[side]}"


SIDE_WORDS = {
    "every_thread": "every thread",
    "one_thread": "one thread",
    "in_l2": "one thread in L2",
}


def sweep_run(sweep: Record | None) -> SweepRun | None:
    """The sweep that measured the device's other shapes, where one did."""
    if not sweep or sweep["status"] != "measured" or sweep["sweep"] == "none":
        return None
    run = sweep["run"]
    return SweepRun(sweep["sweep"], run["started_at"], run["wall_s"], run.get("git_revision"))


def knobs_run(record: Record | None) -> KnobsRun | None:
    """The knobs the device measured, where it measured any."""
    if not record or record["status"] != "measured" or record["knobs"] == "none":
        return None
    return KnobsRun(record["knobs"], record["run"]["started_at"], record.get("tunableop_results"))


def older_stage(parts: list[str], record: Record | None) -> OlderStage:
    """A stage measured by older code or params (`parts`): the revision and time its record's
    run measured at (nothing where it has no run)."""
    run = (record or {}).get("run") or {}
    return OlderStage(parts, run.get("git_revision"), run.get("started_at"))


def knobs_table(knobs: dict[str, Record]) -> pd.DataFrame:
    """Every device's knobs, a line each: both sides' rates and the gain."""
    rows = [vars(knob_row(point)) for record in knobs.values() for point in record["rows"]]
    return pd.DataFrame(rows, columns=KNOB_COLUMNS)


def knob_metrics(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Each measured knob's gain, per device: `dvc metrics diff` compares two machines or two
    torch versions knob by knob."""
    measured = table[table.status == "measured"]
    return {
        device: {r.knob: r.gain for r in group.itertuples()}
        for device, group in measured.groupby("device", sort=False)
    }


class Deliverables(NamedTuple):
    table: pd.DataFrame  # results.csv
    knobs: pd.DataFrame  # knobs.csv
    manifest: ManifestJson  # manifest.json's content (roofline.interpretation.manifest reads it as records)
    metrics: dict[str, dict[str, Metric | float]]  # metrics.json's; each device's knobs' gains


def aggregate(
    cfg: DictConfig,
    records: dict[str, Record],
    sweeps: Mapping[str, Record | None],
    knobs: dict[str, Record] | None = None,
    older: dict[str, dict[str, list[str]]] | None = None,
) -> Deliverables:
    """Every device's measurements joined with their interpretation, in config order; `older`: per
    device, the records measured by other code or params than today's (roofline.machines.keys)."""
    knobs, older = knobs or {}, older or {}
    sheets = {
        name: judged(name, to_plain(cfg.devices[name]), measured_name(record))
        for name, record in records.items()
    }
    rows = {name: device_rows(sheets[name], records[name], sweeps[name]) for name in records}
    table = results_table([r for name in records for r in rows[name]])
    by_stage = {"benchmark": records, "sweep": sweeps, "knobs": knobs}
    devices = {
        name: device_entry(
            name,
            sheets[name],
            records[name],
            table[table.device == name],
            sweep_run(sweeps[name]),
            {
                s: older_stage(parts, by_stage[s].get(name))
                for s, parts in older.get(name, {}).items()
            },
            knobs_run(knobs.get(name)),
        )
        for name in records
    }
    knob_rows = knobs_table(knobs)
    manifest = Manifest(
        devices,
        lab=LAB,
        bench=bench_settings(cfg),
        sweep=cfg.sweep.name,
        knobs=cfg.knobs.name,
        lab_devices=list(cfg.get("lab_devices") or []),
    )
    return Deliverables(
        table, knob_rows, to_json(manifest), metrics(table) | {"knobs": knob_metrics(knob_rows)}
    )
