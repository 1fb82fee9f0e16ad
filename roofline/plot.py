"""The unified log-log roofline (every device's datasheet and measured ceilings, the kernel
points) and one panel per device for the sweeps."""

import matplotlib

matplotlib.use("Agg")  # files only; no display on pods or in CI

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from roofline.arithmetic import ridge_point, roof_tflops
from roofline.ceilings import LAB_DTYPE, measured_ceilings

INTENSITY_RANGE = (0.1, 1e4)  # FLOP/byte
X = np.geomspace(*INTENSITY_RANGE, 400)
MARKERS = {"float32": "o", "tf32": "D", "float16": "s", "bfloat16": "^", "float8_e4m3fn": "*"}
SERIES_MARKERS = {"lab": "*", "square": "o", "skinny": "v", "best-shape": "D"}
# Colour-blind-safe: blue, orange, green, pink, ... (vermillion skipped: too close to orange).
PALETTE_ORDER = [0, 1, 2, 4, 7, 8, 9, 5]
AXES = {
    "xscale": "log",
    "yscale": "log",
    "xlim": INTENSITY_RANGE,
    "xlabel": "arithmetic intensity (FLOP/byte, ideal-cache bytes)",
    "ylabel": "TFLOP/s",
}


def peak_roofs(name: str, entry: dict, rows: pd.DataFrame) -> dict[float, list[str]]:
    """Distinct peaks -> dtypes: the measured rows' (a CPU's computed ones), else the
    datasheet's for the lab's kernel."""
    measured = rows[(rows.device == name) & rows.peak_tflops.notna()]
    if (measured.series == "lab").any():  # each run computes a CPU's peak anew: the lab's is shown
        measured = measured[measured.series == "lab"]
    peaks = dict(zip(measured.dtype, measured.peak_tflops, strict=True))
    if not peaks:
        headline, sheet = LAB_DTYPE[entry["kind"]], entry["datasheet"]["peak_tflops"]
        peaks = {headline: sheet[headline]} if headline in sheet else {}
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in peaks.items():
        by_peak.setdefault(round(float(peak), 6), []).append(dtype)
    return by_peak


def roof(ax: Axes, top: float, bandwidth: float | None, style: str, **line) -> None:
    """A roofline: the memory slope up to the ridge (marked), then flat at `top`."""
    if bandwidth is None:
        ax.plot(X, np.full_like(X, top), style, **line)
        return
    ax.plot(X, roof_tflops(X, top, bandwidth), style, **line)
    ax.plot(
        [ridge_point(top, bandwidth)],
        [top],
        "|",
        ms=14,
        mew=2,
        color=line["color"],
        alpha=line.get("alpha", 1.0),
    )


def palette(rows: pd.DataFrame) -> dict[str, tuple]:
    colors = sns.color_palette("colorblind")
    order = dict.fromkeys(rows.device)  # config order, as in results.csv
    return {name: colors[i] for name, i in zip(order, PALETTE_ORDER, strict=False)}


def draw(rows: pd.DataFrame, manifest: dict) -> Figure:
    sns.set_theme(style="whitegrid", context="talk")
    colors = palette(rows)
    ceilings = measured_ceilings(rows)
    fig, ax = plt.subplots(figsize=(14, 8.5))
    handles, labels = [], {}  # labels: height -> [(text, colour, alpha)]
    for name, color in colors.items():
        entry = manifest["devices"][name]
        pending = entry["status"] != "measured"
        line = {"color": color, "lw": 1.8 if pending else 2.4, "alpha": 0.45 if pending else 1.0}
        sheet_bw = entry["datasheet"]["memory_bandwidth_gbps"]
        for peak, dtypes in peak_roofs(name, entry, rows).items():
            roof(ax, peak, sheet_bw, "-", **line)
            labels.setdefault(peak, []).append(
                (f"{name} {'/'.join(dtypes)} {peak:.3g}", color, line["alpha"])
            )
        copy_bw = entry.get("memory_copy", {}).get("gbps")
        for (device, _dtype), ceiling in ceilings.items():
            if device == name and copy_bw:
                roof(ax, ceiling["tflops"], copy_bw, ":", **line)
        slopes = [f"datasheet {sheet_bw:g} GB/s"] if sheet_bw else []
        slopes += [f"measured {copy_bw:.0f} GB/s"] if copy_bw else []
        label = (
            f"{name}{' (pending)' if pending else ''}: {', '.join(slopes) or 'no bandwidth known'}"
        )
        handles.append(Line2D([], [], ls="-" if sheet_bw else ":", label=label, **line))
    for height, texts in labels.items():  # roofs at one height (H100, H200) share one label
        text, color, alpha = (
            texts[0] if len(texts) == 1 else ("; ".join(t for t, _, _ in texts), "black", 0.8)
        )
        ax.annotate(
            text,
            (X[-1], height),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=10,
            color=color,
            alpha=min(1.0, alpha + 0.3),
        )
    lab = rows[(rows.status == "measured") & (rows.series == "lab")]
    for (name, dtype), group in lab.groupby(["device", "dtype"], sort=False):
        ax.scatter(
            group.arithmetic_intensity,
            group.achieved_tflops,
            s=170,
            zorder=5,
            marker=MARKERS.get(dtype, "o"),
            color=colors[name],
            edgecolor="black",
        )
    handles += [
        Line2D(
            [],
            [],
            ls="",
            marker=MARKERS.get(d, "o"),
            ms=11,
            color="grey",
            markeredgecolor="black",
            label=f"measured {d}",
        )
        for d in dict.fromkeys(lab.dtype)
    ]
    handles += [
        Line2D([], [], color="black", ls="-", lw=2, label="datasheet (CPU: computed) peak"),
        Line2D([], [], color="black", ls=":", lw=2, label="measured ceilings (best shape, copy)"),
    ]
    ax.set(**AXES, title="Dense matmul roofline, every device")
    ax.legend(handles=handles, fontsize=11, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def draw_sweeps(rows: pd.DataFrame, manifest: dict) -> Figure:
    """One panel per measured device: its measured ceilings per dtype and every point, marked
    by series (lab, square, skinny, best-shape)."""
    sns.set_theme(style="whitegrid", context="notebook")
    measured = [
        n for n in dict.fromkeys(rows.device) if manifest["devices"][n]["status"] == "measured"
    ]
    fig, axes = plt.subplots(
        1, max(1, len(measured)), figsize=(7 * max(1, len(measured)), 5.5), squeeze=False
    )
    if not measured:
        axes[0][0].text(0.5, 0.5, "no device measured yet", ha="center", va="center")
        return fig
    ceilings = measured_ceilings(rows)
    dtype_colors = dict(zip(MARKERS, sns.color_palette("colorblind"), strict=False))
    for ax, name in zip(axes[0], measured, strict=True):
        copy_bw = manifest["devices"][name]["memory_copy"]["gbps"]
        points = rows[(rows.device == name) & (rows.status == "measured")]
        for dtype, group in points.groupby("dtype", sort=False):
            color = dtype_colors.get(dtype, "grey")
            roof(ax, ceilings[(name, dtype)]["tflops"], copy_bw, ":", color=color, lw=2)
            for series, part in group.groupby("series", sort=False):
                ax.scatter(
                    part.arithmetic_intensity,
                    part.achieved_tflops,
                    color=color,
                    s=60,
                    marker=SERIES_MARKERS.get(series, "o"),
                    edgecolor="black",
                    zorder=5,
                    label=f"{dtype} {series}",
                )
        ax.set(**AXES, title=f"{name}: measured ceilings ({copy_bw:.0f} GB/s copy)")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
