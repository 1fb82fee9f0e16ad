"""The deliverables' rows, defined once: a results.csv line (`Row`) is a `Measurement` with its
figures, derived from the median of its samples, and their interpretation against the device's
peak; a knobs.csv line (`KnobRow`) is a `KnobMeasurement` with each side's rate and the gain.
Interpretation: the aggregate stage, the plot and the report read these; no measuring stage
imports them."""

import dataclasses
from dataclasses import dataclass

from roofline.core import arithmetic as ar
from roofline.core.measurement import KnobMeasurement, Measurement, WindowTelemetry
from roofline.interpretation.noise import noise
from roofline.interpretation.roofs import joules_per_tflop, mfu


@dataclass
class Row(Measurement):
    """One line of results.csv: a measurement's figures, derived from the median of its samples,
    and their interpretation against the device's peak."""

    sku: str = ""  # the datasheet line it is judged against (roofline.interpretation.datasheets)
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
    joules_per_tflop: float | None = None
    flag: str = ""  # non-empty marks a number that cannot be right
    noisy: str = ""  # non-empty: its timed window was noisy, and the figures that say so


MEASUREMENT_FIELDS = {f.name for f in dataclasses.fields(Measurement)}
# Every sample and the timing's mode stay in the records: the table's line says its timing in
# words. The point first, then its window's telemetry (the base class's fields, which
# dataclasses list first), then its figures.
TELEMETRY_COLUMNS = [f.name for f in dataclasses.fields(WindowTelemetry)]
CSV_COLUMNS = [
    *(
        f.name
        for f in dataclasses.fields(Measurement)
        if f.name not in ("samples_s", "timing_mode", *TELEMETRY_COLUMNS)
    ),
    *TELEMETRY_COLUMNS,
    *(f.name for f in dataclasses.fields(Row) if f.name not in MEASUREMENT_FIELDS),
]


@dataclass
class KnobRow(KnobMeasurement):
    """One line of knobs.csv: each side's rate from its median, and the gain."""

    baseline_tflops: float | None = None
    variant_tflops: float | None = None
    gain: float | None = None  # variant / baseline
    variant_mnk: str = ""  # the variant's own shape, "MxNxK", where not the baseline's
    baseline_spread: float | None = None
    variant_spread: float | None = None


# knobs.csv: every field but the samples, and the variant's own shape as text (variant_mnk).
KNOB_COLUMNS = [
    f.name
    for f in dataclasses.fields(KnobRow)
    if not f.name.endswith("samples_s") and f.name != "variant_shape"
]


def knob_title(knob: str, baseline: str, variant: str) -> str:
    """A knob as the report and the figure name it: its sides only where they say more."""
    sides = f"{baseline} -> {variant}"
    return knob if sides == knob else f"{knob}: {sides}"


def knob_row(point: KnobMeasurement) -> KnobRow:
    out = KnobRow(**dataclasses.asdict(point))
    if point.status != "measured":
        return out
    flops = ar.matmul_flops(point.m, point.n, point.k)
    variant_flops = ar.matmul_flops(*point.variant_shape) if point.variant_shape else flops
    out.variant_mnk = "x".join(map(str, point.variant_shape or []))
    base, var = ar.summarize(point.baseline_samples_s), ar.summarize(point.variant_samples_s)
    out.baseline_tflops = ar.tflops(flops, base["median_s"])
    out.variant_tflops = ar.tflops(variant_flops, var["median_s"])
    out.gain = out.variant_tflops / out.baseline_tflops
    out.baseline_spread, out.variant_spread = base["spread"], var["spread"]
    return out


def row(
    point: Measurement,
    peak_tflops: float | None = None,
    peak_source: str = "",
    fma_tflops: float | None = None,
    copy_gbps: float | None = None,
) -> Row:
    """The point's results.csv line: every figure derived from the median of its samples, MFU
    against `peak_tflops`, and a flag where the figure is above that dense peak, the GPU or the
    timed window was shared, the window noisy (`noise`, against a CPU's `fma_tflops` and
    `copy_gbps` from the same run) or cut short by the call cap."""
    out = Row(**dataclasses.asdict(point), peak_source=peak_source)
    if point.status != "measured":
        return out
    stats = ar.summarize(point.samples_s)
    flops, nbytes = (
        ar.matmul_flops(point.m, point.n, point.k),
        ar.matmul_bytes(point.m, point.n, point.k, point.dtype),
    )
    achieved = ar.tflops(flops, stats["median_s"])
    out.median_s, out.min_s, out.max_s, out.spread = (
        stats["median_s"],
        stats["min_s"],
        stats["max_s"],
        stats["spread"],
    )
    out.repeats = len(point.samples_s)
    out.achieved_tflops = achieved
    out.achieved_bw_gbps = ar.gbps(nbytes, stats["median_s"])
    out.arithmetic_intensity = ar.intensity(flops, nbytes)
    if point.energy_j is not None:  # the window's energy over its calls' work
        out.joules_per_tflop = point.energy_j / (len(point.samples_s) * flops / 1e12)
    elif point.power_w is not None:
        out.joules_per_tflop = joules_per_tflop(point.power_w, stats["median_s"], flops)
    flags = []
    if peak_tflops:
        out.peak_tflops = peak_tflops
        if achieved > peak_tflops:  # no MFU above 100% reaches any deliverable as a result
            flags.append(
                f"above the dense peak ({achieved:.3g} > {peak_tflops:.3g} TFLOP/s, "
                f"{mfu(achieved, peak_tflops):.0%}): a bug in the timing, the FLOP count or the "
                "peak, not a result; MFU left blank"
            )
        else:
            out.mfu = mfu(achieved, peak_tflops)
    if point.other_processes:
        flags.append(
            f"shared GPU: other processes computed on it during the window ({point.other_processes})"
        )
    out.noisy = "; ".join(noise(point, fma_tflops, copy_gbps))
    if out.noisy:
        flags.append(f"noisy window ({out.noisy}): re-measure on a quiet machine")
    if point.window_cut:
        flags.append(f"short window: {point.window_cut}")
    out.flag = "; ".join(flags)
    return out
