"""The deliverables' rows, defined once: a results.csv line (`Row`) is a `Measurement` with its
figures, derived from the median of its samples, and their interpretation against the device's
peak; a knobs.csv line (`KnobRow`) is a `KnobMeasurement` with each side's rate and the gain.
Interpretation: the aggregate stage, the plot and the report read these; no measuring stage
imports them."""

import dataclasses
import statistics
from dataclasses import dataclass

from roofline.core import arithmetic as ar
from roofline.core.schema import KnobMeasurement, Measurement, TimingMode
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


# Every sample and the timing's mode stay in the records: the table's line says its timing in words.
CSV_COLUMNS = [
    f.name for f in dataclasses.fields(Row) if f.name not in ("samples_s", "timing_mode")
]


@dataclass
class KnobRow(KnobMeasurement):
    """One line of knobs.csv: each side's rate from its median, and the gain."""

    baseline_tflops: float | None = None
    variant_tflops: float | None = None
    gain: float | None = None  # variant / baseline
    baseline_spread: float | None = None
    variant_spread: float | None = None


KNOB_COLUMNS = [f.name for f in dataclasses.fields(KnobRow) if not f.name.endswith("samples_s")]


def knob_title(knob: str, baseline: str, variant: str) -> str:
    """A knob as the report and the figure name it: its sides only where they say more."""
    sides = f"{baseline} -> {variant}"
    return knob if sides == knob else f"{knob}: {sides}"


def knob_row(point: KnobMeasurement) -> KnobRow:
    out = KnobRow(**dataclasses.asdict(point))
    if point.status != "measured":
        return out
    flops = ar.matmul_flops(point.m, point.n, point.k)
    base, var = ar.summarize(point.baseline_samples_s), ar.summarize(point.variant_samples_s)
    out.baseline_tflops = ar.tflops(flops, base["median_s"])
    out.variant_tflops = ar.tflops(flops, var["median_s"])
    out.gain = out.variant_tflops / out.baseline_tflops
    out.baseline_spread, out.variant_spread = base["spread"], var["spread"]
    return out


# A noisy timed window. Each threshold is from this project's 2-core CI machine (AMD EPYC, a VM),
# float32 48^3 to 4096^3 through torch and numpy, quiet against `python3 -c 'while True: pass'` on
# one core and on both:
SHARE_MIN = 0.8  # of the CPU: quiet 0.90-1.00 where the BLAS used every core; busy 0.24-0.69
IDLE_MAX = 0.1  # ...and the rest not idle: quiet one-thread numpy 48^3, 0.50 and 0.51 idle
STEAL_MAX = 0.05  # 0.000-0.003 here, quiet or busy (a loop in a VM is not steal): 5%, a shared host
SPREAD_MAX = 0.5  # (p90 - p10) / median: quiet at most 0.25; busy up to 67
ROOF_FRACTION = 1 / 20  # quiet rows at 0.08 of their roof or more; busy, 48^3 in 16 ms: 0.0001


def shared_window(point: Measurement) -> str:
    """Why the host was not the timed window's own, with the figures, or "": the CPU time the
    process did not have went to others (not idle), other threads were runnable at both ends of
    the window, or the hypervisor took the cores. Host-clock timing only: a GPU's events time
    the device whatever its host does. A source the OS did not report (None) flags nothing."""
    if point.timing_mode is not TimingMode.HOST:
        return ""
    share, idle, others, steal = point.cpu_share, point.cpu_idle, point.other_runnable, point.steal
    taken = share is not None and idle is not None and share < SHARE_MIN and idle < IDLE_MAX
    stolen = steal is not None and steal > STEAL_MAX
    if not (taken or others or stolen):
        return ""
    said = [] if share is None else [f"the process had {share:.0%} of the CPU during the window"]
    if others:
        said.append(f"{others} other runnable thread{'s' * (others > 1)} at its start and end")
    if stolen:
        said.append(f"the hypervisor took {steal:.0%} of the cores' time")
    return ", ".join(said)


def middle_spread(samples: list[float]) -> float | None:
    """(p90 - p10) / median: the middle 80% of the calls. Not (max - min) / median, which one
    interrupt in 10,000 short calls makes 8-128 on a quiet machine."""
    if len(samples) < 2:
        return None
    deciles = statistics.quantiles(samples, n=10, method="inclusive")
    return (deciles[-1] - deciles[0]) / statistics.median(samples)


def noise(point: Measurement, fma_tflops: float | None, copy_gbps: float | None) -> list[str]:
    """What says the point's timed window was noisy, each with its figure: a shared window,
    calls that disagree, or a rate far below the device's own measured roof (the lesser of its
    FMA ceiling and intensity x copy bandwidth: a CPU's, from the same run)."""
    out = []
    shared = shared_window(point)
    if shared:
        out.append(f"a shared window: {shared}")
    spread = middle_spread(point.samples_s)
    if spread is not None and spread > SPREAD_MAX:
        out.append(f"the middle 80% of its calls spread {spread:.0%} of the median")
    if fma_tflops and copy_gbps and point.series == "lab":  # a sweep's small shapes may be so
        flops = ar.matmul_flops(point.m, point.n, point.k)
        nbytes = ar.matmul_bytes(point.m, point.n, point.k, point.dtype)
        roof = min(fma_tflops, ar.intensity(flops, nbytes) * copy_gbps / 1e3)
        rate = ar.tflops(flops, ar.summarize(point.samples_s)["median_s"])
        if rate < ROOF_FRACTION * roof:
            out.append(
                f"{rate:.3g} TFLOP/s is {100 * rate / roof:.2g}% of its roof measured in the same run "
                f"({roof:.3g} TFLOP/s, the lesser of the FMA ceiling and intensity x copy "
                "bandwidth)"
            )
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
