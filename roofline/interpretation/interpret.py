"""What the measurements mean: peaks, MFU, flags and the lab's checks, from the device's conf
(datasheet figures, prices, the lab's bands). Applied where the deliverables are rendered, never
baked into a measurement, so a corrected price or peak re-renders without re-measuring.

Pure functions over plain records and device configs (a composed DictConfig, or a conf file
read as a dict by the GPU suite); no pandas, no omegaconf."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from roofline.configuration.params import RENTED_KINDS, MeasuringDevice, PublishedParams
from roofline.core.arithmetic import cpu_flop_per_cycle
from roofline.core.dtypes import DTYPES
from roofline.core.measurement import Measurement
from roofline.device.backends import runs_on_accelerate
from roofline.interpretation.apple_gpu import apple_gpu_peak
from roofline.interpretation.manifest import DeviceEntry, PublishedFigure
from roofline.interpretation.node import median_gpus
from roofline.interpretation.roofs import core_types_peak, cpu_peak_tflops, implied_clock_ghz
from roofline.interpretation.rows import Row, row
from roofline.machines.identity import kind

LAB_CAUSES = "no warm-up, no synchronisation, a wrong FLOP count, or throttled clocks"


class JudgedLabLine(TypedDict):
    """The datasheet line the lab's band and done threshold were written for."""

    sku: str
    lab_band_tflops: dict[str, list[float]]
    lab_done_tflops: dict[str, float]


class JudgedDevice(MeasuringDevice):
    """A device as the deliverables judge it (roofline.interpretation.datasheets.judged): its
    params entry (roofline.configuration.params.DeviceParams) less its datasheet lines, with the
    line of the SKU measured in their place."""

    show_pending: bool
    sky_accelerators: list[str]
    # The line judged against: the SKU's name in the report, its figures, where they come from.
    sku: str
    sku_name: str | None  # the name torch reports that the line is for ("*": any)
    source: str
    peak_tflops: dict[str, float]  # dense, per dtype; nulls dropped
    memory_bandwidth_gbps: float | None
    memory_gb: float | None
    peak_clock_mhz: float | None
    sm_count: int | None
    clock_ghz: float | None
    cost_per_hour: float | None
    published: list[PublishedParams]
    # The lab's band and done threshold, as applied to this SKU (none where written for another).
    lab_band_tflops: dict[str, list[float]]
    lab_done_tflops: dict[str, float]
    missing: str | None  # why no line fits the name measured (so no MFU), or None
    lab_sku: str | None  # the SKU they were written for, where that is another
    lab_line: JudgedLabLine | None


def assumed_clock_mhz(
    dtype: str, peak_clock_mhz: float | None, max_clock_mhz: float | None
) -> float | None:
    """The SM clock a GPU's datasheet peak for `dtype` assumes: the tensor-core figures the
    clock set in conf (`peak_clock_mhz`, e.g. H100 SXM 1830 MHz); float32's, on CUDA cores, the
    maximum boost clock NVML reports (H100 SXM: 132 SMs x 256 FLOP x 1980 MHz = 66.9 TFLOP/s)."""
    return max_clock_mhz if dtype == "float32" else peak_clock_mhz


def tensor_tflops(active_pct: float, sm_clock_mhz: float, peak: float, peak_mhz: float) -> float:
    """What the tensor pipes deliver in the share of the SMs' cycles GPM saw them active, at
    the window's clock and the datasheet's rate a clock (its dense peak over the clock it
    assumes): the rate a kernel whose every active cycle issued at full rate would reach."""
    return active_pct / 100 * sm_clock_mhz * peak / peak_mhz


# `record` below: the device's lab results record (roofline.machines.records.Record), not named
# here: plot and report import this module, and naming it would bring the several-machines code
# into their dependencies (see manifest.STATUSES); the GPU suite passes {}.


def peaks(dev: JudgedDevice, record: Mapping[str, Any]) -> dict[str, tuple[float, str]]:
    """Dense peak TFLOP/s and where it comes from, per dtype: `peak_tflops` of the datasheet the
    device is judged against (roofline.interpretation.datasheets.judged); on a CPU, for dtypes
    without one, cores x clock x FLOP per cycle of the best native instruction set, the clock from
    the
    datasheet (`clock_ghz`) or as the run measured it."""
    source = f"datasheet (dense): {dev.get('source') or dev.get('sku')}"
    source = source if kind(dev) in RENTED_KINDS else "set in conf"
    out = {
        dtype: (float(tflops), source)
        for dtype, tflops in dev["peak_tflops"].items()
        if tflops is not None
    }
    if kind(dev) == "mps" and record.get("status") == "measured":  # computed, per chip
        for dtype in DTYPES:
            computed = apple_gpu_peak(record["found"], dtype)
            if dtype not in out and not isinstance(computed, str):
                out[dtype] = computed
    if kind(dev) != "cpu" or record.get("status") != "measured":
        return out
    found = record["found"]
    fma = (record.get("fma") or {}).get("gflops")
    if found.get("core_types"):  # two kinds of core, each counted with its own figures
        for dtype in DTYPES:
            computed = core_types_peak(
                found["core_types"], dtype, set(found["isa"]), dev.get("clock_ghz")
            )
            if dtype not in out and not isinstance(computed, str):
                out[dtype] = computed
    else:
        out |= one_kind_peaks(dev, record, out, fma)
    # A conf peak it beat (not the one at the clock it implies: that is the ceiling again, to
    # a rounding, which once relabelled a computed peak as "the measured FMA ceiling").
    if fma and "float32" in out and out["float32"][0] < fma / 1e3 * (1 - 1e-9):
        out["float32"] = (
            fma / 1e3,
            f"the measured FMA ceiling, above the {out['float32'][0]:.4g} TFLOP/s "
            f"{out['float32'][1]}",
        )
    return out


def one_kind_peaks(
    dev: JudgedDevice, record: Mapping[str, Any], given: dict[str, tuple[float, str]], fma: Any
) -> dict[str, tuple[float, str]]:
    """A CPU of one kind of core: cores x clock x FLOP per cycle, for the dtypes not `given`."""
    found, out = record["found"], {}
    # SMT siblings share a core's FMA units: physical cores, where the probe could tell.
    cores = found.get("physical_cores") or found["logical_cores"]
    flags, microarchitecture = set(found["isa"]), found.get("microarchitecture")
    if dev.get("clock_ghz"):
        clock, clock_source = float(dev["clock_ghz"]), "set in conf"
    else:
        clock, clock_source = record["clock"]["ghz"], record["clock"]["source"]
    # The machine beat a peak computed at this clock: the clock is the input that was low (the
    # FMA kernel runs the FLOP per cycle assumed, on every core), so use the one it implies.
    native = cpu_flop_per_cycle("float32", flags, microarchitecture)
    if fma and native and clock:
        implied = implied_clock_ghz(fma / 1e3, cores, native[0])
        if implied > clock:
            clock_source = (
                f"implied by the measured FMA ceiling, {fma / 1e3:.4g} TFLOP/s; the "
                f"{clock_source} read {clock:.2f} GHz"
            )
            clock = implied
    for dtype in DTYPES:
        native = cpu_flop_per_cycle(dtype, flags, microarchitecture)
        if dtype in given or not native or not clock:
            continue
        flop, isa = native
        out[dtype] = (
            cpu_peak_tflops(cores, clock, flop),
            f"{cores} cores x {clock:.2f} GHz ({clock_source}) x {flop} FLOP/cycle, {isa}",
        )
    return out


def no_peak(dev: JudgedDevice, dtype: str, record: Mapping[str, Any]) -> str:
    """Why a dtype has no peak (and so no MFU)."""
    if kind(dev) == "cpu" and record.get("status") == "measured":
        if kinds := record["found"].get("core_types"):
            isa = set(record["found"]["isa"])
            why = core_types_peak(kinds, dtype, isa, dev.get("clock_ghz"))
            return (
                f"no computed peak: {why}; or set peak_tflops.{dtype} in its datasheet line "
                "(conf/device, skus)"
            )
        if record.get("clock", {}).get("ghz") is None and not dev.get("clock_ghz"):
            return (
                f"no clock known ({record.get('clock', {}).get('source', 'not recorded')}): set "
                "clock_ghz or peak_tflops in its datasheet line (conf/device, skus)"
            )
        found = record["found"]
        return (
            f"no computed peak: no FLOP per cycle is known for {dtype} on {found['model']} "
            f"(flags: {', '.join(found['isa']) or 'none known'}); set peak_tflops.{dtype} in its "
            "datasheet line (conf/device, skus), or read the measured FMA ceiling"
        )
    if kind(dev) == "mps" and record.get("status") == "measured":
        return f"no computed peak: {apple_gpu_peak(record['found'], dtype)}"
    if dev.get("missing"):
        return dev["missing"]
    return f"no datasheet peak for {dtype}: set peak_tflops.{dtype} in the {dev.get('sku')} line"


def on_matrix_units(dev: JudgedDevice, record: Mapping[str, Any], point: Measurement) -> bool:
    """Whether a point ran on Apple silicon's matrix units: Accelerate's float32 on an arm64
    Mac (on an Intel Mac, Accelerate runs on the cores' vector units, which the peak counts)."""
    if kind(dev) != "cpu" or record.get("status") != "measured":
        return False
    if dev["peak_tflops"].get(point.dtype) is not None:  # a peak set in conf stands
        return False
    found = record["found"]
    library = (record.get("libraries") or {}).get(point.backend)
    apple = found.get("system") == "Darwin" and found.get("machine") == "arm64"
    return apple and runs_on_accelerate(library, point.dtype)


def matrix_units_reason(found: Mapping[str, Any]) -> str:
    """Why an Accelerate row on Apple silicon has no peak: its SGEMM runs on the matrix units,
    one per cluster (of the clusters the performance levels list), and no per-cluster figure is
    cited yet (the public ones: docs/methodology.md)."""
    kinds = found.get("core_types") or []
    clusters = ", ".join(f"{k['clusters']} of {k['name']}" for k in kinds if k.get("clusters"))
    where = f" ({clusters})" if clusters else ""
    return (
        f"no computed peak: Accelerate runs float32 on {found['model']}'s matrix units (AMX, or "
        f"SME from M4), one per CPU cluster{where}, not on its cores' NEON; no per-cluster "
        "figure is cited for them yet: set peak_tflops.float32 in its datasheet line "
        "(conf/device, skus) with its source"
    )


def interpret(points: list[Measurement], dev: JudgedDevice, record: Mapping[str, Any]) -> list[Row]:
    """results.csv rows for a device's points (its lab record's or its sweep's): each against
    the peak of its dtype in `dev`, the device judged against the datasheet of the SKU measured
    (roofline.interpretation.datasheets.judged); pending ones saying where to measure them. `record`
    is the
    device's lab results record, whose run the peaks come from."""
    peak_of = peaks(dev, record)
    # A CPU's own ceilings from the same run, which a row far below is noisy against.
    fma = (record.get("fma") or {}).get("gflops")
    copy = (record.get("memory") or {}).get("gbps")
    rows = []
    for point in points:
        peak, source = peak_of.get(point.dtype, (None, no_peak(dev, point.dtype, record)))
        if on_matrix_units(dev, record, point):  # never the cores' NEON peak
            peak, source = None, matrix_units_reason(record["found"])
        out = row(point, peak, source, fma / 1e3 if fma else None, copy)
        if out.status == "pending":
            out.reason = f"never measured: run `uv run dvc repro` on a machine with {dev['sku']}"
        else:
            out.sku = dev["sku"]
        rows.append(out)
    return median_gpus(rows)  # a node's GPUs: the device's figure of a point is the median's


def band_limits(band: list[float]) -> tuple[float, float]:
    """The lab's band as it allows it: +-20% around its expected TFLOP/s."""
    return band[0] * 0.8, band[1] * 1.2


def band_verdict(band: list[float], achieved: float) -> str:
    low, high = band_limits(band)
    return "below band" if achieved < low else "above band" if achieved > high else "in band"


def lab_checks(band: list[float] | None, done: float | None, result: Any) -> list[str]:
    """The lab's checks on its FP16 8192^3 figure: its sanity band (+-20%) and done threshold.
    `result` is a float16 row (a Row, or any object with its attributes)."""
    achieved, peak = result.achieved_tflops, result.peak_tflops
    checks = []
    if peak and achieved > peak:
        checks.append(f"INVALID: {achieved:.1f} TFLOP/s is above the dense peak {peak:g}")
    if band:
        low, high = band_limits(band)
        where = "inside" if band_verdict(band, achieved) == "in band" else "OUTSIDE"
        text = (
            f"float16 {achieved:.1f} TFLOP/s is {where} the lab's sanity band "
            f"{band[0]:g}-{band[1]:g} TFLOP/s +-20% ({low:.0f}-{high:.0f})"
        )
        if where == "OUTSIDE":
            text += f"; usual causes: {LAB_CAUSES}"
        checks.append(text)
    if done:
        met = "met" if reaches(achieved, done) else "NOT met"
        checks.append(f"the lab's done threshold, {done:g} TFLOP/s in float16: {met}")
    return checks


# How far below a published figure for the same SKU and work a measurement is flagged.
PUBLISHED_MARGIN = 0.10
PUBLISHED_CAUSES = "the power cap, the clocks under load, other processes on the GPU, the driver"


def published_figure(published: list[PublishedFigure], result: Any) -> PublishedFigure | None:
    """The published figure for a result's dtype and shape on its SKU, if there is one: like
    with like where one is (a sustained row's sustained figure; a burst's burst or unstated
    one), else another window's. Never a best-shape figure (best_shape_figures): it is not
    the same work, whatever its shape."""
    shape = [result.m, result.n, result.k]
    same = [
        p
        for p in published
        if p.dtype == result.dtype and list(p.shape) == shape and not p.best_shape
    ]
    sustained = getattr(result, "series", "lab") == "sustained"
    like = [p for p in same if (p.window == "sustained") == sustained]
    return (like or same or [None])[0]


def best_shape_figures(published: list[PublishedFigure], dtype: str) -> list[PublishedFigure]:
    """Figures published for a dtype at their source's best shape (a vendor's "max
    achievable"): set beside a measurement as such, never judged against."""
    return [p for p in published if p.best_shape and p.dtype == dtype]


@dataclass(frozen=True)
class Verdict:
    """A measured result against the lab's band and a published figure."""

    band: str | None  # "in band", "below band" or "above band"; None: no band for it
    flags: list[str]  # what is wrong, short
    problems: list[str]  # what is wrong, and what to check
    published_share: float | None = None  # the result over the published figure; None: none
    below_published: bool = False  # more than PUBLISHED_MARGIN below it


def verdict(band: list[float] | None, published: PublishedFigure | None, result: Any) -> Verdict:
    """A measured result against the lab's band (+-20%) and a published figure (-10%)."""
    achieved, peak = result.achieved_tflops, result.peak_tflops
    flags, problems = [], []
    if peak and achieved > peak:
        flags.append("above the dense peak: a bug")
        problems.append(f"{achieved:.1f} TFLOP/s is above the dense peak {peak:g}: a bug")
    where = band_verdict(band, achieved) if band else None
    if band:
        low, high = band_limits(band)
        if where != "in band":
            problems.append(
                f"{result.dtype} {achieved:.1f} TFLOP/s is {where.split()[0]} the lab's band "
                f"{band[0]:g}-{band[1]:g} +-20% ({low:.0f}-{high:.0f}); usual causes: {LAB_CAUSES}"
            )
    share = achieved / published.tflops if published else None
    below_published = share is not None and share < 1 - PUBLISHED_MARGIN
    if published and below_published:
        below = 1 - share
        flags.append(f"{below:.0%} below published")
        problems.append(
            f"{result.dtype} {achieved:.1f} TFLOP/s is {below:.0%} below the "
            f"{published.tflops:g} published for this SKU ({published.source}); "
            f"check {PUBLISHED_CAUSES}"
        )
    return Verdict(where, flags, problems, share, below_published)


def reaches(achieved: float, done: float) -> bool:
    """Whether a figure meets the lab's done threshold."""
    return achieved >= done


def judge(entry: DeviceEntry, result: Any) -> tuple[PublishedFigure | None, Verdict]:
    """(the published figure for a result's work on its SKU, its verdict), from the device's
    manifest entry."""
    figure = published_figure(entry.datasheet.published, result)
    return figure, verdict(entry.lab.band_tflops.get(result.dtype), figure, result)
