"""Sentences and cells both pages write (REPORT.md, roofline.rendering.report; the appendix,
roofline.rendering.appendix), from typed results."""

import math
from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.device.backends import label
from roofline.interpretation.breakdown import clock_cause
from roofline.interpretation.ceilings import SUSTAINED
from roofline.interpretation.figures import ratio, sustained_change, window_seconds
from roofline.interpretation.gaps import noisy, run_of
from roofline.interpretation.interpret import (
    published_figure,
)
from roofline.interpretation.manifest import (
    DeviceEntry,
)
from roofline.interpretation.node import NodeSpread, node_spread


def times(ratio: float) -> str:
    """A ratio with two significant figures (3.1, 120), never in exponent form, and the sign."""
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.2g}×"


def cell(value: Any, fmt: str) -> str:
    return (
        ""
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, fmt)
    )


def library(entry: DeviceEntry, backend: str, dtype: str) -> str:
    """What a row went through, as the run recorded it."""
    run = run_of(entry)
    if entry.kind != "cpu":
        if entry.kind == "mps":
            return f"torch {run.versions.torch} (mps)"
        if entry.kind == "rocm":  # torch.cuda's API over HIP: no CUDA, no cuBLASLt
            return f"torch {run.versions.torch} (ROCm: hipBLASLt), driver {run.details.driver}"
        return (
            f"torch {run.versions.torch}, CUDA {run.versions.cuda}, cuBLASLt "
            f"{run.details.cublaslt}, driver {run.details.driver}"
        )
    return label(backend, (run.libraries or {}).get(backend), dtype)


def noisy_sentence(head: Any) -> str:
    """A headline timed in a noisy window: said with its figures, in place of a cause."""
    if not noisy(head):
        return ""
    return (
        f"Its timed window was noisy ({noisy(head)}): re-measure on a quiet machine; no cause "
        "is read from these figures."
    )


def datasheet_sentence(entry: DeviceEntry) -> str:
    """Where the datasheet this SKU is judged against falls short: none for its name, or the
    lab's band written for another SKU."""
    missing = entry.datasheet.missing
    if missing:
        return missing[0].upper() + missing[1:] + "."
    written_for = entry.lab.written_for
    if written_for:
        return (
            f"The lab's band and done threshold were written for {written_for}; this is "
            f"{entry.sku}, so they are not applied."
        )
    return ""


def spread_words(spread: NodeSpread) -> str:
    (slow, slow_tflops), (fast, fast_tflops) = spread.slowest, spread.fastest
    return (
        f"the slowest, GPU {slow}, ran {slow_tflops:.4g} TFLOP/s, {spread.spread:.1%} below the "
        f"fastest (GPU {fast}, {fast_tflops:.4g})"
    )


def sustained_sentence(
    entry: DeviceEntry, rows: pd.DataFrame, sustained: pd.DataFrame | None = None
) -> str:
    """The headline point timed again in one long window (the series "sustained", by default
    the device's `rows` of it) beside its burst, the lab row of the same point: both figures and
    the change, the SM clock and what held it over the long window; and a figure published for
    a sustained window beside ours. "" where no sustained window was measured or asked for."""
    sustained = rows[rows.series == SUSTAINED] if sustained is None else sustained
    if sustained.empty:
        return ""
    s = SimpleNamespace(**sustained.iloc[0].to_dict())
    if s.status != "measured":
        return f"The sustained window was {s.status}: {s.reason}."
    seconds = window_seconds(s)
    text = (
        f"Sustained over {seconds:.0f} s" if seconds >= 10 else f"Sustained over {seconds:.2g} s"
    ) + f", {s.dtype} {s.m}×{s.n}×{s.k} ({s.backend}) ran at {s.achieved_tflops:.4g} TFLOP/s"
    measured = rows[(rows.status == "measured") & (rows.series == "lab")]
    same = measured[
        (measured.dtype == s.dtype)
        & (measured.backend == s.backend)
        & (measured.m == s.m)
        & (measured.n == s.n)
        & (measured.k == s.k)
    ]
    burst = SimpleNamespace(**same.iloc[0].to_dict()) if not same.empty else None
    if burst is not None:
        change, too_short = sustained_change(s, burst)
        window = f"{burst.window_s:.2g} s " if pd.notna(burst.window_s) else ""
        if too_short:
            text += f" (⚠ no longer than the {window}burst: not a sustained window)"
        text += (
            f", {abs(change):.1%} {'below' if change < 0 else 'above'} the {window}burst's "
            f"{burst.achieved_tflops:.4g}"
        )
    if pd.notna(s.sm_clock_mhz):
        text += f"; SM clock {s.sm_clock_mhz:.0f} MHz"
        if burst is not None and pd.notna(burst.sm_clock_mhz):
            text += f" ({burst.sm_clock_mhz:.0f} MHz in the burst)"
        text += f"; {clock_cause(s)}"
    if isinstance(s.flag, str) and s.flag:
        text += f" ⚠ {s.flag}"
    if spread := node_spread(rows, s):
        text += f"; {spread_words(spread)}"
    figure = published_figure(entry.datasheet.published, s)
    if figure is not None and figure.window == "sustained":
        text += (
            f"; published for a sustained window on this SKU: {figure.tflops:g} TFLOP/s "
            f"({figure.source}), which this is {ratio(s.achieved_tflops, figure.tflops):.0%} of"
        )
    return text + "."


def sides_telemetry(r: Any) -> str:
    """Each side's SM clock and power, where the knob read them ("" where it did not)."""
    said = [
        f"{what} {getattr(r, f'baseline_{field}'):.0f} → {getattr(r, f'variant_{field}'):.0f} {unit}"
        for field, what, unit in (("sm_clock_mhz", "SM clock", "MHz"), ("power_w", "power", "W"))
        if not pd.isna(getattr(r, f"baseline_{field}", None))
        and not pd.isna(getattr(r, f"variant_{field}", None))
    ]
    return "; " + ", ".join(said) if said else ""
