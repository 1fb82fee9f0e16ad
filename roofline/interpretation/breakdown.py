"""The gap breakdown of a headline: from the dense peak down to the achieved figure, step by step
(the clock, a CPU's FMA ceiling, threading, micro-kernel and packing, the best shape, tile and
wave quantisation), each
step measured or saying why not. Pure functions over results rows and the manifest."""

import enum
import math
from dataclasses import dataclass
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
from roofline.interpretation.manifest import Fma


class StepId(enum.Enum):
    """A step of the gap breakdown, from the dense peak down to the achieved figure."""

    PEAK = "peak"
    CLOCK = "clock"  # a GPU's SM clock under load
    FMA = "fma"  # a CPU's measured FMA ceiling
    THREADS = "threads"  # a CPU's threading, as the threads knob measured it
    ONE_CORE = "one_core"  # a CPU's kernel on one thread against one core's FMA ceiling
    # ...split, where the micro-kernel knob measured it, into the kernel in L2 against one
    # core's FMA ceiling, and the knobs' shape on one thread against the kernel in L2.
    MICRO_KERNEL = "micro_kernel"
    PACKING = "packing"
    CEILING = "ceiling"  # the best shape measured
    QUANTISATION = "quantisation"  # a GPU's tiles and waves
    # A GPU's own counters over the window (NVML GPM), in their place where it read them:
    GPU_BUSY = "gpu_busy"  # any work on the GPU: launch gaps and syncs the rest
    SMS_BUSY = "sms_busy"  # the SMs given work
    TENSOR_ACTIVE = "tensor_active"  # the tensor pipes issuing, in those SMs' cycles
    ACHIEVED = "achieved"


# Each step as the appendix names it.
STEP_LABELS = {
    StepId.PEAK: "dense peak",
    StepId.CLOCK: "at the SM clock under load",
    StepId.FMA: "measured FMA ceiling",
    StepId.THREADS: "threading across the cores",
    StepId.ONE_CORE: "the kernel on one core",
    StepId.MICRO_KERNEL: "the micro-kernel on one core",
    StepId.PACKING: "packing and memory",
    StepId.CEILING: "measured compute ceiling",
    StepId.QUANTISATION: "tile and wave quantisation",
    StepId.GPU_BUSY: "the GPU busy",
    StepId.SMS_BUSY: "SMs given work",
    StepId.TENSOR_ACTIVE: "tensor pipes active",
    StepId.ACHIEVED: "achieved",
}


@dataclass(frozen=True)
class Step:
    """One step of the breakdown: its TFLOP/s (None: not measured, or `refuted`, which `note`
    says) and how it was found."""

    id: StepId
    tflops: float | None
    note: str
    refuted: bool = False  # measured, but below the achieved figure: no bound on it

    @property
    def label(self) -> str:
        return STEP_LABELS[self.id]


def step(id: StepId, tflops: float | None, note: str) -> Step:
    known = tflops is not None and not math.isnan(tflops)
    return Step(id, tflops if known else None, note)


def above(steps: list[Step]) -> Step | None:
    """The last step with a number, which the next one is a fraction of."""
    return next((s for s in reversed(steps) if s.tflops is not None), None)


def kept(tflops: float | None, steps: list[Step]) -> float | None:
    """The share of the last measured step of `steps` that `tflops` keeps; None where either
    has no number."""
    ref = above(steps)
    return tflops / ref.tflops if tflops is not None and ref is not None and ref.tflops else None


def share(tflops: float, steps: list[Step]) -> str:
    ref, fraction = above(steps), kept(tflops, steps)
    if ref is None or fraction is None:
        return "no step above to compare with"
    return f"{fraction:.1%} of the step above ({ref.label})"


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


def clock_step(
    head: Any, kind: str, fma: Fma | None, steps: list[Step], peak_clock_mhz: float | None
) -> Step:
    """What the cores deliver under load: a GPU's peak scaled by its SM clock in the timed
    window (NVML) over the clock its datasheet peak assumes, a CPU's FMA throughput on every
    core at its widest vector (measured)."""
    if kind == "cpu":
        if not fma or fma.gflops is None:
            return step(StepId.FMA, None, (fma and fma.reason) or "not measured")
        ceiling = fma.gflops / 1e3
        note = f"every core at once, {fma.vector}: {share(ceiling, steps)}"
        return step(StepId.FMA, ceiling, note)
    if kind not in RENTED_KINDS or pd.isna(head.sm_clock_mhz):
        gpu = {"cuda": " (no NVML telemetry)", "rocm": " (no amdsmi telemetry)"}
        why = "not measured" + gpu.get(kind, "")
        return step(StepId.CLOCK, None, why)
    max_mhz = None if pd.isna(head.sm_clock_max_mhz) else head.sm_clock_max_mhz
    assumed = assumed_clock_mhz(head.dtype, peak_clock_mhz, max_mhz)
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


@dataclass(frozen=True)
class Threading:
    """The same BLAS call on one thread and on every core, interleaved in one run (the knobs'
    THREADS_KNOB): how far the library's threading falls short of scaling by the cores."""

    gain: float  # every core's rate over one thread's
    threads: int  # every core: the threads the run used
    shape: tuple[int, int, int]  # M, N, K
    one_thread_tflops: float | None = None  # the baseline side's rate

    @property
    def efficiency(self) -> float:
        """The gain over perfect scaling, at most 1 (a gain above the thread count is the
        cache's: more of it in use, not threading)."""
        return min(1.0, self.gain / self.threads)


def threads_step(threading: Threading | None, steps: list[Step]) -> Step:
    """A CPU's threading loss: the step above scaled by the measured threading efficiency."""
    if threading is None:
        return step(
            StepId.THREADS,
            None,
            "not measured: the knobs measure one thread against every core "
            "(`uv run dvc exp run -S knobs=lab`)",
        )
    ref = above(steps)
    if ref is None:
        return step(StepId.THREADS, None, "no step above to scale")
    shape = "x".join(map(str, threading.shape))
    note = (
        f"one thread -> {threading.threads} threads measured {threading.gain:.3g}x at {shape}: "
        f"{threading.efficiency:.1%} of perfect scaling"
    )
    return step(StepId.THREADS, ref.tflops * threading.efficiency, note)


def one_core_step(threading: Threading | None, fma: Fma | None, steps: list[Step]) -> Step:
    """A CPU's kernel on one thread against one core's share of the measured FMA ceiling:
    the loss inside the kernel itself (its blocking, packing and loads), threading apart."""
    if threading is None or threading.one_thread_tflops is None:
        return step(StepId.ONE_CORE, None, "not measured: the threads knob measures it")
    if not fma or fma.gflops is None:
        return step(StepId.ONE_CORE, None, "no FMA ceiling to hold one core's kernel to")
    ref = above(steps)
    if ref is None:
        return step(StepId.ONE_CORE, None, "no step above to scale")
    per_core = fma.gflops / 1e3 / threading.threads
    efficiency = min(1.0, threading.one_thread_tflops / per_core)
    shape = "x".join(map(str, threading.shape))
    note = (
        f"one thread reached {threading.one_thread_tflops:.4g} TFLOP/s at {shape}, "
        f"{efficiency:.1%} of one core's FMA ceiling ({per_core:.4g})"
    )
    return step(StepId.ONE_CORE, ref.tflops * efficiency, note)


@dataclass(frozen=True)
class MicroKernel:
    """One thread at the knobs' shape and at a square whose operands fit its core's L2,
    interleaved in one run (the knobs' MICRO_KERNEL_KNOB): the library's inner kernel at its own
    rate, and what packing and memory traffic cost it at the larger shape."""

    shape: tuple[int, int, int]  # the knobs' shape, M, N, K
    shape_tflops: float  # one thread there
    in_l2: tuple[int, int, int]  # the square in L2
    in_l2_tflops: float  # one thread there
    threads: int  # every core: the threads the run used (one core's share of the FMA ceiling)


def micro_kernel_step(micro: MicroKernel, fma: Fma | None, steps: list[Step]) -> Step:
    """A CPU's inner kernel on one thread against one core's share of the measured FMA ceiling,
    packing and memory apart: its rate in L2, or at the knobs' shape where that is the faster
    (a small product pays per-call costs that a large one spreads: then no packing or memory
    loss shows, and the larger shape's rate is the kernel's own)."""
    if not fma or fma.gflops is None:
        return step(StepId.MICRO_KERNEL, None, "no FMA ceiling to hold one core's kernel to")
    ref = above(steps)
    if ref is None:
        return step(StepId.MICRO_KERNEL, None, "no step above to scale")
    per_core = fma.gflops / 1e3 / micro.threads
    best = max(micro.in_l2_tflops, micro.shape_tflops)
    efficiency = min(1.0, best / per_core)
    in_l2 = f"{micro.in_l2_tflops:.4g} TFLOP/s at {'x'.join(map(str, micro.in_l2))}"
    if micro.in_l2_tflops >= micro.shape_tflops:
        reached = f"one thread reached {in_l2} (its operands in L2)"
    else:
        shape = "x".join(map(str, micro.shape))
        reached = (
            f"one thread reached {micro.shape_tflops:.4g} TFLOP/s at {shape}, and {in_l2} with "
            "its operands in L2"
        )
    note = f"{reached}: {efficiency:.1%} of one core's FMA ceiling ({per_core:.4g})"
    return step(StepId.MICRO_KERNEL, ref.tflops * efficiency, note)


def packing_step(micro: MicroKernel, steps: list[Step]) -> Step:
    """What packing the operands and moving them through the caches cost one thread at the
    knobs' shape, against the same library's kernel with its operands in L2 (nothing, where
    the larger shape was the faster)."""
    ref = above(steps)
    if ref is None:
        return step(StepId.PACKING, None, "no step above to scale")
    shape = "x".join(map(str, micro.shape))
    if micro.shape_tflops >= micro.in_l2_tflops:
        note = f"none measurable: one thread at {shape} was no slower than with its operands in L2"
        return step(StepId.PACKING, ref.tflops, note)
    efficiency = micro.shape_tflops / micro.in_l2_tflops
    note = (
        f"one thread reached {micro.shape_tflops:.4g} TFLOP/s at {shape}, {efficiency:.1%} of "
        f"its {micro.in_l2_tflops:.4g} in L2"
    )
    return step(StepId.PACKING, ref.tflops * efficiency, note)


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


def breakdown(
    head: Any,
    ceiling: Ceiling,
    kind: str,
    sm_count: int | None,
    fma: Fma | None = None,
    peak_clock_mhz: float | None = None,
    threading: Threading | None = None,
    micro: MicroKernel | None = None,
) -> list[Step]:
    """From the dense peak down to the achieved figure, step by step; a step that was not
    measured says so and carries no number, and each number is a fraction of the last step
    above it that has one. `fma` is a CPU's measured FMA ceiling (roofline.device.peakflops),
    `threading` its measured threading, `micro` its micro-kernel apart from packing and memory;
    `peak_clock_mhz` the SM clock a GPU's datasheet peak assumes."""
    steps = [step(StepId.PEAK, head.peak_tflops, head.peak_source)]

    def add(*found: Step) -> None:
        steps.extend(bound_of(head, s) for s in found)

    add(clock_step(head, kind, fma, steps, peak_clock_mhz))
    if kind == "cpu":
        add(threads_step(threading, steps))
        if micro is None:
            add(one_core_step(threading, fma, steps))
        else:
            add(micro_kernel_step(micro, fma, steps))
            if steps[-1].refuted:  # the same two sides measure packing: no bound either
                why = "measured by the same two sides as the micro-kernel, which bound nothing"
                steps.append(Step(StepId.PACKING, None, why, refuted=True))
            else:
                add(packing_step(micro, steps))
    if kind != "cpu" and counted(head):  # measured in the window: no model, no other shape
        add(*counter_steps(head, steps))
    else:
        add(ceiling_step(head, ceiling, steps))
        if kind != "cpu":  # a GPU's tiles and waves; a CPU's blocking is not modelled
            add(quantisation_step(head, ceiling, kind, sm_count, steps))
    what_remains = f"what remains: achieved is {share(head.achieved_tflops, steps)}"
    if above(steps) is not None and above(steps).id is StepId.TENSOR_ACTIVE:
        what_remains = (
            f"the kernel's issue efficiency: achieved is {share(head.achieved_tflops, steps)}"
        )
    steps.append(step(StepId.ACHIEVED, head.achieved_tflops, what_remains))
    return steps
