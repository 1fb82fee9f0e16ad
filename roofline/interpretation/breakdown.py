"""The gap breakdown of a headline: from the dense peak down to the achieved figure, step by step.
Each step is a measured factor of the step above: the clock under load, a CPU's FMA issue,
threading, its micro-kernel and packing; a GPU's best shape, tiles and waves, or its counters.
The factors multiply to the achieved figure, so each step's share of the gap is exact. Pure
functions over results rows and the manifest."""

import dataclasses
from typing import Any

import pandas as pd

from roofline.configuration.params import RENTED_KINDS
from roofline.device.telemetry import reason_words
from roofline.interpretation.ceilings import (
    TILE,
    Ceiling,
    number_of,
    ran_tile,
    text_of,
    tile_source,
    wave_quantisation,
)
from roofline.interpretation.interpret import assumed_clock_mhz
from roofline.interpretation.manifest import CpuSteps, Fma, FmaClock, GpuSteps
from roofline.interpretation.steps import (
    Step,
    StepId,
    above,
    measured,
    share,
    step,
    with_factors,
    x,
)


def clock_cause(head: Any) -> str:
    """What held the SM clock in the timed window, as NVML said: the clock-event reason set in
    the most samples and its share, and the power against the enforced limit; what was not
    read, said. A row from before shares were recorded names the reasons it saw."""
    reason = text_of(getattr(head, "clock_reason", ""))
    share = number_of(getattr(head, "clock_reason_share", None))
    seen = [n for n in text_of(getattr(head, "throttle_reasons", "")).split("+") if n]
    if reason == "none":
        said = "no clock-event reason but idleness was set in any sample"
    elif reason:
        of = f"{share:.0%} of the samples" if share is not None else "some samples"
        said = f"the clock was held by {reason_words(reason)} in {of}"
    elif "reasons:" in text_of(getattr(head, "telemetry_errors", "")):
        said = "its clock-event reasons were not read (NVML refused them)"
    elif seen:
        named = ", ".join(reason_words(n) for n in seen)
        said = f"clock-event reasons seen: {named} (in what share of the samples, not recorded)"
    else:
        said = "no clock-event reason but idleness was reported"
    power = number_of(getattr(head, "power_w", None))
    limit = number_of(getattr(head, "power_limit_w", None))
    if power is not None and limit:
        return f"{said}, at {power:.0f} W of its {limit:.0f} W limit ({power / limit:.0%})"
    if power is not None:
        return f"{said}, at {power:.0f} W (its power limit not recorded)"
    return f"{said}; its power was not read"


def assumed_of(head: Any, peak_clock_mhz: float | None) -> float | None:
    """The SM clock the headline's datasheet peak assumes (interpret.assumed_clock_mhz)."""
    max_mhz = None if pd.isna(head.sm_clock_max_mhz) else head.sm_clock_max_mhz
    return assumed_clock_mhz(head.dtype, peak_clock_mhz, max_mhz)


def data_power_step(
    head: Any, sides: GpuSteps, clock: Step, peak_clock_mhz: float | None
) -> Step | None:
    """What the data's own power costs: the clock the headline's window ran at against the one
    constant inputs (bits that never toggle) ran at, each held to the clock the peak assumes, so
    that this step and the clock step multiply to the window's clock. Where no clock was read,
    the rates of the two sides. None where the pair was not measured."""
    random, constant = sides.random, sides.constant
    if random is None or constant is None:
        return None
    spread = max(random.spread, constant.spread)
    rates = f"random inputs reached {random.tflops:.4g} TFLOP/s, {random.tflops / constant.tflops:.1%} of constant ones' {constant.tflops:.4g}"
    quiet = sides.sm_clock_mhz.get("constant")
    assumed = assumed_of(head, peak_clock_mhz)
    peak = number_of(head.peak_tflops)
    if clock.tflops is None or not quiet or not assumed or not peak:
        note = f"{rates} (no SM clock read to split it from the clock's step)"
        return measured(StepId.DATA_POWER, peak, random.tflops / constant.tflops, note, spread)
    loud = sides.sm_clock_mhz.get("random")
    watts = sides.power_w
    drew = (
        f" at {watts['random']:.0f} W against {watts['constant']:.0f} W"
        if "random" in watts and "constant" in watts
        else ""
    )
    note = (
        f"the SMs ran at {head.sm_clock_mhz:.0f} MHz in the timed window on random inputs"
        + (f" ({loud:.0f} MHz beside constant ones{drew})" if loud else "")
        + f", at {quiet:.0f} MHz on constant inputs (bits that never toggle); {rates}"
    )
    factor = (clock.tflops / peak) / min(quiet / assumed, 1.0)
    if factor == 1.0:  # both clocks at or above the one the peak assumes: nothing to tell apart
        note += "; both at or above the clock the peak assumes, so it costs nothing here"
        return Step(StepId.DATA_POWER, peak, note, factor=1.0, spread=spread)
    return measured(StepId.DATA_POWER, peak, factor, note, spread)


def launch_step(sides: GpuSteps, chain: float | None) -> Step | None:
    """What launching the lab's calls one by one costs: their rate against the same calls
    replayed from a CUDA graph; None where the pair was not measured."""
    eager, graph = sides.random, sides.graph
    if eager is None or graph is None:
        return None
    factor = eager.tflops / graph.tflops
    note = (
        f"launched one by one the calls reach {eager.tflops:.4g} TFLOP/s, {factor:.1%} of the "
        f"{graph.tflops:.4g} they reach replayed from a CUDA graph"
    )
    return measured(StepId.LAUNCH, chain, factor, note, max(eager.spread, graph.spread))


def clock_step(head: Any, kind: str, peak_clock_mhz: float | None) -> Step:
    """A GPU's peak scaled by its SM clock in the timed window (NVML) over the clock its
    datasheet peak assumes."""
    if kind not in RENTED_KINDS or pd.isna(head.sm_clock_mhz):
        gpu = {"cuda": " (no NVML telemetry)", "rocm": " (no amdsmi telemetry)"}
        why = "not measured" + gpu.get(kind, "")
        return step(StepId.CLOCK, None, why)
    assumed = assumed_of(head, peak_clock_mhz)
    if not assumed:
        return step(
            StepId.CLOCK, None, "the clock the datasheet peak assumes is not set (peak_clock_mhz)"
        )
    ratio = head.sm_clock_mhz / assumed
    note = (
        f"{head.sm_clock_mhz:.0f} MHz in the timed window against the {assumed:.0f} MHz "
        f"the datasheet peak assumes ({ratio:.1%})"
    )
    if ratio > 1:  # boosting past it raises no ceiling: the dense peak is the definition
        note += "; above it, so the dense peak stays the ceiling"
    note += f"; {clock_cause(head)}"
    return step(StepId.CLOCK, head.peak_tflops * min(ratio, 1.0), note)


def is_itself(head: Any, ceiling: Ceiling) -> bool:
    """Whether the measured ceiling is the headline point itself (nothing else measured)."""
    return ceiling.series == "lab" and ceiling.shape == (head.m, head.n, head.k)


def ceiling_step(head: Any, ceiling: Ceiling, steps: list[Step]) -> Step:
    if is_itself(head, ceiling):
        return step(
            StepId.CEILING,
            None,
            f"not measured apart from this kernel: it is the only {head.dtype} shape measured; "
            "a sweep searches shapes for a higher one (`uv run dvc exp run -S sweep=full`)",
        )
    shape = "x".join(map(str, ceiling.shape))
    note = f"best {head.dtype} shape measured, {shape} ({ceiling.series}): "
    return step(StepId.CEILING, ceiling.tflops, note + share(ceiling.tflops, steps))


def quantisation_step(
    head: Any, ceiling: Ceiling, kind: str, sm_count: int | None, steps: list[Step]
) -> Step:
    if kind != "cuda" or not sm_count:
        return step(StepId.QUANTISATION, None, "not modelled without an SM count")
    tile = ran_tile(head)
    q = wave_quantisation(head.m, head.n, sm_count, tile or TILE)
    ref = above(steps)
    if ref is None:
        return step(StepId.QUANTISATION, None, "no step above to scale")
    note = (
        f"{q.tiles} tiles of {q.tile[0]}x{q.tile[1]} ({tile_source(tile)}) on {sm_count} SMs: "
        f"{q.waves} waves, {q.efficiency:.1%} of slots useful"
    )
    if ref.id is StepId.CEILING:
        # The ceiling's own shape is quantised too: scale by the headline's efficiency over its,
        # at the tile of the kernel that ran there (else the headline's).
        best_tile = ran_tile(ceiling) or q.tile
        q_best = wave_quantisation(ceiling.shape[0], ceiling.shape[1], sm_count, best_tile)
        its = f", its kernel's tile {best_tile[0]}x{best_tile[1]}" if best_tile != q.tile else ""
        note += f" (the ceiling's shape: {q_best.efficiency:.1%}{its})"
        return step(StepId.QUANTISATION, ref.tflops * q.efficiency / q_best.efficiency, note)
    return step(StepId.QUANTISATION, ref.tflops * q.efficiency, note)


# Each GPM step: the row's field, and what its percentage is of.
COUNTED = (
    (StepId.GPU_BUSY, "gpm_graphics_busy_pct", "work on the GPU in {:.1f}% of the window"),
    (StepId.SMS_BUSY, "gpm_sm_busy_pct", "the SMs had work in {:.1f}% of their cycles"),
    (
        StepId.TENSOR_ACTIVE,
        "gpm_tensor_active_pct",
        "the tensor pipes issued in {:.1f}% of the SMs' cycles",
    ),
)


def counted(head: Any) -> bool:
    """Whether the headline's window has the GPU's own counters (NVML GPM) to split it by."""
    return any(number_of(getattr(head, name, None)) is not None for _, name, _ in COUNTED)


def counter_steps(head: Any, steps: list[Step]) -> list[Step]:
    """What the GPU's own counters say of the window below its clock: the GPU busy (launch gaps
    and syncs the rest), SMs given work, the tensor pipes active; each a share of the SMs'
    time at the window's clock, so each step is the clock step scaled by its counter, and a
    fraction of the last measured step above. A counter not read carries no number and says
    why (the row's counter_errors)."""
    clock = above(steps)
    out: list[Step] = []
    for id_, name, what in COUNTED:  # `what`: the counter's reading, in words
        pct = number_of(getattr(head, name, None))
        if pct is None or clock is None:
            why = text_of(getattr(head, "counter_errors", "")) or "not read"
            out.append(step(id_, None, f"not measured: {why}"))
            continue
        tflops = clock.tflops * pct / 100
        out.append(step(id_, tflops, f"{what.format(pct)}: {share(tflops, steps + out)}"))
    return out


def bound_of(head: Any, found: Step) -> Step:
    """A step as a bound on the achieved figure: one below it bounds nothing (it was measured
    apart from the headline kernel, at another shape or through another library, and the kernel
    itself ran faster), so it keeps its note, says so, and carries no number."""
    achieved = number_of(getattr(head, "achieved_tflops", None))
    if found.tflops is None or achieved is None or found.tflops >= achieved:
        return found
    said = (
        f"{found.note}; bounds nothing: {found.tflops:.4g} TFLOP/s, below the {achieved:.4g} "
        "the kernel itself reached (measured apart from it: another shape or library)"
    )
    return Step(found.id, None, said, refuted=True)


def cpu_chain(
    head: Any,
    fma: Fma | None,
    fma_clock: FmaClock | None,
    plain_clock_ghz: float | None,
    sides: CpuSteps | None,
) -> list[Step]:
    """A CPU's steps, each a measured factor of the one above: the clock under its widest FMAs
    against plain code's clock; the FMA ceiling at that clock (issue); the headline's library
    on every thread against one thread (threading); one thread in L2 against one core's share
    of the ceiling above (the micro-kernel); one thread at the breakdown's shape against in L2
    (packing and memory traffic); what remains, to the achieved figure."""
    steps = [step(StepId.PEAK, head.peak_tflops, head.peak_source)]
    chain = number_of(head.peak_tflops)  # None: no peak (Accelerate's matrix units)

    def add(found: Step) -> None:
        nonlocal chain
        if chain is not None and found.factor is not None:
            chain *= found.factor
        steps.append(found)

    if fma_clock and fma_clock.ghz and plain_clock_ghz:
        factor = fma_clock.ghz / plain_clock_ghz
        note = (
            f"under {fma_clock.vector} FMAs every core ran at {fma_clock.ghz:.2f} GHz, "
            f"{factor:.1%} of the {plain_clock_ghz:.2f} GHz plain code runs at"
        )
        add(measured(StepId.CLOCK, chain, factor, note, fma_clock.spread))
    else:
        why = (fma_clock and fma_clock.reason) or "the plain clock was not measured"
        add(step(StepId.CLOCK, None, f"not measured: {why}"))
    if fma and fma.gflops is not None and chain is None:  # the ceiling starts the chain
        chain = fma.gflops / 1e3
        note = f"every core at once, {fma.vector}: no dense peak above it to hold it to"
        steps.append(step(StepId.FMA, chain, note))
    elif fma and fma.gflops is not None:
        factor = fma.gflops / 1e3 / chain
        issue = "not fed every cycle" if factor < 1 else "fed every cycle"
        note = (
            f"every core at once, {fma.vector}: {fma.gflops / 1e3:.4g} TFLOP/s, {factor:.1%} of "
            f"the dense peak at the clock above (the FMA units {issue})"
        )
        add(measured(StepId.FMA, chain, factor, note, None))
    else:
        add(step(StepId.FMA, None, (fma and fma.reason) or "not measured"))
    ceiling = (
        "one core's share of the FMA ceiling"
        if fma and fma.gflops
        else ("one core's share of the dense peak")
    )
    usable = sides and sides.every_thread and sides.one_thread and sides.in_l2_thread
    if not usable:
        why = (sides and sides.reason) or "not measured by this record's run (an older one)"
        for id_ in (StepId.THREADS, StepId.MICRO_KERNEL, StepId.PACKING):
            steps.append(step(id_, None, f"not measured: {why}"))
    else:
        every, one, in_l2 = sides.every_thread, sides.one_thread, sides.in_l2_thread
        busy = sides.shared
        shared = chain  # what every thread shares; None: neither a peak nor an FMA ceiling
        if sides.threads > 1:
            factor = every.tflops / (sides.threads * one.tflops)
            note = (
                f"{sides.backend} at {x(sides.shape)}: {sides.threads} threads ran "
                f"{every.tflops / one.tflops:.2f}x one thread, {factor:.1%} of perfect scaling"
            )
            add(measured(StepId.THREADS, chain, factor, note, max(every.spread, one.spread), busy))
        else:
            add(Step(StepId.THREADS, chain, "one thread: nothing to share", factor=1.0))
        best = max(in_l2, one, key=lambda side: side.tflops)
        where = (
            f"with its operands in L2 ({x(sides.in_l2)})"
            if best is in_l2
            else f"at {x(sides.shape)} (faster than in L2, where each call is short)"
        )
        reached = f"{sides.backend} on one thread {where}: {best.tflops:.4g} TFLOP/s"
        if shared is None:
            steps.append(
                step(StepId.MICRO_KERNEL, None, f"{reached}; no peak or FMA ceiling to hold it to")
            )
        else:
            per_core = shared / sides.threads
            note = f"{reached}, {best.tflops / per_core:.1%} of {ceiling} ({per_core:.4g})"
            if best.tflops > per_core:  # e.g. Accelerate on Apple's matrix units, past the FMAs
                note += ": above it, so the library runs on units that ceiling does not measure"
            factor = best.tflops / per_core
            add(measured(StepId.MICRO_KERNEL, chain, factor, note, best.spread, busy))
        factor = one.tflops / best.tflops
        note = (
            f"one thread at {x(sides.shape)}: {one.tflops:.4g} TFLOP/s, {factor:.1%} of its rate "
            "in L2 (packing the operands and moving them through the caches)"
        )
        add(measured(StepId.PACKING, chain, factor, note, max(one.spread, in_l2.spread), busy))
    lab = (int(head.m), int(head.n), int(head.k))
    between = (
        "the same kernel in two windows"
        if usable and tuple(sides.shape) == lab
        else f"the lab's {x(lab)} against the breakdown's {x(sides.shape)}"
        if usable
        else "not split by a measurement"
    )
    if chain is None:
        steps.append(step(StepId.ACHIEVED, head.achieved_tflops, "no step above to compare with"))
        return steps
    factor = head.achieved_tflops / chain
    note = f"what remains ({between}): achieved is {factor:.1%} of the step above"
    steps.append(Step(StepId.ACHIEVED, head.achieved_tflops, note, factor=factor))
    return steps


def breakdown(
    head: Any,
    ceiling: Ceiling,
    kind: str,
    sm_count: int | None,
    peak_clock_mhz: float | None = None,
    cpu: tuple[Fma | None, FmaClock | None, float | None, CpuSteps | None] | None = None,
    gpu: GpuSteps | None = None,
) -> list[Step]:
    """From the dense peak down to the achieved figure, step by step; a step that was not
    measured says so and carries no number. A CPU's steps are its run's own (`cpu`: its FMA
    ceiling, its clock under that load, its plain clock in GHz, its breakdown sides); a GPU's
    come from its run's sides (`gpu`: the data's power, launches), its SM clock
    (`peak_clock_mhz`: the clock its datasheet peak assumes), its counters, its best shape and
    its tiles and waves."""
    if kind == "cpu":
        return cpu_chain(head, *(cpu or (None, None, None, None)))
    steps = [step(StepId.PEAK, head.peak_tflops, head.peak_source)]

    def add(*found: Step) -> None:
        steps.extend(bound_of(head, s) for s in found)

    clock = bound_of(head, clock_step(head, kind, peak_clock_mhz))
    data = data_power_step(head, gpu, clock, peak_clock_mhz) if gpu else None
    if data is not None:  # a measured factor of the peak: no bound on the kernel
        steps.append(data)
        if clock.tflops is not None and data.factor:
            quiet = clock.tflops / (head.peak_tflops * data.factor)
            note = f"{clock.note}; on constant inputs the clock keeps {quiet:.1%} of the peak's"
            clock = dataclasses.replace(clock, note=note)
    steps.append(clock)
    if counted(head):  # measured in the window: no model, no other shape (launch gaps too)
        add(*counter_steps(head, steps))
    else:
        launch = launch_step(gpu, above(steps) and above(steps).tflops) if gpu else None
        if launch is not None:
            steps.append(launch)
        add(ceiling_step(head, ceiling, steps))
        add(quantisation_step(head, ceiling, kind, sm_count, steps))
    what_remains = f"what remains: achieved is {share(head.achieved_tflops, steps)}"
    if above(steps) is not None and above(steps).id is StepId.TENSOR_ACTIVE:
        what_remains = (
            f"the kernel's issue efficiency: achieved is {share(head.achieved_tflops, steps)}"
        )
    steps.append(step(StepId.ACHIEVED, head.achieved_tflops, what_remains))
    return with_factors(steps)
