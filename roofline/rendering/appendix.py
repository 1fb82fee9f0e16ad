"""REPORT-appendix.md: everything the one page leaves out: every row, each device's whole
story (gap paragraph, breakdown, cost, roofline check, knob ladder), each point against the
roofline's prediction."""

from typing import Any

import pandas as pd

from roofline.interpretation.ceilings import SUSTAINED, predictions
from roofline.interpretation.figures import per_dollar_hour
from roofline.interpretation.gaps import (
    bound_checks,
    headline_breakdown,
    run_of,
)
from roofline.interpretation.manifest import (
    DeviceEntry,
    Manifest,
    ManifestJson,
    as_manifest,
)
from roofline.interpretation.roofs import ridge_point
from roofline.interpretation.rows import KNOB_COLUMNS, knob_title
from roofline.interpretation.steps import Step, gap_shares
from roofline.rendering.gap_paragraph import gap_paragraph
from roofline.rendering.sentences import (
    cell,
    sides_telemetry,
)


def table(rows: pd.DataFrame) -> str:
    lines = [
        "| device | dtype | backend | M×N×K | status | TFLOP/s (median) | spread | MFU | GB/s | FLOP/byte |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    pending = rows[rows.status == "pending"]
    for r in rows[rows.status != "pending"].itertuples():
        status = r.status if r.status == "measured" else f"{r.status}: {r.reason}"
        if isinstance(r.flag, str) and r.flag:
            status += f" ⚠ {r.flag}"
        lines.append(
            f"| {r.device} | {r.dtype} | {r.backend} | {r.m}×{r.n}×{r.k} | {status} | "
            f"{cell(r.achieved_tflops, '.4g')} | {cell(r.spread, '.1%')} | {cell(r.mfu, '.1%')} | "
            f"{cell(r.achieved_bw_gbps, '.1f')} | {cell(r.arithmetic_intensity, '.1f')} |"
        )
    for (device, m, n, k), group in pending.groupby(["device", "m", "n", "k"], sort=False):
        lines.append(
            f"| {device} | {', '.join(dict.fromkeys(group.dtype))} | "
            f"{', '.join(dict.fromkeys(group.backend))} | {m}×{n}×{k} | pending (see below) "
            "|  |  |  |  |  |"
        )
    return "\n".join(lines)


def pending_paragraph(name: str, entry: DeviceEntry) -> str:
    sheet = entry.datasheet
    peaks = (
        ", ".join(f"{d} {p:g}" for d, p in sheet.peak_tflops.items()) or "computed when measured"
    )
    text = f"Never measured; the plot shows its datasheet roofline only (dense TFLOP/s: {peaks}"
    bandwidth = sheet.memory_bandwidth_gbps
    if bandwidth:
        text += f"; {bandwidth:g} GB/s"
        fp16 = sheet.peak_tflops.get("float16")  # the lab kernel's dtype on a GPU
        if fp16:
            text += f"; float16 ridge {ridge_point(fp16, bandwidth):.0f} FLOP/byte"
    return (
        text
        + "). To measure it, on a machine with this device, from a clone of this repository:\n\n"
        "```sh\nuv run dvc pull --allow-missing && uv run dvc repro && uv run dvc push\n"
        f"git add experiments/x4-roofline/devices/{name}/dvc.lock && git commit -m 'measure {name}'\n```"
    )


def breakdown_lines(steps: list[Step]) -> list[str]:
    shares = {id(g.step): g.share for g in gap_shares(steps)}
    lines = [
        "Gap breakdown, from the dense peak down to the achieved figure (each step's share of "
        "the gap is the log of what it keeps over the log of achieved / peak, so the shares "
        "add up to 100%):",
        "",
    ]
    for step in steps:
        share = f" ({shares[id(step)]:.1%} of the gap)" if id(step) in shares else ""
        if step.tflops is None:
            lines.append(f"- {step.label}: {step.note}{share}")
        else:
            lines.append(f"- {step.label}: **{step.tflops:.4g} TFLOP/s**; {step.note}{share}")
    return lines


def cost_line(entry: DeviceEntry, head: Any) -> str:
    price, run = entry.cost_per_hour_usd, run_of(entry)
    if price is None:
        text = "Cost: no cost per hour is set for this device"
    elif price == 0:
        text = f"Cost: own machine, no hourly price; the run took {run.wall_s:.0f} s"
    else:
        text = (
            f"Cost: the run took {run.wall_s:.0f} s at ${price:g}/h, "
            f"${run.run_cost_usd:.4f}; {per_dollar_hour(head.achieved_tflops, price):.4g} TFLOP/s "
            "per dollar-hour"
        )
    if pd.notna(getattr(head, "joules_per_tflop", float("nan"))):
        text += f"; {head.joules_per_tflop:.3g} J per TFLOP at {head.power_w:.0f} W (NVML)"
    return text + "."


SWEEP_HINT = (
    "`uv run dvc exp run -S sweep=short` (a few minutes) or `-S sweep=full` measures shapes on "
    "both sides of the ridge"
)


def prediction_line(name: str, entry: DeviceEntry, rows: pd.DataFrame) -> str:
    """The roofline's prediction from the measured ceilings against every measured point but
    those that define a ceiling, summarised per side of the ridge, with the likeliest cause of
    the worst error on each."""
    run = run_of(entry)
    pred = predictions(rows, {name: run.memory_copy.gbps})
    if pred.empty:
        return ""
    checked = pred[~pred.defines_ceiling]
    if checked.empty:
        return (
            "Roofline check: nothing to check yet. Each dtype's only measured point is its own "
            "compute ceiling, so the roofline would predict it exactly, by construction; "
            f"{SWEEP_HINT} to check the roofline against."
        )
    parts = [
        f"{c.points} {c.bound}-bound point{'s' if c.points > 1 else ''}, median |error| "
        f"{c.median_abs_error:.1%}, worst {c.worst.error:+.0%} at {c.worst.dtype} "
        f"{c.worst.m}×{c.worst.n}×{c.worst.k} ({c.worst.series}, {c.worst.backend}): {c.cause}"
        for c in bound_checks(name, run, rows, checked, pred)
    ]
    return (
        "Roofline check, predicted time = max(FLOPs / measured ceiling of the dtype, bytes / "
        "measured copy bandwidth) against the measured time, over every point but each "
        "dtype's best (which defines its ceiling): " + "; ".join(parts) + ". Every point is in "
        "the appendix."
    )


def knob_lines(knobs: pd.DataFrame) -> list[str]:
    """A device's knobs as a ladder, the largest measured gain first, each with its spreads."""
    if knobs.empty:
        return []
    measured = knobs[knobs.status == "measured"].sort_values("gain", ascending=False)
    turned = {True: "the lab kernel turns it", False: "left unturned by the lab kernel"}
    lines = [
        "Knobs, both sides measured in one run, interleaved, after the same float64 check "
        "(gain = variant / baseline TFLOP/s):",
        "",
    ]
    for r in measured.itertuples():
        note = turned.get(
            None if pd.isna(r.lab_turns) else bool(r.lab_turns), "a measurement effect"
        )
        at = f"{r.m}×{r.n}×{r.k}"
        if isinstance(r.variant_mnk, str) and r.variant_mnk:  # the variant's own shape
            at += f" and {r.variant_mnk.replace('x', '×')}"
        lines.append(
            f"- {knob_title(r.knob, r.baseline, r.variant)}: **{r.gain:.3g}×** "
            f"({r.baseline_tflops:.4g} → {r.variant_tflops:.4g} TFLOP/s at {at} "
            f"{r.dtype}; spreads {r.baseline_spread:.0%} and {r.variant_spread:.0%}"
            f"{sides_telemetry(r)}); {note}"
        )
    lines += [
        f"- {r.knob}: {r.status}: {r.reason}"
        for r in knobs[knobs.status != "measured"].itertuples()
    ]
    return lines


def device_section(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, knobs: pd.DataFrame | None = None
) -> list[str]:
    if entry.status != "measured":
        return [f"### {name}: {entry.sku} (pending)", "", pending_paragraph(name, entry)]
    lab, run = rows[rows.series == "lab"], run_of(entry)
    measured = run.hardware.model or run.hardware.name
    title = (
        f"### {name}: {entry.sku} ({'' if measured == entry.sku else measured + '; '}"
        f"measured {run.measured_at} at {run.git_revision or 'no git revision'})"
    )
    knobs = knobs if knobs is not None else pd.DataFrame(columns=KNOB_COLUMNS)
    out = [title, "", gap_paragraph(name, entry, lab, knobs, rows[rows.series == SUSTAINED])]
    found = headline_breakdown(name, entry, rows, knobs)
    if found is None:
        return out
    head, steps = found
    out += ["", *breakdown_lines(steps), "", cost_line(entry, head)]
    check = prediction_line(name, entry, rows)
    out += ["", check] if check else []
    ladder = knob_lines(knobs)
    return out + (["", *ladder] if ladder else [])


def header(rows: pd.DataFrame, sweep: str) -> list[str]:
    """What the figures mean, and every lab row."""
    return [
        "# Appendix: how each figure was measured, and every point",
        "",
        "FLOPs = 2·M·N·K; bytes = (M·K + K·N)·input size + M·N·output size, the ideal-cache "
        "lower bound. Solid lines in the plot: datasheet (CPU: computed) peaks and bandwidths; "
        "dotted: measured ceilings (a CPU's FMA ceiling; the best TFLOP/s measured per dtype, "
        + (
            "which with no sweep is the lab kernel itself; "
            if sweep == "none"
            else f"over the lab kernel and the {sweep} sweep; "
        )
        + "the copy bandwidth). Every sample, version, seed and cost is in "
        "`devices/<name>/*.json` and `manifest.json`.",
        "",
        table(rows[rows.series == "lab"]),
    ]


def prediction_section(name: str, entry: DeviceEntry, rows: pd.DataFrame) -> list[str]:
    """A measured device's points against the roofline's prediction, then its rows not measured."""
    pred = predictions(rows, {name: run_of(entry).memory_copy.gbps})
    out = [
        f"### {name}",
        "",
        "| series | dtype | M×N×K | FLOP/byte | TFLOP/s | measured s | predicted s | error | bound |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in pred.itertuples():
        error = "defines it" if r.defines_ceiling else f"{r.error:+.0%}"
        out.append(
            f"| {r.series} | {r.dtype} | {r.m}×{r.n}×{r.k} | {r.arithmetic_intensity:.1f} | "
            f"{r.achieved_tflops:.4g} | {r.median_s:.3g} | {r.predicted_s:.3g} | "
            f"{error} | {r.bound} |"
        )
    skipped = rows[rows.status != "measured"]
    out += [""] if not skipped.empty else []
    return out + [
        f"- {r.series} {r.dtype} {r.m}×{r.n}×{r.k}: {r.status}: {r.reason}"
        for r in skipped.itertuples()
    ]


def appendix(
    rows: pd.DataFrame, manifest: Manifest | ManifestJson, knobs: pd.DataFrame | None = None
) -> str:
    """Everything the page leaves out: every row, each device's whole story (gap, breakdown,
    cost, roofline check, knob ladder), each point against the roofline's prediction."""
    manifest = as_manifest(manifest)
    knobs = knobs if knobs is not None else pd.DataFrame(columns=KNOB_COLUMNS)
    names = list(dict.fromkeys(rows.device))
    out = [*header(rows, manifest.sweep), "", "## Each device"]
    for name in names:
        entry, own = manifest.devices[name], knobs[knobs.device == name]
        out += ["", *device_section(name, entry, rows[rows.device == name], own)]
    if manifest.knobs != "none":
        out += ["", "## Knobs", "", "The ladders above, drawn (gain on a log scale):", ""]
        out += ["![knobs](knobs.png)"]
    out += [
        "",
        "## Every measured point against the roofline's prediction",
        "",
        f"Sweep: {manifest.sweep}. Predicted time = max(FLOPs / measured ceiling of the dtype, "
        "bytes / measured copy bandwidth); error = measured / predicted - 1. Each dtype's best "
        "point defines its ceiling, so its prediction is exact by construction: its error reads "
        '"defines it".',
        "",
        "![sweeps](roofline-sweeps.png)",
    ]
    for name in names:
        entry = manifest.devices[name]
        if entry.status == "measured":
            out += ["", *prediction_section(name, entry, rows[rows.device == name])]
    return "\n".join(out) + "\n"
