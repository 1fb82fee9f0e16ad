"""The appendix's gap paragraph of a measured device: what its lab kernel reached and why, each
sentence from a measured number (the one page's shorter paragraph is roofline.rendering.report's)."""

from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.configuration.params import RENTED_KINDS
from roofline.core.dtypes import DTYPES
from roofline.core.measurement import DATA_POWER_KNOB
from roofline.device.cache_ceilings import binary_size
from roofline.interpretation import kernel_names
from roofline.interpretation.ceilings import (
    headline,
    text_of,
)
from roofline.interpretation.figures import (
    against_ridge,
    data_power_share,
    fma_shares,
    move_time,
    ratio,
)
from roofline.interpretation.gaps import (
    above_peak,
    forced,
    noisy,
    run_of,
    same_point,
)
from roofline.interpretation.manifest import (
    DeviceEntry,
)
from roofline.interpretation.rows import knob_title
from roofline.rendering.sentences import (
    datasheet_sentence,
    library,
    noisy_sentence,
    sides_telemetry,
    sustained_sentence,
    times,
)


def achieved_sentence(head: Any, entry: DeviceEntry) -> str:
    threads = f", {run_of(entry).threads} threads" if entry.kind == "cpu" else ""
    return (
        f"**{head.dtype} {head.m}×{head.n}×{head.k}** ran at **{head.achieved_tflops:.4g} "
        f"TFLOP/s** (median of {int(head.repeats)}, spread {head.spread:.1%}) through "
        f"{library(entry, head.backend, head.dtype)}{threads}."
    )


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
    move = move_time(head, gbps)
    moving = (
        f"moving its operands once at the measured copy bandwidth ({gbps:.1f} GB/s) "
        f"takes {move.seconds:.3g} s, {move.share:.1%} of the measured time"
    )
    if pd.isna(head.peak_tflops):
        return f"Its intensity is {head.arithmetic_intensity:.1f} FLOP/byte: {moving}."
    side = against_ridge(head.arithmetic_intensity, head.peak_tflops, gbps)
    return (
        f"Its intensity, {head.arithmetic_intensity:.1f} FLOP/byte, is "
        f"{times(side.times)} the ridge of the dense peak over the "
        f"measured copy bandwidth ({side.ridge:.1f} FLOP/byte), so it is {side.bound}-bound: "
        f"{moving}."
    )


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
        f"{r.achieved_tflops:.4g} TFLOP/s: the fastest is {times(ratio(head.achieved_tflops, r.achieved_tflops))} it."
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
            f"{ratio(r.achieved_tflops, head.achieved_tflops):.2f}× {head.dtype}{mfu}."
        )
    fastest = SimpleNamespace(**best.loc[best.achieved_tflops.idxmax()].to_dict())
    if fastest.achieved_tflops > head.achieved_tflops and not knobs_measured:
        out.append(
            f"The largest measured optimisation left on the table is the {fastest.dtype} path "
            f"({ratio(fastest.achieved_tflops, head.achieved_tflops):.2f}× the {head.dtype} "
            "kernel), at "
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
    computed = run.peaks_used.get("float32")  # the peak a float32 kernel is held to
    held_to = computed.tflops if computed and head.dtype == "float32" else None
    shares = fma_shares(head.achieved_tflops, fma.gflops, held_to, noisy(head))
    text = (
        f"The CPU's FMA ceiling, measured on every core at once ({fma.vector}), is "
        f"{shares.ceiling_tflops:.4g} TFLOP/s; the kernel reaches {shares.kernel_share:.0%} of it"
    )
    if shares.of_computed is not None:
        text += (
            f", and the ceiling is {shares.of_computed:.0%} of the computed peak"
            + {
                "low": ": the vector clock under load, or the FLOP per cycle assumed, is that much lower",
                "above": ": above it, so the computed peak's cores or FLOP per cycle are wrong for this CPU",
                "": "",
            }[shares.reading]
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


def memory_sentences(entry: DeviceEntry) -> list[str]:
    """What measured the memory slope, where the record says (a CPU's: STREAM's copy on every
    core at once, its triad beside it, or why torch's copy stands instead)."""
    copy = run_of(entry).memory_copy
    if not copy.how:
        return []
    triad = f"; STREAM's triad {copy.triad_gbps:.4g} GB/s" if copy.triad_gbps else ""
    return [f"The memory slope, {copy.gbps:.4g} GB/s, is {copy.how}{triad}."]


def telemetry_sentences(head: Any, entry: DeviceEntry) -> list[str]:
    """The timed window's clock, power and clock limits, each clause from its own reading."""
    if pd.isna(head.sm_clock_mhz):
        library = RENTED_KINDS.get(entry.kind)
        return (
            [f"No {library} telemetry was recorded, so the clock under load is unknown."]
            if library
            else []
        )
    assumed = entry.datasheet.peak_clock_mhz
    reasons = head.throttle_reasons if isinstance(head.throttle_reasons, str) else ""
    clauses = [
        f"During the timed window the SM clock averaged {head.sm_clock_mhz:.0f} MHz",
        f", {ratio(head.sm_clock_mhz, assumed):.0%} of the {assumed:.0f} MHz the datasheet peak "
        "assumes"
        if assumed
        else "",
        f" (NVML's maximum: {head.sm_clock_max_mhz:.0f} MHz)"
        if pd.notna(head.sm_clock_max_mhz) and head.sm_clock_max_mhz
        else "",
        f", memory clock {head.mem_clock_mhz:.0f} MHz" if pd.notna(head.mem_clock_mhz) else "",
        f", at {head.power_w:.0f} W ({head.joules_per_tflop:.2f} J per TFLOP)"
        if pd.notna(head.power_w)
        else "",
        f"; clock limits reported: {reasons.replace('+', ', ')}."
        if reasons
        else "; no clock limit was reported.",
    ]
    return ["".join(clauses)]


def forced_sentences(entry: DeviceEntry) -> list[str]:
    settings = forced(entry)
    if not settings:
        return []
    return [
        f"This run had {', '.join(settings)} set, which forces the library's kernel or instruction "
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
        *memory_sentences(entry),
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
        data_power_sentence(head, knobs) if knobs is not None else "",
    ]
    return " ".join(part for part in parts if part)


def data_power_sentence(head: Any, knobs: pd.DataFrame) -> str:
    """What the data's own power costs: the knob's constant inputs against its random ones, as
    a share of the gap to the dense peak, with each side's clock where it was read."""
    measured = knobs[(knobs.knob == DATA_POWER_KNOB) & (knobs.status == "measured")]
    if measured.empty or pd.isna(head.peak_tflops):
        return ""
    r = SimpleNamespace(**measured.iloc[0].to_dict())
    share = data_power_share(r.baseline_tflops, r.variant_tflops, head.peak_tflops)
    said = (
        f"The data's own power: constant inputs ran {r.gain:.3g}× the random ones at "
        f"{r.m}×{r.n}×{r.k} {r.dtype} ({r.baseline_tflops:.4g} → {r.variant_tflops:.4g} TFLOP/s"
        f"{sides_telemetry(r)})"
    )
    if share is None:
        return f"{said}."
    return f"{said}: {share:.0%} of the gap to the dense peak is the power random data draws."


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
