"""The unified log-log roofline (every device's datasheet and measured ceilings, the kernel
points) and one panel per device for the sweeps."""

import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # files only; no display on pods or in CI

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatter

from roofline.core.depends import OWN_BACKEND
from roofline.core.dtypes import DTYPES, LAB_DTYPE
from roofline.interpretation import figures
from roofline.interpretation.ceilings import measured_ceilings
from roofline.interpretation.manifest import DeviceEntry, Manifest, ManifestJson, as_manifest
from roofline.interpretation.node import is_other_gpu
from roofline.interpretation.roofs import ridge_point, roof_tflops
from roofline.interpretation.rows import knob_title

INTENSITY_RANGE = (0.1, 1e4)  # FLOP/byte
SERIES_MARKERS = {"lab": "*", "square": "o", "skinny": "v", "best-shape": "D", "sustained": "P"}
# How a point shows the library it went through: torch filled, another library (numpy's BLAS)
# hollow, a kernel of your own ("module:function") hatched, so that it never wears a library's
# marker.
BACKEND_LOOKS = {
    "torch": {"filled": True, "hatch": None, "width": 1.0},
    "library": {"filled": False, "hatch": None, "width": 2.0},
    "own": {"filled": False, "hatch": "////", "width": 2.0},
}


def backend_look(backend: str) -> dict:
    """How a point through `backend` is drawn (BACKEND_LOOKS)."""
    own = OWN_BACKEND.fullmatch(backend)
    return BACKEND_LOOKS["own" if own else "torch" if backend == "torch" else "library"]


def point_style(backend: str, color: object) -> dict:
    """A scatter's keywords for a point through `backend`, in the device's (or dtype's) colour."""
    look = backend_look(backend)
    return {
        "facecolors": color if look["filled"] else "none",
        "edgecolors": "black" if look["filled"] else color,
        "linewidths": look["width"],
        "hatch": look["hatch"],
    }


# Colour-blind-safe: blue, orange, green, pink, ... (vermillion skipped: too close to orange).
PALETTE_ORDER = [0, 1, 2, 4, 7, 8, 9, 5]
AXES = {
    "xscale": "log",
    "yscale": "log",
    "xlim": INTENSITY_RANGE,
    "xlabel": "arithmetic intensity (FLOP/byte, ideal-cache bytes)",
    "ylabel": "TFLOP/s",
}


class PlainLogFormatter(LogFormatter):
    """Log-axis tick labels as plain numbers (0.01, 0.1, 1, 10, 10000), thinned as matplotlib's
    own are. Its default writes powers of ten in mathtext, whose parser took about a quarter of
    the plot stage's drawing and saving time."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g}"


def plain_log_ticks(ax: Axes) -> None:
    """Plain-number labels on the major and minor ticks of the panel's log axes."""
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(PlainLogFormatter())
            axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))


def peak_roofs(name: str, entry: DeviceEntry, rows: pd.DataFrame) -> dict[float, list[str]]:
    """Distinct peaks -> dtypes: the measured rows' (a CPU's computed ones), else the
    datasheet's for the lab's kernel."""
    measured = rows[(rows.device == name) & rows.peak_tflops.notna()]
    if (measured.series == "lab").any():  # each run computes a CPU's peak anew: the lab's is shown
        measured = measured[measured.series == "lab"]
    peaks = dict(zip(measured.dtype, measured.peak_tflops, strict=True))
    if not peaks:
        headline, sheet = LAB_DTYPE[entry.kind], entry.datasheet.peak_tflops
        peaks = {headline: sheet[headline]} if headline in sheet else {}
    by_peak: dict[float, list[str]] = {}
    for dtype, peak in peaks.items():
        by_peak.setdefault(round(float(peak), 6), []).append(dtype)
    return by_peak


@dataclass
class Roof:
    """One roofline: a memory slope up to its ridge, then flat at its compute ceiling."""

    device: str
    # "datasheet" (a CPU's: computed from its clock), "FMA" (a CPU's measured FMA ceiling) or
    # "measured" (the best point of a dtype)
    source: str
    dtypes: list[str]
    top: float  # TFLOP/s
    bandwidth: float | None  # GB/s of the slope; None: no bandwidth known, flat only
    pending: bool = False

    def vertices(self) -> list[tuple[float, float]]:
        """Its corners over the plotted range: straight segments on log-log axes."""
        low, high = INTENSITY_RANGE
        if self.bandwidth is None:
            return [(low, self.top), (high, self.top)]
        ridge = min(max(ridge_point(self.top, self.bandwidth), low), high)
        xs = dict.fromkeys([low, ridge, high])
        return [(x, float(roof_tflops(x, self.top, self.bandwidth))) for x in xs]

    @property
    def ridge(self) -> float | None:
        return ridge_point(self.top, self.bandwidth) if self.bandwidth else None


def copy_gbps(entry: DeviceEntry) -> float | None:
    """The device's measured copy bandwidth: its measured memory slope (None: not measured)."""
    return entry.measured.memory_copy.gbps if entry.measured else None


def fma_tflops(entry: DeviceEntry) -> float | None:
    """A CPU's measured FMA ceiling, where it has one."""
    fma = entry.measured.fma if entry.measured else None
    return figures.fma_tflops(fma.gflops) if fma and fma.gflops else None


def cache_slopes(name: str, entry: DeviceEntry, rows: pd.DataFrame) -> list[Roof]:
    """A CPU's measured read bandwidth from each cache level and DRAM (its source the level), each
    a slope up to its measured FMA ceiling (its computed float32 peak where it has none)."""
    caches = entry.measured.caches if entry.measured else None
    if not caches:
        return []
    peaks = peak_roofs(name, entry, rows)
    computed = [peak for peak, dtypes in peaks.items() if "float32" in dtypes] or list(peaks)
    top = fma_tflops(entry) or max(computed, default=None)
    if not top:
        return []
    return [Roof(name, c.level, ["float32"], top, c.gbps) for c in caches if c.gbps]


# Where a cache slope's label sits: this far along the intensity axis from its left end. Slopes
# closer than CROWDED in bandwidth leave no room for a label between them: they share one.
SLOPE_LABEL_AT = 1.12
SLOPE_LABEL_GAP = 1.06  # ...and this far above or below it
CROWDED = 1.6


def draw_slopes(ax: Axes, slopes: list[Roof], fontsize: float, others: list[float], **line) -> None:
    """Cache slopes, dotted, each up to where it meets its ceiling; named along them, slopes
    closer than CROWDED sharing a label: above the fastest of them, or below the slowest where
    a faster line (another's, or one of `others`: the copy slope's bandwidth) is that close."""
    groups: list[list[Roof]] = []
    for r in sorted(slopes, key=lambda r: -(r.bandwidth or 0)):
        text = f"{r.device} {r.source} {r.bandwidth:.0f} GB/s"
        ax.plot(*zip(*r.vertices()[:2], strict=True), ls=":", label=text, **line)
        if groups and (groups[-1][-1].bandwidth or 0) / (r.bandwidth or 1) < CROWDED:
            groups[-1].append(r)
        else:
            groups.append([r])
    lines = [r.bandwidth or 0 for r in slopes] + others
    for group in groups:
        top, bottom = group[0], group[-1]
        above = [b for b in lines if b > (top.bandwidth or 0)]
        below = bool(above) and min(above) / (top.bandwidth or 1) < CROWDED
        r = bottom if below else top
        text = " / ".join(f"{g.source} {g.bandwidth:.0f}" for g in group)
        x = INTENSITY_RANGE[0] * SLOPE_LABEL_AT
        y = float(roof_tflops(x, r.top, r.bandwidth))
        y *= 1 / SLOPE_LABEL_GAP if below else SLOPE_LABEL_GAP
        ax.text(
            x,
            y,
            f"{r.device} {text} GB/s",
            rotation=math.degrees(math.atan2(y, x)),  # along y ∝ x in data: on screen, its slope
            transform_rotates_text=True,
            rotation_mode="anchor",
            ha="left",
            va="top" if below else "bottom",
            fontsize=fontsize,
            color=line["color"],
        )


def roofs(rows: pd.DataFrame, manifest: Manifest) -> list[Roof]:
    """Every device's datasheet roofs (per distinct peak) and measured ones (per dtype's best
    point, over the copy bandwidth), in config order."""
    ceilings = measured_ceilings(rows)
    out = []
    for name in drawn(rows, manifest):
        entry = manifest.devices[name]
        pending = entry.status != "measured"
        sheet_bw, copy_bw = entry.datasheet.memory_bandwidth_gbps, copy_gbps(entry)
        for peak, dtypes in peak_roofs(name, entry, rows).items():
            out.append(Roof(name, "datasheet", dtypes, peak, sheet_bw, pending))
        fma = fma_tflops(entry)
        if fma:
            out.append(Roof(name, "FMA", ["float32"], fma, copy_bw, pending))
        for (device, dtype), ceiling in ceilings.items():
            if device == name and copy_bw:
                out.append(Roof(name, "measured", [dtype], ceiling.tflops, copy_bw, pending))
    return out


def drawn(rows: pd.DataFrame, manifest: Manifest) -> list[str]:
    """The devices the plot draws, in config order: measured ones, and the pending ones whose
    conf shows them pending (the lab's)."""
    return [
        name
        for name in dict.fromkeys(rows.device)
        if manifest.devices[name].status == "measured" or manifest.devices[name].show_pending
    ]


def draw_roof(ax: Axes, r: Roof, style: str, **line) -> None:
    """A roof and its ridge marked."""
    ax.plot(*zip(*r.vertices(), strict=True), style, **line)
    if r.ridge is not None:
        ax.plot(
            [r.ridge], [r.top], "|", ms=14, mew=2, color=line["color"], alpha=line.get("alpha", 1.0)
        )


def palette(names: list[str]) -> dict[str, tuple]:
    """A colour per drawn device, in config order (cycling past the palette's length)."""
    colors = sns.color_palette("colorblind")
    return {name: colors[PALETTE_ORDER[i % len(PALETTE_ORDER)]] for i, name in enumerate(names)}


def line_style(color: tuple, pending: bool) -> dict:
    return {"color": color, "lw": 1.8 if pending else 2.4, "alpha": 0.45 if pending else 1.0}


def device_handle(name: str, entry: DeviceEntry, color: tuple) -> Line2D:
    """The legend line of a device: its name and memory slopes."""
    pending = entry.status != "measured"
    sheet_bw, copy_bw = entry.datasheet.memory_bandwidth_gbps, copy_gbps(entry)
    slopes = [f"datasheet {sheet_bw:g} GB/s"] if sheet_bw else []
    slopes += [f"measured {copy_bw:.0f} GB/s"] if copy_bw else []
    label = f"{name}{' (pending)' if pending else ''}: {', '.join(slopes) or 'no bandwidth known'}"
    return Line2D([], [], ls="-" if sheet_bw else ":", label=label, **line_style(color, pending))


# Roofs closer than this factor in height share one label (they would print over each other).
LABEL_SPACING = 1.15


def label_roofs(ax: Axes, labels: dict[float, list[tuple[str, tuple, float]]]) -> None:
    """Each named roof's label at its right end; roofs at about one height (H100 and H200; a
    CPU's computed peak and its FMA ceiling) share one, at the highest of them."""
    groups: list[tuple[float, list]] = []
    for height in sorted(labels):
        if groups and height / groups[-1][0] < LABEL_SPACING:
            groups[-1] = (height, groups[-1][1] + labels[height])
        else:
            groups.append((height, list(labels[height])))
    for height, texts in groups:
        colors = {color for _, color, _ in texts}
        text, color, alpha = (
            texts[0]
            if len(texts) == 1
            else (
                "; ".join(t for t, _, _ in texts),
                colors.pop() if len(colors) == 1 else "black",
                0.8,
            )
        )
        ax.annotate(
            text,
            (INTENSITY_RANGE[1], height),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=10,
            color=color,
            alpha=min(1.0, alpha + 0.3),
        )


def draw(rows: pd.DataFrame, manifest: Manifest | ManifestJson) -> Figure:
    """The unified roofline: every drawn device's roofs, and its lab kernel's points."""
    manifest = as_manifest(manifest)
    sns.set_theme(style="whitegrid", context="talk")
    colors = palette(drawn(rows, manifest))
    fig, ax = plt.subplots(figsize=(14, 8.5))
    labels: dict[float, list] = {}  # height -> [(text, colour, alpha)]
    for r in roofs(rows, manifest):
        line = line_style(colors[r.device], r.pending)
        draw_roof(ax, r, "-" if r.source == "datasheet" else ":", **line)
        if r.source != "measured":  # datasheet and FMA roofs are named at their right end
            what = "FMA ceiling" if r.source == "FMA" else "/".join(r.dtypes)
            text = f"{r.device} {what} {r.top:.3g}"
            labels.setdefault(r.top, []).append((text, line["color"], line["alpha"]))
    label_roofs(ax, labels)
    for name in drawn(rows, manifest):  # a CPU's caches: slopes alone, named along them
        slopes = cache_slopes(name, manifest.devices[name], rows)
        copy = [b for b in [copy_gbps(manifest.devices[name])] if b]
        draw_slopes(ax, slopes, 9, copy, **line_style(colors[name], False) | {"lw": 1.4})
    handles = [device_handle(n, manifest.devices[n], colors[n]) for n in drawn(rows, manifest)]
    lab = rows[(rows.status == "measured") & (rows.series == "lab")]
    for (name, dtype, backend), group in lab.groupby(["device", "dtype", "backend"], sort=False):
        ax.scatter(
            group.arithmetic_intensity,
            group.achieved_tflops,
            s=170,
            zorder=5,
            marker=DTYPES[dtype].marker,
            **point_style(backend, colors[name]),
        )
    several = lab.backend.nunique() > 1
    handles += [
        ax.scatter(
            [],
            [],
            s=120,
            marker=DTYPES[d].marker,
            label=f"measured {d}" + (f" ({b})" if several else ""),
            **point_style(b, "grey"),
        )
        for d, b in dict.fromkeys(zip(lab.dtype, lab.backend, strict=True))
    ]
    handles += [
        Line2D([], [], color="black", ls="-", lw=2, label="datasheet (CPU: computed) peak"),
        Line2D(
            [], [], color="black", ls=":", lw=2, label="measured ceilings (FMA, best shape, copy)"
        ),
    ]
    if any(cache_slopes(n, manifest.devices[n], rows) for n in drawn(rows, manifest)):
        handles.append(
            Line2D([], [], color="black", ls=":", lw=1.4, label="a CPU's read bandwidth per cache")
        )
    ax.set(**AXES, title="Dense matmul roofline, every device")
    plain_log_ticks(ax)
    ax.legend(handles=handles, fontsize=11, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


# Every row of the interactive roofline has every field (DVC's plots need one set of keys).
DATUM = ("kind", "device", "source", "line", "backend", "dtype", "series", "shape", "mfu")


def interactive(rows: pd.DataFrame, manifest: Manifest | ManifestJson) -> list[dict]:
    """The roofline as data for `dvc plots show` / `dvc plots diff` (template
    .dvc/plots/roofline.json): each roof's corners, and every measured point with what its
    tooltip shows."""
    manifest = as_manifest(manifest)
    data = []
    for r in roofs(rows, manifest):
        line = f"{r.device} {r.source} {'/'.join(r.dtypes)}"
        for x, y in r.vertices():
            datum = {"kind": "roof", "device": r.device, "source": r.source, "line": line}
            data.append(dict.fromkeys(DATUM) | datum | {"arithmetic_intensity": x, "tflops": y})
    for p in rows[(rows.status == "measured")].itertuples():
        datum = {
            "kind": "point",
            "device": p.device,
            "source": "measured",
            "backend": p.backend,
            "dtype": p.dtype,
            "series": p.series,
            "shape": f"{p.m}x{p.n}x{p.k}",
            "mfu": None if pd.isna(p.mfu) else p.mfu,
        }
        data.append(
            dict.fromkeys(DATUM)
            | datum
            | {"arithmetic_intensity": p.arithmetic_intensity, "tflops": p.achieved_tflops}
        )
    return data


def draw_sweeps(rows: pd.DataFrame, manifest: Manifest | ManifestJson) -> Figure:
    """One panel per measured device: its measured ceilings per dtype and every point, marked
    by series (lab, square, skinny, best-shape)."""
    manifest = as_manifest(manifest)
    sns.set_theme(style="whitegrid", context="notebook")
    measured = [n for n in dict.fromkeys(rows.device) if manifest.devices[n].status == "measured"]
    fig, axes = plt.subplots(
        1, max(1, len(measured)), figsize=(7 * max(1, len(measured)), 5.5), squeeze=False
    )
    if not measured:
        axes[0][0].text(0.5, 0.5, "no device measured yet", ha="center", va="center")
        return fig
    ceilings = measured_ceilings(rows)
    dtype_colors = dict(zip(DTYPES, sns.color_palette("colorblind"), strict=False))
    for ax, name in zip(axes[0], measured, strict=True):
        copy_bw = copy_gbps(manifest.devices[name])
        # The device's figures: a node's other GPUs are the report's spread, not points here.
        points = rows[(rows.device == name) & (rows.status == "measured")]
        points = points[~is_other_gpu(points.series)]
        for dtype, group in points.groupby("dtype", sort=False):
            color = dtype_colors.get(dtype, "grey")
            ceiling = Roof(name, "measured", [dtype], ceilings[(name, dtype)].tflops, copy_bw)
            draw_roof(ax, ceiling, ":", color=color, lw=2)
            for (series, backend), part in group.groupby(["series", "backend"], sort=False):
                ax.scatter(
                    part.arithmetic_intensity,
                    part.achieved_tflops,
                    s=60,
                    marker=SERIES_MARKERS.get(series, "o"),
                    zorder=5,
                    label=f"{dtype} {series}" + (f" ({backend})" if backend != "torch" else ""),
                    **point_style(backend, color),
                )
        ax.set(**AXES, title=f"{name}: measured ceilings ({copy_bw:.0f} GB/s copy)")
        plain_log_ticks(ax)
        ax.legend(fontsize=8, loc="lower right")
        # A CPU's caches, after the legend (named along them), in grey: colour is the dtype's here.
        slopes = cache_slopes(name, manifest.devices[name], rows)
        draw_slopes(ax, slopes, 7, [copy_bw] if copy_bw else [], color="dimgrey", lw=1.2)
    fig.tight_layout()
    return fig


def draw_knobs(knobs: pd.DataFrame) -> Figure:
    """One panel per device with measured knobs: each knob's gain (variant / baseline) as a bar
    on a log scale, the largest first; unturned by the lab kernel in a colour of their own."""
    sns.set_theme(style="whitegrid", context="notebook")
    measured = knobs[knobs.status == "measured"]
    devices = list(dict.fromkeys(measured.device))
    fig, axes = plt.subplots(
        1, max(1, len(devices)), figsize=(8 * max(1, len(devices)), 4.5), squeeze=False
    )
    if not devices:
        axes[0][0].text(
            0.5, 0.5, "no knob measured yet: uv run dvc exp run -S knobs=lab", ha="center"
        )
        axes[0][0].set_axis_off()
        return fig
    colors = sns.color_palette("colorblind")
    turned = {True: colors[0], False: colors[1], None: colors[7]}
    for ax, name in zip(axes[0], devices, strict=True):
        rows = measured[measured.device == name].sort_values("gain")
        labels = [knob_title(r.knob, r.baseline, r.variant) for r in rows.itertuples()]
        labels = [label.replace(": ", "\n", 1) for label in labels]
        ax.barh(labels, rows.gain, color=[turned[lab_turns(r)] for r in rows.itertuples()])
        for y, r in enumerate(rows.itertuples()):
            ax.annotate(
                f"{r.gain:.3g}x",
                (r.gain, y),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=9,
            )
        ax.axvline(1.0, color="black", lw=1)
        ax.set(xscale="log", xlabel="gain (variant / baseline TFLOP/s)", title=f"{name}: knobs")
        plain_log_ticks(ax)
    handles = [
        Line2D([], [], color=turned[True], lw=8, label="the lab kernel turns it"),
        Line2D([], [], color=turned[False], lw=8, label="left unturned by the lab kernel"),
        Line2D([], [], color=turned[None], lw=8, label="a measurement effect"),
    ]
    axes[0][-1].legend(handles=handles, fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def lab_turns(row: object) -> bool | None:
    """knobs.csv's lab_turns as read back (True, False, or empty)."""
    value = row.lab_turns
    return None if pd.isna(value) else bool(value)
