"""The unified log-log roofline: every device's roofs and memory slopes, and the kernel points."""

import matplotlib

matplotlib.use("Agg")  # files only; no display on pods or in CI

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from roofline.arithmetic import ridge_point

INTENSITY_RANGE = (0.1, 1e4)  # FLOP/byte
MARKERS = {"float32": "o", "tf32": "D", "float16": "s", "bfloat16": "^", "float8_e4m3fn": "*"}
HEADLINE = {"cpu": "float32", "cuda": "float16"}  # a pending device shows the lab kernel's roof
# Colour-blind-safe: blue, orange, green, pink, ... (vermillion skipped: too close to orange).
PALETTE_ORDER = [0, 1, 2, 4, 7, 8, 9, 5]


def roofs(name: str, entry: dict, rows: pd.DataFrame) -> list[dict]:
    """One roof per distinct peak: the measured rows' peaks (a CPU's computed ones), else the
    datasheet's for the lab's kernel."""
    measured = rows[(rows.device == name) & rows.peak_tflops.notna()]
    peaks = dict(zip(measured.dtype, measured.peak_tflops, strict=True))
    if not peaks:
        headline = HEADLINE[entry["kind"]]
        sheet = entry["datasheet"]["peak_tflops"]
        peaks = {headline: sheet[headline]} if headline in sheet else {}
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in peaks.items():
        by_peak.setdefault(round(float(peak), 6), []).append(dtype)
    return [{"peak": peak, "dtypes": dtypes} for peak, dtypes in sorted(by_peak.items())]


def slopes(entry: dict) -> list[tuple[str, float]]:
    """(line style, GB/s): the datasheet's solid, the measured copy's dotted."""
    found = []
    if entry["datasheet"]["memory_bandwidth_gbps"]:
        found.append(("-", entry["datasheet"]["memory_bandwidth_gbps"]))
    if entry.get("memory_copy"):
        found.append((":", entry["memory_copy"]["gbps"]))
    return found


def draw(rows: pd.DataFrame, manifest: dict) -> Figure:
    sns.set_theme(style="whitegrid", context="talk")
    colors = sns.color_palette("colorblind")
    order = list(dict.fromkeys(rows.device))  # config order, as in results.csv
    palette = {name: colors[i] for name, i in zip(order, PALETTE_ORDER, strict=False)}
    fig, ax = plt.subplots(figsize=(14, 8.5))
    x = np.geomspace(*INTENSITY_RANGE, 400)
    handles, labels = [], {}  # labels: roof height -> [(text, colour, alpha)]
    for name in order:
        entry, color = manifest["devices"][name], palette[name]
        pending = entry["status"] != "measured"
        alpha, width = (0.45, 1.8) if pending else (1.0, 2.4)
        for roof in roofs(name, entry, rows):
            for style, bw in slopes(entry) or [("--", None)]:
                y = (
                    np.full_like(x, roof["peak"])
                    if bw is None
                    else np.minimum(roof["peak"], bw * 1e9 * x / 1e12)
                )
                ax.plot(x, y, style, color=color, lw=width, alpha=alpha)
                if bw is not None:
                    ax.plot(
                        [ridge_point(roof["peak"], bw)],
                        [roof["peak"]],
                        "|",
                        color=color,
                        ms=14,
                        mew=2,
                        alpha=alpha,
                    )
            text = f"{name} {'/'.join(roof['dtypes'])} {roof['peak']:.3g}"
            labels.setdefault(roof["peak"], []).append((text, color, min(1.0, alpha + 0.3)))
        bandwidths = ", ".join(
            f"{'datasheet' if s == '-' else 'measured'} {bw:.0f} GB/s" for s, bw in slopes(entry)
        )
        label = f"{name}{' (pending)' if pending else ''}" + (
            f": {bandwidths}" if bandwidths else ""
        )
        style = slopes(entry)[0][0] if slopes(entry) else "--"
        handles.append(Line2D([], [], color=color, ls=style, lw=width, alpha=alpha, label=label))
    for peak, texts in labels.items():  # roofs at one height (H100, H200) share one label
        text, color, alpha = (
            texts[0] if len(texts) == 1 else ("; ".join(t for t, _, _ in texts), "black", 0.8)
        )
        ax.annotate(
            text,
            (x[-1], peak),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=10,
            color=color,
            alpha=alpha,
        )
    measured = rows[rows.status == "measured"]
    for (name, dtype), group in measured.groupby(["device", "dtype"], sort=False):
        ax.scatter(
            group.arithmetic_intensity,
            group.achieved_tflops,
            s=170,
            zorder=5,
            marker=MARKERS.get(dtype, "o"),
            color=palette[name],
            edgecolor="black",
        )
    for dtype in dict.fromkeys(measured.dtype):
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker=MARKERS.get(dtype, "o"),
                ms=11,
                color="grey",
                markeredgecolor="black",
                label=f"measured {dtype}",
            )
        )
    handles += [
        Line2D([], [], color="black", ls="-", lw=2, label="datasheet bandwidth and peak"),
        Line2D([], [], color="black", ls=":", lw=2, label="measured copy bandwidth"),
    ]
    ax.set(
        xscale="log",
        yscale="log",
        xlim=INTENSITY_RANGE,
        xlabel="arithmetic intensity (FLOP/byte, ideal-cache bytes)",
        ylabel="performance (TFLOP/s)",
        title="Dense matmul roofline, every device",
    )
    ax.legend(handles=handles, fontsize=11, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
