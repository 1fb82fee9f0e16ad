"""What each measured device's gap is, as numbers the pages put into words: its run, its
headline's breakdown from the dense peak down, the largest loss in it and whether that is a
measured cause, and what forced or clouded the run."""

import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.interpretation.breakdown import breakdown
from roofline.interpretation.ceilings import (
    headline,
    measured_ceilings,
    per_call_overheads,
    ran_tile,
    text_of,
    why,
)
from roofline.interpretation.manifest import (
    DeviceEntry,
    Manifest,
    MeasuredRun,
)
from roofline.interpretation.steps import GapShare, Step, StepId, gap_shares, kept


def run_of(entry: DeviceEntry) -> MeasuredRun:
    """A measured device's run (roofline.interpretation.manifest checked that a measured entry has
    one)."""
    if entry.measured is None:
        raise ValueError(f"{entry.sku} was not measured: it has no run to report")
    return entry.measured


def noisy(head: Any) -> str:
    """What says a row's timed window was noisy (roofline.interpretation.noise), or ""."""
    return head.noisy if isinstance(head.noisy, str) else ""  # an empty cell reads as NaN


def above_peak(head: Any) -> bool:
    """A figure above its dense peak: its MFU is left blank (roofline.interpretation.rows.row),
    never shown."""
    return pd.isna(head.mfu) and pd.notna(head.peak_tflops)


def same_point(rows: pd.DataFrame, head: Any) -> pd.DataFrame:
    """The measured rows of the headline's shape in its series: the device's figures, not a
    node's other GPUs' nor the sustained window's."""
    measured = rows[(rows.status == "measured") & (rows.series == head.series)]
    return measured[(measured.m == head.m) & (measured.n == head.n) & (measured.k == head.k)]


# Environment variables that force a library's kernel or instruction set: a run with one set
# did not measure what the library picks for this machine.
FORCING = (
    "OPENBLAS_CORETYPE",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
)


def device_breakdown(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, head: Any, knobs: pd.DataFrame | None
) -> list[Step]:
    """The device's headline from its dense peak down to the achieved figure, step by step."""
    run, sheet = run_of(entry), entry.datasheet
    plain_ghz = run.clock.measured_ghz if run.clock else None
    return breakdown(
        head,
        measured_ceilings(rows)[(name, head.dtype)],
        entry.kind,
        run.details.sm_count or sheet.sm_count,
        sheet.peak_clock_mhz,
        (run.fma, run.fma_clock, plain_ghz, run.steps),
        run.gpu_steps,
    )


def headline_breakdown(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, knobs: pd.DataFrame | None
) -> tuple[Any, list[Step]] | None:
    """A measured device's headline (of its lab rows) and its breakdown; None where it has no
    headline (not measured, or no lab row measured)."""
    if entry.status != "measured":
        return None
    head = headline(rows[rows.series == "lab"], entry.kind)
    if head is None:
        return None
    return head, device_breakdown(name, entry, rows, head, knobs)


# The steps whose loss is a measured cause (the Definition of Done's "concrete"): tile and wave
# quantisation is one only where its tile is the kernel's that ran (`measured_causes`), not
# while it is assumed; what the breakdown leaves ("what remains") names none.
MEASURED_CAUSES = {
    StepId.DATA_POWER,
    StepId.CLOCK,
    StepId.LAUNCH,
    StepId.FMA,
    StepId.THREADS,
    StepId.MICRO_KERNEL,
    StepId.PACKING,
    StepId.CEILING,
    StepId.GPU_BUSY,
    StepId.SMS_BUSY,
    StepId.TENSOR_ACTIVE,
}

# A paragraph is concrete where its named, measured steps explain at least this share of the gap.
CONCRETE = 2 / 3

# What the breakdown would measure next where every step has a number, by device kind.
BEYOND = {
    "cpu": "what inside the micro-kernel costs it (the FP instructions it retires per cycle, "
    "from the core's performance counters where the OS lets a process read them)",
    "cuda": "the kernel that ran (its tile, from torch's profiler), which the quantisation step "
    "assumes",
}

# ...and on a GPU whose quantisation step has the tile of the kernel that ran.
BEYOND_RAN = (
    "the kernel that ran against its SMs' tensor-core peak (its pipeline and occupancy, from a "
    "profile of the kernel)"
)


def measured_causes(head: Any, above: Step | None) -> set[StepId]:
    """The steps whose loss is a measured cause for this headline: quantisation too where its
    tile came from the kernel that ran; and what remains below the tensor pipes' active cycles,
    the kernel's issue efficiency, where the GPU's counters measured those."""
    below_tensor = above is not None and above.id is StepId.TENSOR_ACTIVE
    return (
        MEASURED_CAUSES
        | ({StepId.QUANTISATION} if ran_tile(head) else set())
        | ({StepId.ACHIEVED} if below_tensor else set())
    )


@dataclass(frozen=True)
class GapAccount:
    """A headline's gap, accounted for: its named losses (measured causes, largest share first),
    the share of the gap its named steps explain (gains counted against losses), the steps too
    noisy to tell, and what would measure the rest."""

    losses: list[GapShare]
    explained: float
    noisy: list[Step]
    measure_next: str
    shares: list[GapShare]  # every step's

    @property
    def concrete(self) -> bool:
        return self.explained >= CONCRETE

    @property
    def unexplained(self) -> float:
        return 1 - self.explained

    @property
    def too_noisy_share(self) -> float:
        """The share of the gap in steps too noisy to tell."""
        return sum(g.share for g in self.shares if g.step.too_noisy)


def room_for_losses(said: int, most: int = 5) -> int:
    """The sentences a paragraph of at most `most` has left for its losses, after the `said`
    ones before them and the next knob's."""
    return most - said - 1


def gap_account(
    name: str, entry: DeviceEntry, rows: pd.DataFrame, head: Any, knobs: pd.DataFrame | None
) -> GapAccount | None:
    """The headline's gap from the dense peak, shared among its measured steps; None where it
    has no peak, no gap, or a noisy window (no cause is read from its figures)."""
    if noisy(head) or pd.isna(head.peak_tflops):
        return None
    steps = device_breakdown(name, entry, rows, head, knobs)
    shares = gap_shares(steps)
    if not shares:
        return None
    numbered = [s for s in steps if s.tflops is not None]
    above_achieved = numbered[-2] if len(numbered) > 1 else None
    causes = measured_causes(head, above_achieved)
    named = [g for g in shares if g.step.id in causes and g.step.tflops is not None]
    unmeasured = [
        s for s in steps if s.factor is None and s.id is not StepId.PEAK and not s.refuted
    ]
    command = re.search(r"`[^`]+`", unmeasured[0].note) if unmeasured else None
    nxt = (
        unmeasured[0].label + (f" ({command.group()})" if command else "")
        if unmeasured
        else BEYOND_RAN
        if entry.kind == "cuda" and ran_tile(head)
        else BEYOND.get(entry.kind, "the kernel that ran")
    )
    return GapAccount(
        sorted((g for g in named if g.share > 0), key=lambda g: -g.share),
        sum(g.share for g in named),
        [s for s in steps if s.too_noisy],
        nxt,
        shares,
    )


def unread_counters(head: Any, entry: DeviceEntry) -> str:
    """Why the device's own counters, which would split the kernel's remaining loss, were not
    read: a GPU's refusals over its window, or a CPU run's perf_event_open refusal; "" where
    they were read, or never asked."""
    said = text_of(getattr(head, "counter_errors", ""))
    counters = run_of(entry).counters
    if not said and counters is not None and not counters.readable:
        said = counters.reason
    return said


def forced(entry: DeviceEntry) -> list[str]:
    """The FORCING variables the run had set, as NAME=value."""
    environment = run_of(entry).environment
    return [f"{name}={environment[name]}" for name in FORCING if name in environment]


@dataclass(frozen=True)
class BoundCheck:
    """The roofline's prediction against the measured points on one side of the ridge."""

    bound: str  # "compute" or "memory"
    points: int
    median_abs_error: float  # of measured / predicted - 1
    worst: Any  # the point with the largest |error|, as a row
    cause: str  # its likeliest cause (roofline.interpretation.ceilings.why)


def bound_checks(
    name: str, run: MeasuredRun, rows: pd.DataFrame, checked: pd.DataFrame, pred: pd.DataFrame
) -> list[BoundCheck]:
    """Each side of the ridge's `checked` predictions (those that define no ceiling, of all
    `pred`), with the worst point's likeliest cause."""
    details = run.details
    overheads, ceilings = per_call_overheads(pred), measured_ceilings(rows)
    out = []
    for bound, group in checked.groupby("bound", sort=True):
        worst = SimpleNamespace(**group.loc[group.error.abs().idxmax()].to_dict())
        cause = why(
            worst,
            details.cache_bytes or details.l2_bytes,
            overheads[worst.dtype],
            details.sm_count,
            ceilings[(name, worst.dtype)],
        )
        out.append(BoundCheck(str(bound), len(group), group.error.abs().median(), worst, cause))
    return out


def breakdown_table(rows: pd.DataFrame, manifest: Manifest, knobs: pd.DataFrame) -> pd.DataFrame:
    """Each measured device's headline breakdown as rows (breakdown.csv): its step, TFLOP/s, the
    share of the measured step above it kept, and the note; a step not measured has no number."""
    out = []
    for name, entry in manifest.devices.items():
        found = headline_breakdown(
            name, entry, rows[rows.device == name], knobs[knobs.device == name]
        )
        if found is None:
            continue
        head, steps = found
        shares = {id(g.step): g.share for g in gap_shares(steps)}
        out += [
            {
                "device": name,
                "dtype": head.dtype,
                "step": s.id.value,
                "label": s.label,
                "tflops": s.tflops,
                "share_of_above": kept(s.tflops, steps[:i]),
                "factor": s.factor,
                "spread": s.spread,
                "share_of_gap": shares.get(id(s)),
                "note": s.note,
            }
            for i, s in enumerate(steps)
        ]
    columns = [
        "device",
        "dtype",
        "step",
        "label",
        "tflops",
        "share_of_above",
        "factor",
        "spread",
        "share_of_gap",
        "note",
    ]
    return pd.DataFrame(out, columns=columns)
