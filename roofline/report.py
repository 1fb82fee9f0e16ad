"""REPORT.md: the plot, the table, and a gap paragraph per device built from its numbers."""

import math
from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.arithmetic import matmul_bytes, ridge_point

HEADLINE_DTYPE = {"cpu": "float32", "cuda": "float16"}  # the lab's kernel on each kind
LAB_CAUSES = "no warm-up, no synchronisation, a wrong FLOP count, or throttled clocks"


def lab_checks(band: list[float] | None, done: float | None, row: Any) -> list[str]:
    """The lab's checks on its FP16 8192^3 figure: its sanity band (+-20%) and done threshold.
    `row` is a results row (mapping or object) for float16."""
    get = row.get if isinstance(row, dict) else lambda key: getattr(row, key)
    achieved, peak = get("achieved_tflops"), get("peak_tflops")
    checks = []
    if peak and achieved > peak:
        checks.append(f"INVALID: {achieved:.1f} TFLOP/s is above the dense peak {peak:g}")
    if band:
        low, high = band[0] * 0.8, band[1] * 1.2
        where = "inside" if low <= achieved <= high else "OUTSIDE"
        text = (
            f"float16 {achieved:.1f} TFLOP/s is {where} the lab's sanity band "
            f"{band[0]:g}-{band[1]:g} TFLOP/s +-20% ({low:.0f}-{high:.0f})"
        )
        if where == "OUTSIDE":
            text += f"; usual causes: {LAB_CAUSES}"
        checks.append(text)
    if done:
        met = "met" if achieved >= done else "NOT met"
        checks.append(f"the lab's done threshold, {done:g} TFLOP/s in float16: {met}")
    return checks


def _num(value: Any, fmt: str) -> str:
    return (
        ""
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, fmt)
    )


def table(rows: pd.DataFrame) -> str:
    lines = [
        "| device | dtype | M×N×K | status | TFLOP/s (median) | spread | MFU | GB/s | FLOP/byte |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows.itertuples():
        status = r.status if r.status == "measured" else f"{r.status}: {r.reason}"
        if isinstance(r.flag, str) and r.flag:
            status += f" ⚠ {r.flag}"
        lines.append(
            f"| {r.device} | {r.dtype} | {r.m}×{r.n}×{r.k} | {status} | "
            f"{_num(r.achieved_tflops, '.4g')} | {_num(r.spread, '.1%')} | {_num(r.mfu, '.1%')} | "
            f"{_num(r.achieved_bw_gbps, '.1f')} | {_num(r.arithmetic_intensity, '.1f')} |"
        )
    return "\n".join(lines)


def headline(rows: pd.DataFrame, kind: str) -> Any:
    """The device's lab row: its headline dtype at the largest measured shape."""
    measured = rows[(rows.status == "measured") & (rows.dtype == HEADLINE_DTYPE[kind])]
    if measured.empty:
        measured = rows[rows.status == "measured"]
    if measured.empty:
        return None
    largest = measured.assign(size=measured.m * measured.n * measured.k).sort_values("size")
    return SimpleNamespace(**largest.iloc[-1].to_dict())


def gap_paragraph(name: str, entry: dict[str, Any], rows: pd.DataFrame) -> str:
    head = headline(rows, entry["kind"])
    if head is None:
        return f"No kernel of {name} was measured: every row is skipped or failed (see the table)."
    versions, copy = entry["versions"], entry["memory_copy"]
    library = (
        f"torch {versions['torch']} with MKL {versions['mkl']} / oneDNN {versions['onednn']}, "
        f"{entry['threads']} threads"
        if entry["kind"] == "cpu"
        else f"torch {versions['torch']}, CUDA {versions['cuda']}, cuBLASLt "
        f"{entry.get('details', {}).get('cublaslt')}, driver {entry.get('details', {}).get('driver')}"
    )
    shape = f"{head.m}×{head.n}×{head.k}"
    parts = [
        f"**{head.dtype} {shape}** ran at **{head.achieved_tflops:.4g} TFLOP/s** "
        f"(median of {int(head.repeats)}, spread {head.spread:.1%}) on {library}."
    ]
    if pd.notna(head.mfu):
        parts.append(
            f"That is **MFU {head.mfu:.1%}** of the dense peak {head.peak_tflops:.4g} "
            f"TFLOP/s ({head.peak_source})."
        )
    ridge = ridge_point(head.peak_tflops, copy["gbps"]) if pd.notna(head.peak_tflops) else None
    move_s = matmul_bytes(head.m, head.n, head.k, head.dtype) / (copy["gbps"] * 1e9)
    if ridge:
        side = "compute" if head.arithmetic_intensity > ridge else "memory"
        parts.append(
            f"Its intensity, {head.arithmetic_intensity:.1f} FLOP/byte, is "
            f"{head.arithmetic_intensity / ridge:.2g}× the ridge at the measured copy bandwidth "
            f"({copy['gbps']:.1f} GB/s, ridge {ridge:.1f} FLOP/byte), so it is {side}-bound: "
            f"moving its operands once at that rate takes {move_s:.3g} s, "
            f"{move_s / head.median_s:.1%} of the measured time."
        )
    others = rows[
        (rows.status == "measured")
        & (rows.dtype != head.dtype)
        & (rows.m == head.m)
        & (rows.n == head.n)
        & (rows.k == head.k)
    ]
    for r in others.itertuples():
        mfu = (
            f" (MFU {r.mfu:.1%} of its {r.peak_tflops:.4g} TFLOP/s peak)" if pd.notna(r.mfu) else ""
        )
        parts.append(
            f"On the same shape {r.dtype} reached {r.achieved_tflops:.4g} TFLOP/s, "
            f"{r.achieved_tflops / head.achieved_tflops:.2f}× {head.dtype}{mfu}."
        )
    if not others.empty:
        best = SimpleNamespace(**others.loc[others.achieved_tflops.idxmax()].to_dict())
        if best.achieved_tflops > head.achieved_tflops:
            parts.append(
                f"The largest measured optimisation left on the table is the {best.dtype} path "
                f"({best.achieved_tflops / head.achieved_tflops:.2f}× the {head.dtype} kernel), at "
                f"the cost of {best.dtype}'s precision."
            )
    if pd.notna(head.sm_clock_mhz):
        text = f"During the timed window the SM clock averaged {head.sm_clock_mhz:.0f} MHz"
        if pd.notna(head.sm_clock_max_mhz) and head.sm_clock_max_mhz:
            text += (
                f" against a maximum of {head.sm_clock_max_mhz:.0f} "
                f"({head.sm_clock_mhz / head.sm_clock_max_mhz:.0%})"
            )
        text += f", at {head.power_w:.0f} W ({head.joules_per_tflop:.2f} J per TFLOP)"
        reasons = head.throttle_reasons if isinstance(head.throttle_reasons, str) else ""
        text += (
            f"; clock limits reported: {reasons.replace('+', ', ')}."
            if reasons
            else "; no clock limit was reported."
        )
        parts.append(text)
    elif entry["kind"] == "cuda":
        parts.append("No NVML telemetry was recorded, so the clock under load is unknown.")
    lab = entry.get("lab", {})
    if entry["kind"] == "cuda" and head.dtype == "float16":
        parts += [
            f"Lab check: {c}."
            for c in lab_checks(
                lab.get("band_tflops", {}).get("float16"),
                lab.get("done_tflops", {}).get("float16"),
                vars(head),
            )
        ]
    if entry["kind"] == "cpu":
        parts.append(
            "Not measured here, and so not claimed: how far the AVX-512 clock under load sits below "
            "the all-core clock the peak assumes, and how many cycles MKL spends packing panels "
            "and on block edges."
        )
    skipped = rows[rows.status.isin(["skipped", "failed"])]
    for r in skipped.itertuples():
        parts.append(f"{r.dtype} {r.status}: {r.reason}.")
    return " ".join(parts)


def pending_paragraph(name: str, entry: dict[str, Any]) -> str:
    sheet = entry["datasheet"]
    peaks = (
        ", ".join(f"{d} {p:g}" for d, p in sheet["peak_tflops"].items()) or "computed when measured"
    )
    text = f"Never measured; the plot shows its datasheet roofline only (dense TFLOP/s: {peaks}"
    if sheet["memory_bandwidth_gbps"]:
        text += f"; {sheet['memory_bandwidth_gbps']:g} GB/s"
        fp16 = sheet["peak_tflops"].get("float16")
        if fp16:
            text += (
                f"; float16 ridge {ridge_point(fp16, sheet['memory_bandwidth_gbps']):.0f} FLOP/byte"
            )
    return (
        text
        + "). To measure it, on a machine with this device, from a clone of this repository:\n\n"
        "```sh\nuv run dvc pull --allow-missing && uv run dvc repro && uv run dvc push\n"
        f"git add experiments/x4-roofline/devices/{name}/dvc.lock && git commit -m 'measure {name}'\n```"
    )


def render(rows: pd.DataFrame, manifest: dict[str, Any]) -> str:
    order = list(dict.fromkeys(rows.device))
    out = [
        "# Roofline report: dense matmul on every device",
        "",
        "The lab's kernel, C = A·B with M = N = K = 8192: float16 on GPUs, float32 through the "
        "BLAS on a CPU. FLOPs = 2·M·N·K; bytes = (M·K + K·N + M·N)·itemsize, the ideal-cache "
        "lower bound; MFU = achieved / dense datasheet peak of the same dtype. Each device's "
        "numbers come from its own `experiments/x4-roofline/devices/<name>/results.json`, "
        "with every timing sample; versions, seeds and costs are in `manifest.json`.",
        "",
        "![roofline](roofline.png)",
        "",
        table(rows),
        "",
        "## Gaps to peak",
    ]
    for name in order:
        entry = manifest["devices"][name]
        if entry["status"] == "measured":
            cost = entry["run_cost_usd"]
            cost_text = "no cost per hour set" if cost is None else f"run cost ${cost:.4f}"
            title = (
                f"### {name}: {entry['hardware'].get('model') or entry['hardware'].get('name')}"
                f" (measured {entry['measured_at']} at {entry['git_revision'] or 'no git revision'},"
                f" {entry['wall_s']:.0f} s, {cost_text})"
            )
            body = gap_paragraph(name, entry, rows[rows.device == name])
        else:
            title, body = f"### {name}: {entry['sku']} (pending)", pending_paragraph(name, entry)
        out += ["", title, "", body]
    return "\n".join(out) + "\n"
