"""A gap breakdown's steps: what each one is, its TFLOP/s and its factor (what it keeps of the
step above), and each step's share of the gap. The factors multiply to the achieved figure, so
the shares add up to the whole gap. Pure functions; the chains themselves are
roofline.interpretation.breakdown's."""

import dataclasses
import enum
import math
from dataclasses import dataclass


class StepId(enum.Enum):
    """A step of the gap breakdown, from the dense peak down to the achieved figure."""

    PEAK = "peak"
    DATA_POWER = "data_power"  # a GPU's clock on random inputs against constant ones
    CLOCK = "clock"  # a GPU's SM clock under load; a CPU's clock under its widest FMAs
    FMA = "fma"  # a CPU's measured FMA ceiling at that clock: the FMA units' issue
    THREADS = "threads"  # a CPU's library on every thread against one thread
    MICRO_KERNEL = "micro_kernel"  # ...on one thread, operands in L2, against one core's FMAs
    PACKING = "packing"  # ...on one thread at the breakdown's shape against in L2
    LAUNCH = "launch"  # a GPU's calls launched one by one against replayed from a graph
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
    StepId.DATA_POWER: "the data's power",
    StepId.CLOCK: "the clock under load",
    StepId.FMA: "measured FMA ceiling",
    StepId.THREADS: "threading across the cores",
    StepId.MICRO_KERNEL: "the micro-kernel on one core",
    StepId.PACKING: "packing and memory",
    StepId.LAUNCH: "launch overhead",
    StepId.CEILING: "measured compute ceiling",
    StepId.QUANTISATION: "tile and wave quantisation",
    StepId.GPU_BUSY: "the GPU busy",
    StepId.SMS_BUSY: "SMs given work",
    StepId.TENSOR_ACTIVE: "tensor pipes active",
    StepId.ACHIEVED: "achieved",
}


@dataclass(frozen=True)
class Step:
    """One step of the breakdown: its TFLOP/s (None: not measured, too noisy to tell, or
    `refuted`, which `note` says), how it was found, and its factor: what it keeps of the step
    above (kept even where too noisy to tell, so that the factors multiply to the achieved)."""

    id: StepId
    tflops: float | None
    note: str
    refuted: bool = False  # measured, but below the achieved figure: no bound on it
    factor: float | None = None
    spread: float | None = None  # the noisier side's spread, where the step is a pair of sides
    too_noisy: bool = False  # its spread is larger than its effect: no number, no cause

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


def measured(
    id: StepId,
    chain: float | None,
    factor: float,
    note: str,
    spread: float | None,
    shared: str = "",
) -> Step:
    """A step of a measured factor on `chain` (the step above's TFLOP/s, noisy steps included;
    None where no peak starts the chain): no number where its sides' spread is larger than its
    effect, or others shared the cores."""
    if shared:
        said = f"{note}; too noisy to tell: {shared}"
        return Step(id, None, said, factor=factor, spread=spread, too_noisy=True)
    if spread is not None and spread > abs(1 - factor):
        said = f"{note}; too noisy to tell (spread {spread:.1%}, effect {abs(1 - factor):.1%})"
        return Step(id, None, said, factor=factor, spread=spread, too_noisy=True)
    return Step(id, None if chain is None else chain * factor, note, factor=factor, spread=spread)


def x(shape: list[int] | tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def with_factors(steps: list[Step]) -> list[Step]:
    """Each step with a number, its factor where it has none: its share of the last step above
    with a number (a GPU's steps are rates, each a share of the one above); what remains less
    the factors of the steps too noisy to tell, so that the factors multiply to the achieved."""
    out: list[Step] = []
    unsplit = 1.0  # the factors of the steps too noisy to carry a number
    for found in steps:
        ref = above(out)
        if found.factor is None and found.tflops is not None and ref is not None and ref.tflops:
            # What remains takes out what the noisy steps kept: the factors multiply to it.
            left = unsplit if found.id is StepId.ACHIEVED else 1.0
            found = dataclasses.replace(found, factor=found.tflops / (ref.tflops * left))
        if found.tflops is None and found.factor is not None:
            unsplit *= found.factor
        out.append(found)
    return out


@dataclass(frozen=True)
class GapShare:
    """A step's share of the gap from the dense peak to the achieved figure: the log of its
    factor over the log of achieved / peak, so that the shares of every step add up to 1."""

    step: Step
    share: float


def gap_shares(steps: list[Step]) -> list[GapShare]:
    """Every step with a factor, and its share of the gap; none where there is no gap (the
    achieved figure at or above the peak) or no peak."""
    peak, achieved = steps[0].tflops, steps[-1].tflops
    if not peak or not achieved or achieved >= peak:
        return []
    total = math.log(achieved / peak)
    return [GapShare(s, math.log(s.factor) / total) for s in steps[1:] if s.factor]
