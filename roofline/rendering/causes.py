"""The one page's cause sentences: a headline's largest measured losses in the field's words,
each with its share of the gap, what the measured steps leave unexplained, or the noise that
kept them from splitting it (roofline.interpretation.gaps accounts for the gap)."""

from typing import Any

import pandas as pd

from roofline.interpretation.gaps import (
    device_breakdown,
    gap_account,
    noisy,
    unread_counters,
)
from roofline.interpretation.manifest import DeviceEntry
from roofline.interpretation.steps import GapShare, Step, StepId, x
from roofline.rendering.sentences import noisy_sentence

# A breakdown's steps (roofline.interpretation.breakdown), as a loss, and as what a step
# leaves. A counter's step is named by its counter alone (its note's share is the sentence's).
COUNTER_STEPS = (StepId.GPU_BUSY, StepId.SMS_BUSY, StepId.TENSOR_ACTIVE)
LOSS = {
    StepId.DATA_POWER: "the data's power",
    StepId.CLOCK: "the SM clock under load",
    StepId.LAUNCH: "launching the calls one by one",
    StepId.FMA: "the cores' own FMA throughput",
    StepId.THREADS: "threading across the cores",
    StepId.MICRO_KERNEL: "the library's micro-kernel on one core",
    StepId.PACKING: "packing the operands and moving them through the caches",
    StepId.CEILING: "the shape",
    StepId.QUANTISATION: "tile and wave quantisation",
    StepId.GPU_BUSY: "the GPU idle in the window (launch gaps and syncs)",
    StepId.SMS_BUSY: "SMs left without work",
    StepId.TENSOR_ACTIVE: "the tensor pipes idle in the busy SMs' cycles",
    StepId.ACHIEVED: "the kernel's issue efficiency",
}

LEFT = {
    StepId.PEAK: "of the dense peak",
    StepId.DATA_POWER: "the data's power leaves",
    StepId.CLOCK: "the SM clock under load leaves",
    StepId.LAUNCH: "launching the calls one by one leaves",
    StepId.FMA: "the cores' FMA throughput allows",
    StepId.THREADS: "threading across the cores leaves",
    StepId.MICRO_KERNEL: "the micro-kernel on one core reaches",
    StepId.PACKING: "packing and memory leave",
    StepId.CEILING: "the best shape measured reaches",
    StepId.QUANTISATION: "that tile and wave quantisation leave",
    StepId.GPU_BUSY: "the GPU's busy time leaves",
    StepId.SMS_BUSY: "the SMs given work leave",
    StepId.TENSOR_ACTIVE: "the tensor pipes' active cycles allow at full rate",
}


# What a device's own counters would count of the kernel's remaining loss, where it is not a
# GPU's (whose counters' refusals name the metrics).
COUNTED = {"cpu": " (its FP instructions per cycle)"}


def pct(share: float) -> str:
    """A share of the gap in words: never "0%" for a loss that is one, never past "all"."""
    return "all" if share >= 0.995 else "under 1%" if share < 0.005 else f"{share:.0%}"


def loss_sentence(loss: GapShare, entry: DeviceEntry) -> str:
    """One named loss in the field's words, with its share of the gap."""
    found, of_gap = loss.step, f"{pct(loss.share)} of the gap"
    sides = entry.measured.steps if entry.measured else None
    if entry.kind == "cpu" and found.id is StepId.CLOCK:
        return f"{found.note[0].upper()}{found.note[1:]}: {of_gap}."
    if found.id is StepId.FMA:
        under = entry.measured and entry.measured.fma_clock and entry.measured.fma_clock.ghz
        at = "the dense peak at their clock under load" if under else "the dense peak"
        return (
            f"The cores' FMA ceiling is {found.factor:.0%} of {at} (the FMA units are not fed "
            f"every cycle): {of_gap}."
        )
    if found.id is StepId.THREADS and sides:
        slower = entry.measured.details.slower_cores if entry.measured else None
        part = f" (part of it: its {slower} are slower cores)" if slower else ""
        return (
            f"On {sides.threads} threads {sides.backend} reaches {found.factor:.0%} of "
            f"{sides.threads}x its one-thread rate at {x(sides.shape)}: threading costs "
            f"{of_gap}{part}."
        )
    if found.id is StepId.MICRO_KERNEL and sides:  # a kernel forced is said on its own
        return (
            f"On one core, its operands in L2, {sides.backend} reaches {found.factor:.0%} "
            f"of the core's FMA rate: its micro-kernel costs {of_gap}."
        )
    if found.id is StepId.PACKING and sides:
        return (
            f"At {x(sides.shape)} one thread keeps {found.factor:.0%} of its rate in L2: "
            f"packing the operands and moving them through the caches cost {of_gap}."
        )
    gpu = entry.measured.gpu_steps if entry.measured else None
    if found.id is StepId.DATA_POWER and gpu and gpu.clock_of("constant"):
        random, constant = (gpu.figures_of(side) for side in ("random", "constant"))
        return (
            f"The SMs ran at {random} on random inputs and {constant} on constant ones, whose "
            f"bits never toggle: the data's power costs {of_gap}."
        )
    if found.id is StepId.LAUNCH and gpu:
        return (
            f"Launched one by one, the calls reach {found.factor:.0%} of their rate replayed "
            f"from a CUDA graph: launch overhead costs {of_gap}."
        )
    if found.id is StepId.ACHIEVED:  # below the tensor pipes' active cycles
        return (
            f"{LOSS[found.id][0].upper()}{LOSS[found.id][1:]} costs {of_gap}: the kernel "
            f"reaches {found.factor:.0%} of what {LEFT[StepId.TENSOR_ACTIVE]}."
        )
    note = found.note.split(":")[0] if found.id in COUNTER_STEPS else found.note.split(";")[0]
    return f"{LOSS[found.id][0].upper()}{LOSS[found.id][1:]} ({note}) costs {of_gap}."


def unpeaked_sentence(steps: list[Step], entry: DeviceEntry) -> str:
    """A CPU with no dense peak (Accelerate on Apple's matrix units): its gap is not shared
    out, but its measured steps are said, each as what it keeps; "" where none was measured."""
    sides = entry.measured.steps if entry.measured else None
    by_id = {s.id: s for s in steps if s.factor is not None and not s.too_noisy}
    if not sides:
        return ""
    said = []
    if (threads := by_id.get(StepId.THREADS)) and sides.threads > 1:
        said.append(
            f"{sides.threads} threads reach {threads.factor:.0%} of {sides.threads}x one "
            f"thread's rate at {x(sides.shape)}"
        )
    if micro := by_id.get(StepId.MICRO_KERNEL):
        past = ": it runs on units that rate does not measure" if micro.factor > 1 else ""
        said.append(f"one thread in L2 reaches {micro.factor:.0%} of a core's FMA rate{past}")
    if packing := by_id.get(StepId.PACKING):
        said.append(f"one thread at {x(sides.shape)} keeps {packing.factor:.0%} of its rate in L2")
    if not said:
        return ""
    return f"With no dense peak its gap is not shared out; through {sides.backend}, " + (
        "; ".join(said) + "."
    )


def cause_sentences(
    name: str,
    entry: DeviceEntry,
    rows: pd.DataFrame,
    head: Any,
    knobs: pd.DataFrame | None,
    room: int = 2,
) -> tuple[list[str], str]:
    """The largest measured losses of the headline's breakdown in words, each with its share of
    the gap, and the share the measured steps leave unexplained; and "" where they explain at
    least two thirds of the gap (the Definition of Done's "concrete"), else what says otherwise.
    A noisy window names its noise instead of a cause. `room`: the sentences the paragraph has
    left for its losses (at least one is named)."""
    if noisy(head):
        return [noisy_sentence(head)], "its window was noisy"
    account = gap_account(name, entry, rows, head, knobs)
    if account is None and pd.notna(head.peak_tflops):
        return [], "no gap to explain"
    if account is None:
        steps = device_breakdown(name, entry, rows, head, knobs)
        return [s for s in (unpeaked_sentence(steps, entry),) if s], "no dense peak"
    largest = [loss for loss in account.losses if loss.share >= MIN_SHARE]
    named = largest[: max(1, min(2, room))] or account.losses[:1]
    said = [loss_sentence(loss, entry) for loss in named]
    left = account.unexplained
    unsplit = account.too_noisy_share
    if account.noisy and unsplit >= account.explained:
        sides = entry.measured.steps if entry.measured else None
        why = (sides and sides.shared) or (
            f"spreads up to {max(s.spread or 0.0 for s in account.noisy):.0%}"
        )
        said.append(
            f"Its other steps were too noisy to split the gap ({why}): the machine's noise is "
            "the largest cause here; measure again on a quiet machine."
            if account.losses
            else f"Its steps were too noisy to split the gap ({why}): the machine's noise is the "
            "largest cause here; measure again on a quiet machine."
        )
        return said, f"{pct(max(left, 0.0))} of its gap unexplained: its steps were too noisy"
    # The steps too noisy to tell, where together they could hold a loss worth naming.
    noisy_steps = ", ".join(s.label for s in account.noisy) if unsplit >= MIN_SHARE else ""
    too_noisy = f" ({noisy_steps}: too noisy to tell)" if noisy_steps else ""
    if account.concrete:  # said with the last loss named, so it takes no sentence of its own
        rest = f", {pct(left)} is left unexplained{too_noisy}" if left >= 0.005 else ""
        if not rest and [pct(loss.share) for loss in named] == ["all"]:
            return said, ""  # one loss that is all of the gap: "explain all" would say it twice
        explain = f"the measured steps explain {pct(account.explained)} of the gap{rest}."
        said[-1] = f"{said[-1].removesuffix('.')}; {explain}" if said else explain.capitalize()
        return said, ""
    counted = ""
    if unread := unread_counters(head, entry):
        counted = f" (its own counters{COUNTED.get(entry.kind, '')} were not read: {unread})"
    unsaid = (
        "No measured step explains the gap"
        if pct(left) == "all"
        else f"{pct(left)[0].upper()}{pct(left)[1:]} of the gap is not explained by a measured step"
    )
    said.append(f"{unsaid}{too_noisy}; measure next: {account.measure_next}{counted}.")
    return said, f"{pct(left)} of its gap unexplained"


# A loss named in a paragraph: at least this share of the gap (the largest is always named).
MIN_SHARE = 0.1
