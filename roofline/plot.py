"""The unified log-log roofline: every device's roofs and memory slopes, and the kernel points."""

import matplotlib

matplotlib.use("Agg")  # files only; no display on pods or in CI

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from roofline.arithmetic import ridge_point

INTENSITY_RANGE = (0.1, 1e4)  # FLOP/byte
MARKERS = {"float32": "o", "tf32": "D", "float16": "s", "bfloat16": "^", "float8_e4m3fn": "*"}


def roofs(name: str, entry: dict, rows: pd.DataFrame) -> list[dict]:
    """One roof per distinct peak of a device: the measured rows' peaks (a CPU's computed
    ones), else the datasheet's for the dtypes it runs."""
    peaks: dict[float, list[str]] = {}
    measured = rows[(rows.device == name) & rows.peak_tflops.notna()]
    source = dict(zip(measured.dtype, measured.peak_tflops, strict=True)) or {
        dtype: entry["datasheet"]["peak_tflops"][dtype]
        for dtype in rows[rows.device == name].dtype.unique()
        if dtype in entry["datasheet"]["peak_tflops"]
    }
    for dtype, peak in source.items():
        peaks.setdefault(round(float(peak), 6), []).append(dtype)
    return [{"peak": peak, "dtypes": dtypes} for peak, dtypes in sorted(peaks.items())]


def draw(rows: pd.DataFrame, manifest: dict) -> Figure:
    sns.set_theme(style="whitegrid", context="talk")
    colors = sns.color_palette("colorblind")
    order = list(dict.fromkeys(rows.device))  # config order, as in results.csv
    # Blue, orange, green, pink, ...: vermillion (index 3) is too close to orange.
    palette = {name: colors[i] for name, i in zip(order, [0, 1, 2, 4, 7, 8, 9, 5], strict=False)}
    fig, ax = plt.subplots(figsize=(13, 8.5))
    x = np.geomspace(*INTENSITY_RANGE, 400)
    for name in order:
        entry, color = manifest["devices"][name], palette[name]
        slopes = []
        if entry["datasheet"]["memory_bandwidth_gbps"]:
            slopes.append(("datasheet", entry["datasheet"]["memory_bandwidth_gbps"], "-"))
        if entry.get("memory_copy"):
            slopes.append(("measured copy", entry["memory_copy"]["gbps"], ":"))
        pending = "" if entry["status"] == "measured" else " (pending)"
        for roof in roofs(name, entry, rows):
            for label, bw, style in slopes:
                y = np.minimum(roof["peak"], bw * 1e9 * x / 1e12)
                ax.plot(
                    x,
                    y,
                    style,
                    color=color,
                    lw=2,
                    alpha=0.5 if pending else 1.0,
                    label=f"{name}{pending}: {label} {bw:.0f} GB/s, "
                    f"{'/'.join(roof['dtypes'])} roof {roof['peak']:.3g} TFLOP/s",
                )
                ridge = ridge_point(roof["peak"], bw)
                ax.plot([ridge], [roof["peak"]], "|", color=color, ms=14, mew=2)
            if not slopes:  # no bandwidth known: the roof alone
                ax.axhline(
                    roof["peak"],
                    color=color,
                    lw=2,
                    ls="--",
                    label=f"{name}{pending}: {'/'.join(roof['dtypes'])} roof "
                    f"{roof['peak']:.3g} TFLOP/s",
                )
    measured = rows[rows.status == "measured"]
    for (name, dtype), group in measured.groupby(["device", "dtype"], sort=False):
        ax.scatter(
            group.arithmetic_intensity,
            group.achieved_tflops,
            s=180,
            zorder=5,
            marker=MARKERS.get(dtype, "o"),
            color=palette[name],
            edgecolor="black",
            label=f"{name} {dtype}: {group.achieved_tflops.max():.3g} TFLOP/s measured",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlim=INTENSITY_RANGE,
        xlabel="arithmetic intensity (FLOP/byte, ideal-cache bytes)",
        ylabel="performance (TFLOP/s)",
        title="Dense matmul roofline (solid: datasheet, dotted: measured copy)",
    )
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=True)
    fig.tight_layout()
    return fig
