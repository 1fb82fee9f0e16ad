"""REPORT.md, one page: the plot, one table, the lab's Definition of Done, a short gap paragraph
per device built from its numbers; REPORT-appendix.md: everything else."""

import itertools
import math
import re
from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.configuration.params import RENTED_KINDS
from roofline.core.arithmetic import matmul_bytes
from roofline.core.dtypes import DTYPES, LAB_DTYPE
from roofline.core.schema import THREADS_KNOB
from roofline.device.backends import label
from roofline.device.peakflops import binary_size
from roofline.interpretation import kernel_names
from roofline.interpretation.ceilings import (
    SUSTAINED,
    Step,
    StepId,
    Threading,
    breakdown,
    clock_cause,
    headline,
    lab_headline,
    measured_ceilings,
    per_call_overheads,
    predictions,
    ran_tile,
    text_of,
    why,
)
from roofline.interpretation.interpret import (
    PUBLISHED_CAUSES,
    PUBLISHED_MARGIN,
    best_shape_figures,
    judge,
    published_figure,
)
from roofline.interpretation.manifest import (
    DeviceEntry,
    Manifest,
    ManifestJson,
    MeasuredRun,
    as_manifest,
)
from roofline.interpretation.node import NodeSpread, node_spread
from roofline.interpretation.roofs import ridge_point
from roofline.interpretation.rows import KNOB_COLUMNS, knob_title


def times(ratio: float) -> str:
    """A ratio with two significant figures (3.1, 120), never in exponent form, and the sign."""
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.2g}×"


def _num(value: Any, fmt: str) -> str:
    return (
        ""
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, fmt)
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
            f"{_num(r.achieved_tflops, '.4g')} | {_num(r.spread, '.1%')} | {_num(r.mfu, '.1%')} | "
            f"{_num(r.achieved_bw_gbps, '.1f')} | {_num(r.arithmetic_intensity, '.1f')} |"
        )
    for (device, m, n, k), group in pending.groupby(["device", "m", "n", "k"], sort=False):
        lines.append(
            f"| {device} | {', '.join(dict.fromkeys(group.dtype))} | "
            f"{', '.join(dict.fromkeys(group.backend))} | {m}×{n}×{k} | pending (see below) "
            "|  |  |  |  |  |"
        )
    return "\n".join(lines)


def run_of(entry: DeviceEntry) -> MeasuredRun:
    """A measured device's run (roofline.interpretation.manifest checked that a measured entry has
    one)."""
    if entry.measured is None:
        raise ValueError(f"{entry.sku} was not measured: it has no run to report")
    return entry.measured


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


def achieved_sentence(head: Any, entry: DeviceEntry) -> str:
    threads = f", {run_of(entry).threads} threads" if entry.kind == "cpu" else ""
    return (
        f"**{head.dtype} {head.m}×{head.n}×{head.k}** ran at **{head.achieved_tflops:.4g} "
        f"TFLOP/s** (median of {int(head.repeats)}, spread {head.spread:.1%}) through "
        f"{library(entry, head.backend, head.dtype)}{threads}."
    )


def above_peak(head: Any) -> bool:
    """A figure above its dense peak: its MFU is left blank (roofline.interpretation.rows.row),
    never shown."""
    return pd.isna(head.mfu) and pd.notna(head.peak_tflops)


def mfu_sentence(head: Any) -> str:
    if above_peak(head):
        return (
            f"It has no MFU: {head.achieved_tflops:.4g} TFLOP/s is above the dense peak "
            f"{head.peak_tflops:.4g} TFLOP/s ({head.peak_source}), a bug to find, not a result."
        )
    if pd.isna(head.mfu):
        return f"It has no MFU: {head.peak_source}."
    return (
        f"That is **MFU {head.mfu:.1%}** of the dense peak {head.peak_tflops:.4g} TFLOP/s "
        f"({head.peak_source})."
    )


def intensity_sentence(head: Any, entry: DeviceEntry) -> str:
    gbps = run_of(entry).memory_copy.gbps
    move_s = matmul_bytes(head.m, head.n, head.k, head.dtype) / (gbps * 1e9)
    moving = (
        f"moving its operands once at the measured copy bandwidth ({gbps:.1f} GB/s) "
        f"takes {move_s:.3g} s, {move_s / head.median_s:.1%} of the measured time"
    )
    if pd.isna(head.peak_tflops):
        return f"Its intensity is {head.arithmetic_intensity:.1f} FLOP/byte: {moving}."
    ridge = ridge_point(head.peak_tflops, gbps)
    side = "compute" if head.arithmetic_intensity > ridge else "memory"
    return (
        f"Its intensity, {head.arithmetic_intensity:.1f} FLOP/byte, is "
        f"{times(head.arithmetic_intensity / ridge)} the ridge of the dense peak over the "
        f"measured copy bandwidth ({ridge:.1f} FLOP/byte), so it is {side}-bound: {moving}."
    )


def same_point(rows: pd.DataFrame, head: Any) -> pd.DataFrame:
    """The measured rows of the headline's shape in its series: the device's figures, not a
    node's other GPUs' nor the sustained window's."""
    measured = rows[(rows.status == "measured") & (rows.series == head.series)]
    return measured[(measured.m == head.m) & (measured.n == head.n) & (measured.k == head.k)]


def kernel_sentence(head: Any) -> str:
    """The kernel that ran for the headline, as its library named it, and what its name says
    (roofline.interpretation.kernel_names); "" where none was recorded."""
    name = text_of(getattr(head, "kernel", ""))
    if not name:
        return ""
    info = kernel_names.parse(name)
    said = info.summary() if info.library is None else ""  # a CPU's line says it itself
    return f"The kernel that ran: {name}" + (f" ({said})." if said else ".")


def backend_sentences(head: Any, entry: DeviceEntry, rows: pd.DataFrame) -> list[str]:
    """The kernel that ran, and the other libraries on the same kernel: which BLAS is fastest
    is this machine's fact."""
    same = same_point(rows, head)
    others = same[(same.dtype == head.dtype) & (same.backend != head.backend)]
    out = [kernel_sentence(head)] + [
        f"Through {library(entry, r.backend, r.dtype)} the same kernel ran at "
        f"{r.achieved_tflops:.4g} TFLOP/s: the fastest is {times(head.achieved_tflops / r.achieved_tflops)} it."
        for r in others.itertuples()
    ]
    amd = (run_of(entry).details.microarchitecture or "").startswith("zen")
    torch_row = others[others.backend == "torch"]
    if amd and head.dtype == "float32" and not torch_row.empty:
        out.append(
            "torch's float32 goes through MKL, which takes a slower path on CPUs not made by "
            "Intel (pytorch/builder#504): on this AMD CPU, the knob is the library."
        )
    return out


def dtype_sentences(head: Any, rows: pd.DataFrame, knobs_measured: bool = False) -> list[str]:
    """The other dtypes on the same shape, each through its fastest library; and the fastest
    of them as the optimisation left, unless the knobs measured what is left."""
    same = same_point(rows, head)
    others = same[same.dtype != head.dtype]
    if others.empty:
        return []
    best = others.loc[others.groupby("dtype", sort=False).achieved_tflops.idxmax()]
    out = []
    for r in best.itertuples():
        mfu = (
            f" (MFU {r.mfu:.1%} of its {r.peak_tflops:.4g} TFLOP/s peak)" if pd.notna(r.mfu) else ""
        )
        if DTYPES[r.dtype].scaled:  # the fast-accumulation knob measures the other way
            mfu += ", with exact accumulation" if mfu else " with exact accumulation"
        out.append(
            f"On the same shape {r.dtype} reached {r.achieved_tflops:.4g} TFLOP/s, "
            f"{r.achieved_tflops / head.achieved_tflops:.2f}× {head.dtype}{mfu}."
        )
    fastest = SimpleNamespace(**best.loc[best.achieved_tflops.idxmax()].to_dict())
    if fastest.achieved_tflops > head.achieved_tflops and not knobs_measured:
        out.append(
            f"The largest measured optimisation left on the table is the {fastest.dtype} path "
            f"({fastest.achieved_tflops / head.achieved_tflops:.2f}× the {head.dtype} kernel), at "
            f"the cost of {fastest.dtype}'s precision."
        )
    return out


def fma_sentences(head: Any, entry: DeviceEntry) -> list[str]:
    """A CPU's own compute ceiling: its FMA throughput on every core, against the computed peak."""
    run = run_of(entry)
    fma = run.fma
    if not fma:
        return []
    if fma.gflops is None:
        return [
            f"This CPU's FMA ceiling was {fma.reason}, so nothing here bounds the BLAS but the computed peak."
        ]
    ceiling = fma.gflops / 1e3
    text = (
        f"The CPU's FMA ceiling, measured on every core at once ({fma.vector}), is "
        f"{ceiling:.4g} TFLOP/s; the kernel reaches {head.achieved_tflops / ceiling:.0%} of it"
    )
    computed = run.peaks_used.get("float32")  # the peak a float32 kernel is held to
    if computed and computed.tflops and head.dtype == "float32":
        share = ceiling / computed.tflops
        text += (
            f", and the ceiling is {share:.0%} of the computed peak"
            + (
                ": the vector clock under load, or the FLOP per cycle assumed, is that much lower"
                if share < 0.95 and not noisy(head)  # a shared machine lowers both as well
                else ""
            )
            + (
                ": above it, so the computed peak's cores or FLOP per cycle are wrong for this CPU"
                if share > 1.05
                else ""
            )
        )
    return [text + "."]


def cache_sentences(entry: DeviceEntry) -> list[str]:
    """A CPU's read bandwidth from each cache level and DRAM, with each core's working set."""
    caches = run_of(entry).caches
    if not caches:
        return []
    said = [
        f"{c.level} {c.gbps:.4g} GB/s ({binary_size(c.working_set_bytes or 0)})"
        if c.gbps is not None
        else f"{c.level} {c.reason}"
        for c in caches
    ]
    return [
        "Read bandwidth, every core at once, each over a working set of its own (its size per "
        f"core): {'; '.join(said)}."
    ]


def noisy(head: Any) -> str:
    """What says a row's timed window was noisy (roofline.interpretation.noise), or ""."""
    return head.noisy if isinstance(head.noisy, str) else ""  # an empty cell reads as NaN


def noisy_sentence(head: Any) -> str:
    """A headline timed in a noisy window: said with its figures, in place of a cause."""
    if not noisy(head):
        return ""
    return (
        f"Its timed window was noisy ({noisy(head)}): re-measure on a quiet machine; no cause "
        "is read from these figures."
    )


def telemetry_sentences(head: Any, entry: DeviceEntry) -> list[str]:
    if pd.notna(head.sm_clock_mhz):
        text = f"During the timed window the SM clock averaged {head.sm_clock_mhz:.0f} MHz"
        assumed = entry.datasheet.peak_clock_mhz
        if assumed:
            text += (
                f", {head.sm_clock_mhz / assumed:.0%} of the {assumed:.0f} MHz the datasheet peak "
                "assumes"
            )
        if pd.notna(head.sm_clock_max_mhz) and head.sm_clock_max_mhz:
            text += f" (NVML's maximum: {head.sm_clock_max_mhz:.0f} MHz)"
        if pd.notna(head.power_w):
            text += f", at {head.power_w:.0f} W ({head.joules_per_tflop:.2f} J per TFLOP)"
        reasons = head.throttle_reasons if isinstance(head.throttle_reasons, str) else ""
        text += (
            f"; clock limits reported: {reasons.replace('+', ', ')}."
            if reasons
            else "; no clock limit was reported."
        )
        return [text]
    if entry.kind in RENTED_KINDS:
        library = RENTED_KINDS[entry.kind]
        return [f"No {library} telemetry was recorded, so the clock under load is unknown."]
    return []


# Environment variables that force a library's kernel or instruction set: a run with one set
# did not measure what the library picks for this machine.
FORCING = (
    "OPENBLAS_CORETYPE",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
)


def forced_sentences(entry: DeviceEntry) -> list[str]:
    environment = run_of(entry).environment
    forced = [f"{name}={environment[name]}" for name in FORCING if name in environment]
    if not forced:
        return []
    return [
        f"This run had {', '.join(forced)} set, which forces the library's kernel or instruction "
        "set: it measured that, not what the library picks for this CPU."
    ]


def gap_paragraph(
    name: str,
    entry: DeviceEntry,
    rows: pd.DataFrame,
    knobs: pd.DataFrame | None = None,
    sustained: pd.DataFrame | None = None,
) -> str:
    """What the device's lab kernel reached and why, each sentence from a measured number; with
    knobs measured, the largest one it leaves unturned; with its `sustained` rows, the headline
    over the long window beside its burst."""
    head = headline(rows, entry.kind)
    if head is None:
        return f"No kernel of {name} was measured: every row is skipped or failed (see the table)."
    parts = [
        achieved_sentence(head, entry),
        noisy_sentence(head),
        mfu_sentence(head),
        intensity_sentence(head, entry),
        *backend_sentences(head, entry, rows),
        *dtype_sentences(head, rows, knobs is not None and (knobs.status == "measured").any()),
        *fma_sentences(head, entry),
        *cache_sentences(entry),
        *telemetry_sentences(head, entry),
        sustained_sentence(entry, rows, sustained),
        datasheet_sentence(entry),
        *[f"Lab check: {c}." for c in run_of(entry).lab_checks],
        *forced_sentences(entry),
        *[
            f"{r.dtype} ({r.backend}) {r.status}: {r.reason}."
            for r in rows[rows.status.isin(["skipped", "failed"])].itertuples()
        ],
        unturned_sentence(knobs) if knobs is not None else "",
    ]
    return " ".join(part for part in parts if part)


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


def threading(entry: DeviceEntry, knobs: pd.DataFrame | None) -> Threading | None:
    """A CPU's threading as its knobs measured it (THREADS_KNOB), or None where they did not."""
    run = run_of(entry)
    if knobs is None or entry.kind != "cpu" or not run.threads:
        return None
    measured = knobs[(knobs.knob == THREADS_KNOB) & (knobs.status == "measured")]
    if measured.empty:
        return None
    knob = measured.iloc[0]
    shape = (int(knob.m), int(knob.n), int(knob.k))
    return Threading(float(knob.gain), run.threads, shape, float(knob.baseline_tflops))


def device_breakdown(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, head: Any, knobs: pd.DataFrame | None
) -> list[Step]:
    """The device's headline from its dense peak down to the achieved figure, step by step."""
    run, sheet = run_of(entry), entry.datasheet
    return breakdown(
        head,
        measured_ceilings(rows)[(name, head.dtype)],
        entry.kind,
        run.details.sm_count or sheet.sm_count,
        run.fma,
        sheet.peak_clock_mhz,
        threading(entry, knobs),
    )


def breakdown_lines(steps: list[Step]) -> list[str]:
    lines = ["Gap breakdown, from the dense peak down to the achieved figure:", ""]
    for step in steps:
        if step.tflops is None:
            lines.append(f"- {step.label}: {step.note}")
        else:
            lines.append(f"- {step.label}: **{step.tflops:.4g} TFLOP/s**; {step.note}")
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
            f"${run.run_cost_usd:.4f}; {head.achieved_tflops / price:.4g} TFLOP/s per dollar-hour"
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
    details = run.details
    overheads, ceilings = per_call_overheads(pred), measured_ceilings(rows)
    parts = []
    for bound, group in checked.groupby("bound", sort=True):
        worst = SimpleNamespace(**group.loc[group.error.abs().idxmax()].to_dict())
        cause = why(
            worst,
            details.cache_bytes or details.l2_bytes,
            overheads[worst.dtype],
            details.sm_count,
            ceilings[(name, worst.dtype)],
        )
        parts.append(
            f"{len(group)} {bound}-bound point{'s' if len(group) > 1 else ''}, median |error| "
            f"{group.error.abs().median():.1%}, "
            f"worst {worst.error:+.0%} at {worst.dtype} {worst.m}×{worst.n}×{worst.k} "
            f"({worst.series}, {worst.backend}): {cause}"
        )
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
        lines.append(
            f"- {knob_title(r.knob, r.baseline, r.variant)}: **{r.gain:.3g}×** "
            f"({r.baseline_tflops:.4g} → {r.variant_tflops:.4g} TFLOP/s at {r.m}×{r.n}×{r.k} "
            f"{r.dtype}; spreads {r.baseline_spread:.0%} and {r.variant_spread:.0%}); {note}"
        )
    lines += [
        f"- {r.knob}: {r.status}: {r.reason}"
        for r in knobs[knobs.status != "measured"].itertuples()
    ]
    return lines


def unturned_sentence(knobs: pd.DataFrame) -> str:
    """The largest measured knob that the lab kernel leaves unturned."""
    left = knobs[(knobs.status == "measured") & (knobs.lab_turns.astype(str) == "False")]
    if left.empty:
        return ""
    best = SimpleNamespace(**left.loc[left.gain.idxmax()].to_dict())
    return (
        "The largest knob this kernel leaves unturned, measured: "
        f"{knob_title(best.knob, best.baseline, best.variant)}, {best.gain:.3g}× at "
        f"{best.m}×{best.n}×{best.k}."
    )


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
    head = headline(lab, entry.kind)
    if head is None:
        return out
    steps = device_breakdown(name, entry, rows, head, knobs)
    out += ["", *breakdown_lines(steps), "", cost_line(entry, head)]
    check = prediction_line(name, entry, rows)
    out += ["", check] if check else []
    ladder = knob_lines(knobs)
    return out + (["", *ladder] if ladder else [])


def shown(rows: pd.DataFrame, manifest: Manifest) -> tuple[list[str], list[str]]:
    """(devices the report shows, devices not measured yet that it only names): a device not
    measured yet gets its line only if its conf shows it pending (the lab's own)."""
    shown, named = [], []
    for name in dict.fromkeys([*rows.device, *manifest.devices]):  # config order; the lost last
        entry = manifest.devices[name]
        visible = entry.status == "measured" or entry.show_pending
        (shown if visible else named).append(name)
    return shown, named


def verdict_cell(entry: DeviceEntry, head: Any) -> str:
    if head is None:
        return "nothing measured" if entry.status == "measured" else entry.status
    judged = judge(entry, head)[1]
    written_for = entry.lab.written_for
    band = judged.band or (
        f"no band for this SKU (the lab's is {written_for}'s)" if written_for else "no band"
    )
    flags = [*judged.flags, *(["noisy window: re-measure"] if noisy(head) else [])]
    return "; ".join([band, *(f"⚠ {flag}" for flag in flags)])


def summary_table(rows: pd.DataFrame, manifest: Manifest, devices: list[str]) -> str:
    """One line per device: its lab kernel's figures beside the lab's band and what others
    published for the SKU, and the verdict."""
    lines = [
        "| device | SKU | dtype | TFLOP/s | MFU | GB/s | FLOP/byte | lab's band | published | verdict |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for name in devices:
        entry = manifest.devices[name]
        head = lab_headline(rows, name, entry)
        dtype = head.dtype if head is not None else LAB_DTYPE[entry.kind]
        band = entry.lab.band_tflops.get(dtype)
        shape = SimpleNamespace(dtype=dtype, m=8192, n=8192, k=8192) if head is None else head
        figure = published_figure(entry.datasheet.published, shape)
        cells = [name, entry.sku, dtype]
        if head is None:
            cells += ["", "", "", ""]
        else:
            cells += [
                f"{head.achieved_tflops:.4g}",
                _num(head.mfu, ".1%"),
                f"{head.achieved_bw_gbps:.1f}",
                f"{head.arithmetic_intensity:.0f}",
            ]
        cells += [
            f"{band[0]:g}-{band[1]:g} ±20%" if band else "",
            f"{figure.tflops:g}" if figure else "",
            verdict_cell(entry, head),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def definition_of_done(
    rows: pd.DataFrame, manifest: Manifest, concrete: dict[str, bool], plotted: bool
) -> list[str]:
    """The lab's Definition of Done, each item with what was measured."""
    lab = [n for n in manifest.lab_devices if n in manifest.devices]
    measured = [n for n in lab if manifest.devices[n].status == "measured"]
    pending = [n for n in lab if n not in measured]
    items = [
        (
            not pending,
            f"The lab's {len(lab)} devices measured ({', '.join(lab)}): "
            + (f"{', '.join(measured)} measured" if measured else "none measured")
            + (f"; {', '.join(pending)} pending" if pending else ""),
        )
    ]
    for name in lab:
        entry = manifest.devices[name]
        line = entry.lab.line
        for dtype, done in (line.lab_done_tflops if line else {}).items():
            wanted = f"{name} {dtype} ≥ {done:g} TFLOP/s"
            head = lab_headline(rows, name, entry)
            if head is None or head.dtype != dtype:
                items.append((False, f"{wanted}: pending"))
            elif entry.lab.written_for:
                items.append(
                    (
                        False,
                        f"{wanted} (written for the {line.sku}): {head.achieved_tflops:.4g} "
                        f"measured on another SKU, the {entry.sku}",
                    )
                )
            else:
                met = head.achieved_tflops >= done
                items.append((met, f"{wanted}: {head.achieved_tflops:.4g} measured"))
    items.append(
        (
            plotted,
            "The roofline plot is in the artifacts and above"
            if plotted
            else "The roofline plot: not drawn yet (the plot stage writes roofline.png)",
        )
    )
    shown = [n for n in concrete if manifest.devices[n].status == "measured"]
    vague = [n for n in shown if not concrete[n]]
    items.append(
        (
            bool(shown) and not vague,
            "A concrete gap paragraph per measured device, naming its measured cause and the "
            f"next knob: {len(shown) - len(vague)} of {len(shown)}"
            + (f" ({', '.join(vague)}: its paragraph says what to measure next)" if vague else ""),
        )
    )
    return [f"- [{'x' if ok else ' '}] {text}." for ok, text in items]


def largest_loss(steps: list[Step]) -> tuple[Step, Step] | None:
    """(the step with the largest measured drop, the step above it), of a breakdown."""
    measured = [s for s in steps if s.tflops]
    pairs = list(itertools.pairwise(measured))
    if not pairs:
        return None
    above, below = min(pairs, key=lambda pair: pair[1].tflops / pair[0].tflops)
    return below, above


# A breakdown's steps (roofline.interpretation.ceilings.breakdown), as a loss, and as what a step
# leaves.
LOSS = {
    StepId.CLOCK: "the SM clock under load",
    StepId.FMA: "the cores' own FMA throughput",
    StepId.THREADS: "threading across the cores",
    StepId.ONE_CORE: "the kernel on one core",
    StepId.CEILING: "the shape",
    StepId.QUANTISATION: "tile and wave quantisation",
}
LEFT = {
    StepId.PEAK: "of the dense peak",
    StepId.CLOCK: "the SM clock under load leaves",
    StepId.FMA: "the cores' FMA throughput allows",
    StepId.THREADS: "threading across the cores leaves",
    StepId.ONE_CORE: "the kernel on one core reaches",
    StepId.CEILING: "the best shape measured reaches",
    StepId.QUANTISATION: "that tile and wave quantisation leave",
}


# The steps whose loss is a measured cause (the Definition of Done's "concrete"): tile and wave
# quantisation is one only where its tile is the kernel's that ran (`measured_causes`), not
# while it is assumed; what the breakdown leaves ("the kernel itself") names none.
MEASURED_CAUSES = {StepId.CLOCK, StepId.FMA, StepId.THREADS, StepId.CEILING}
# What the breakdown would measure next where every step has a number, by device kind.
BEYOND = {
    "cpu": "what inside the kernel on one core costs it (its blocking, packing and loads: "
    "for instance the same product with its operands already packed), which the breakdown "
    "does not split yet",
    "cuda": "the kernel that ran (its tile, from torch's profiler), which the quantisation step "
    "assumes",
}
# ...and on a GPU whose quantisation step has the tile of the kernel that ran.
BEYOND_RAN = (
    "the kernel that ran against its SMs' tensor-core peak (its pipeline and occupancy, from a "
    "profile of the kernel), which the breakdown does not split yet"
)


def measured_causes(head: Any) -> set[StepId]:
    """The steps whose loss is a measured cause for this headline: quantisation too where its
    tile came from the kernel that ran."""
    return MEASURED_CAUSES | ({StepId.QUANTISATION} if ran_tile(head) else set())


def cause_sentence(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, head: Any, knobs: pd.DataFrame | None
) -> tuple[str, bool]:
    """The largest loss the breakdown measured, from the peak down to the achieved figure, and
    whether it is a measured cause; where it is not, what to measure next. For a headline timed
    in a noisy window, that it was, instead of a cause."""
    if noisy(head):
        return noisy_sentence(head), False
    if pd.isna(head.peak_tflops):
        return "", False
    steps = device_breakdown(name, entry, rows, head, knobs)
    found = largest_loss(steps)
    if found is None:
        return "", False
    below, above = found
    share = below.tflops / above.tflops
    if below.id in measured_causes(head):
        note = below.note.split(":")[0] if below.id is StepId.FMA else below.note
        return (
            f"Its largest measured loss is {LOSS[below.id]} ({note}): {share:.0%} of the "
            "step above.",
            True,
        )
    unmeasured = [s for s in steps if s.tflops is None and s.id is not StepId.PEAK]
    command = re.search(r"`[^`]+`", unmeasured[0].note) if unmeasured else None
    nxt = (
        unmeasured[0].label + (f" ({command.group()})" if command else "")
        if unmeasured
        else BEYOND_RAN
        if entry.kind == "cuda" and ran_tile(head)
        else BEYOND.get(entry.kind, "the kernel that ran")
    )
    if below.id is StepId.ACHIEVED:
        said = (
            "Its largest loss is in the kernel itself, past what the breakdown measures: it "
            f"reaches {share:.0%} of the {above.tflops:.4g} TFLOP/s {LEFT[above.id]}"
        )
    else:
        said = f"Its largest loss is {LOSS[below.id]} ({below.note}): {share:.0%} of the step above"
    return f"{said}; no measured cause yet; measure next: {nxt}.", False


def knob_sentence(head: Any, rows: pd.DataFrame, knobs: pd.DataFrame) -> str:
    """The next knob: the largest measured one the kernel leaves unturned, else the fastest
    other dtype on the same shape."""
    left = knobs[(knobs.status == "measured") & (knobs.lab_turns.astype(str) == "False")]
    if not left.empty:
        best = SimpleNamespace(**left.loc[left.gain.idxmax()].to_dict())
        return (
            f"Next knob: {knob_title(best.knob, best.baseline, best.variant)}, measured "
            f"{best.gain:.3g}× at {best.m}×{best.n}×{best.k}."
        )
    same = same_point(rows, head)
    others = same[(same.dtype != head.dtype) & (same.achieved_tflops > head.achieved_tflops)]
    if not others.empty:
        best = SimpleNamespace(**others.loc[others.achieved_tflops.idxmax()].to_dict())
        return (
            f"Next knob: {best.dtype}, measured {best.achieved_tflops / head.achieved_tflops:.2f}× "
            f"{head.dtype} on the same shape, at the cost of {best.dtype}'s precision."
        )
    return (
        "Next knob: not measured yet; `uv run dvc exp run -S knobs=lab` measures the lab's "
        "knobs as gains."
    )


# A published figure's window (roofline.interpretation.lab_schema.WINDOWS) in a reader's words.
def best_shape_sentence(entry: DeviceEntry, head: Any) -> str:
    """Figures published at their source's best shape for this dtype (a vendor's "max
    achievable"), beside the headline as such: a different shape, so never a verdict on it."""
    figures = best_shape_figures(entry.datasheet.published, head.dtype)
    return " ".join(
        f"Published at its source's best shape, {'×'.join(map(str, f.shape))} (not "
        f"{head.m}×{head.n}×{head.k}): {f.tflops:g} TFLOP/s {head.dtype}, "
        f"{WINDOW_WORDS[f.window]} ({f.source}); this run's {head.m}×{head.n}×{head.k} is "
        f"{head.achieved_tflops / f.tflops:.0%} of it, shown for scale, not judged against it."
        for f in figures
    )


WINDOW_WORDS = {
    "burst": "a burst",
    "sustained": "sustained",
    "": "its window not stated",
}


def spread_words(spread: NodeSpread) -> str:
    (slow, slow_tflops), (fast, fast_tflops) = spread.slowest, spread.fastest
    return (
        f"the slowest, GPU {slow}, ran {slow_tflops:.4g} TFLOP/s, {spread.spread:.1%} below the "
        f"fastest (GPU {fast}, {fast_tflops:.4g})"
    )


def node_sentence(rows: pd.DataFrame, head: SimpleNamespace) -> str:
    """Where the node's GPUs were measured at once: which GPU the figure is, the slowest and
    the spread (mamf-finder's advice: take the slowest GPU of a node seriously). "" where one
    GPU was measured."""
    spread = node_spread(rows, head)
    if spread is None:
        return ""
    return f"The median of its {spread.gpus} GPUs, measured at once (GPU {spread.median[0]}); " + (
        f"{spread_words(spread)}."
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
    seconds = s.window_s if pd.notna(s.window_s) else s.median_s * s.repeats
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
        change = s.achieved_tflops / burst.achieved_tflops - 1
        window = f"{burst.window_s:.2g} s " if pd.notna(burst.window_s) else ""
        if pd.notna(burst.window_s) and seconds <= burst.window_s:
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
            f"({figure.source}), which this is {s.achieved_tflops / figure.tflops:.0%} of"
        )
    return text + "."


def summary_paragraph(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, knobs: pd.DataFrame
) -> tuple[str, bool]:
    """3 to 5 sentences: what it reached, beside what others published; its largest measured
    loss; the next knob; where its datasheet falls short. And whether it named a cause and a
    knob (the Definition of Done's "concrete")."""
    head = lab_headline(rows, name, entry)
    if head is None:
        return (
            f"**{name}**: nothing was measured; every row is skipped or failed (appendix).",
            False,
        )
    mfu = (
        f", MFU {head.mfu:.1%} of the dense {head.peak_tflops:.4g}"
        if pd.notna(head.mfu)
        else f"; **no MFU: above its dense peak {head.peak_tflops:.4g}**, a bug, not a result"
        if above_peak(head)
        else "; no MFU, no datasheet peak"
    )
    sentences = [
        f"**{name}** ({entry.sku}) ran {head.dtype} {head.m}×{head.n}×{head.k} at "
        f"**{head.achieved_tflops:.4g} TFLOP/s**{mfu}."
    ]
    if node := node_sentence(rows[rows.device == name], head):
        sentences.append(node)
    figure = judge(entry, head)[0]
    if figure:
        text = (
            f"Published for this SKU: {figure.tflops:g} TFLOP/s, {WINDOW_WORDS[figure.window]} "
            f"({figure.source}); this run's burst is {head.achieved_tflops / figure.tflops:.0%} "
            "of it"
        )
        below = head.achieved_tflops < (1 - PUBLISHED_MARGIN) * figure.tflops
        sentences.append(text + (f": check {PUBLISHED_CAUSES}." if below else "."))
    if best := best_shape_sentence(entry, head):
        sentences.append(best)
    if sustained := sustained_sentence(entry, rows[rows.device == name]):
        sentences.append(sustained)
    cause, attributed = cause_sentence(name, entry, rows, head, knobs)
    knob = knob_sentence(head, rows[rows.device == name], knobs)
    sentences += [
        s for s in (cause, knob, datasheet_sentence(entry), older_sentence(name, entry)) if s
    ]
    return " ".join(sentences), attributed and not knob.startswith("Next knob: not measured")


def remeasure(name: str, entry: DeviceEntry) -> str:
    how = "`uv run dvc repro` on a machine that has it"
    if entry.kind in RENTED_KINDS:
        how += f", or `uv run --group cloud python -m roofline.cloud {name}`"
    return how


def older_sentence(name: str, entry: DeviceEntry) -> str:
    """A device measured by older measuring code or params than today's: its numbers are that
    code's, never claimed as today's; each stage with the revision and time that measured it."""
    older = entry.measured.measured_by_older if entry.measured else None
    if not older:
        return ""
    what = sorted({part for stage in older.values() for part in stage.older})
    runs: dict[tuple, list[str]] = {}
    for stage in ("benchmark", "sweep", "knobs"):
        if stage in older:
            revision = older[stage].git_revision or "unknown"
            short = revision[:12] + ("+dirty" if revision.endswith("+dirty") else "")
            runs.setdefault((short, older[stage].measured_at), []).append(stage)
    said = "; ".join(
        f"{', '.join(stages)} at revision {rev}, {when or 'unknown'}"
        for (rev, when), stages in runs.items()
    )
    return (
        f"⚠ Measured by older measuring {' and '.join(what)} ({said}): these are that code's "
        f"numbers; to re-measure, {remeasure(name, entry)}."
    )


def pending_line(name: str, entry: DeviceEntry) -> str:
    how = remeasure(name, entry)
    if entry.status == "lost":
        return (
            f"- **{name}** ({entry.sku}): ⚠ lost: its results were in neither the workspace, "
            f"DVC's cache nor the remote (a push that failed), and were recorded as lost; to "
            f"measure it afresh, {how}."
        )
    return f"- **{name}** ({entry.sku}): pending; {how}."


def render(
    rows: pd.DataFrame,
    manifest: Manifest | ManifestJson,
    knobs: pd.DataFrame | None = None,
    plotted: bool = True,
) -> str:
    """REPORT.md: one page. The plot, one table, the lab's Definition of Done, a paragraph per
    measured device and a line per pending one; everything else is in the appendix."""
    manifest = as_manifest(manifest)
    devices, unmeasured = shown(rows, manifest)
    knobs = knobs if knobs is not None else pd.DataFrame(columns=KNOB_COLUMNS)
    paragraphs = {
        name: summary_paragraph(name, manifest.devices[name], rows, knobs[knobs.device == name])
        for name in devices
        if manifest.devices[name].status == "measured"
    }
    out = [
        "# Roofline report: dense matmul, FP16 8192³ on GPUs (FP32 on a CPU)",
        "",
        "C = A·B, FLOPs = 2·M·N·K, bytes = each operand moved once; MFU = achieved / the dense "
        "datasheet peak of the SKU measured (a CPU's: computed). The lab's band allows ±20%; "
        "a run more than 10% below a published figure for its SKU is flagged. How each figure "
        "was measured, every gap's breakdown and each point's prediction: "
        "[the appendix](REPORT-appendix.md).",
        "",
        "![roofline](roofline.png)",
        "",
        summary_table(rows, manifest, devices),
        "",
        "## Definition of Done",
        "",
        *definition_of_done(rows, manifest, {n: ok for n, (_, ok) in paragraphs.items()}, plotted),
        "",
        "## The gaps",
    ]
    for name in devices:
        entry = manifest.devices[name]
        out += ["", paragraphs[name][0] if name in paragraphs else pending_line(name, entry)]
    if unmeasured:
        listed = ", ".join(f"{n} ({manifest.devices[n].sku})" for n in unmeasured)
        out += ["", f"Not measured, and shown once a machine that has them runs: {listed}."]
    return "\n".join(out) + "\n"


def appendix(
    rows: pd.DataFrame, manifest: Manifest | ManifestJson, knobs: pd.DataFrame | None = None
) -> str:
    """Everything the page leaves out: every row, each device's whole story (gap, breakdown,
    cost, roofline check, knob ladder), each point against the roofline's prediction."""
    manifest = as_manifest(manifest)
    sweep = manifest.sweep
    knobs = knobs if knobs is not None else pd.DataFrame(columns=KNOB_COLUMNS)
    out = [
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
        "",
        "## Each device",
    ]
    for name in dict.fromkeys(rows.device):
        entry, own = manifest.devices[name], knobs[knobs.device == name]
        out += ["", *device_section(name, entry, rows[rows.device == name], own)]
    if manifest.knobs != "none":
        out += ["", "## Knobs", "", "The ladders above, drawn (gain on a log scale):", ""]
        out += ["![knobs](knobs.png)"]
    out += [
        "",
        "## Every measured point against the roofline's prediction",
        "",
        f"Sweep: {sweep}. Predicted time = max(FLOPs / measured ceiling of the dtype, bytes / "
        "measured copy bandwidth); error = measured / predicted - 1. Each dtype's best point "
        "defines its ceiling, so its prediction is exact by construction: its error reads "
        '"defines it".',
        "",
        "![sweeps](roofline-sweeps.png)",
    ]
    for name in dict.fromkeys(rows.device):
        entry = manifest.devices[name]
        if entry.status != "measured":
            continue
        pred = predictions(rows[rows.device == name], {name: run_of(entry).memory_copy.gbps})
        out += [
            "",
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
        skipped = rows[(rows.device == name) & (rows.status != "measured")]
        out += [""] if not skipped.empty else []
        out += [
            f"- {r.series} {r.dtype} {r.m}×{r.n}×{r.k}: {r.status}: {r.reason}"
            for r in skipped.itertuples()
        ]
    return "\n".join(out) + "\n"
