"""The figures the pages quote beside their sentences (a share, a speed-up, a time, a side of
the ridge), computed here, so that roofline.rendering only words them. Pure functions of
measured numbers."""

from typing import Any, NamedTuple

import pandas as pd

from roofline.core.arithmetic import matmul_bytes
from roofline.interpretation.roofs import ridge_point

# A CPU's FMA ceiling this far from its computed peak says something of the peak's inputs.
CEILING_LOW, CEILING_HIGH = 0.95, 1.05


def ratio(value: float, of: float) -> float:
    """`value` as a multiple of `of`: a speed-up (2.1x), a share (84%)."""
    return value / of


def data_power_share(random_tflops: float, constant_tflops: float, peak: float) -> float | None:
    """The share of the gap from the dense peak down to the rate on random inputs that constant
    inputs close (the power the random data itself draws); None where there is no gap."""
    gap = peak - random_tflops
    return (constant_tflops - random_tflops) / gap if gap > 0 else None


class MoveTime(NamedTuple):
    seconds: float  # the operands moved once at the measured copy bandwidth
    share: float  # of the measured (median) time


def move_time(head: Any, gbps: float) -> MoveTime:
    seconds = matmul_bytes(head.m, head.n, head.k, head.dtype) / (gbps * 1e9)
    return MoveTime(seconds, seconds / head.median_s)


class RidgeSide(NamedTuple):
    ridge: float  # FLOP/byte where the dense peak meets the copy bandwidth
    times: float  # the kernel's intensity as a multiple of it
    bound: str  # "compute" or "memory"


def against_ridge(intensity: float, peak_tflops: float, gbps: float) -> RidgeSide:
    ridge = ridge_point(peak_tflops, gbps)
    return RidgeSide(ridge, intensity / ridge, "compute" if intensity > ridge else "memory")


class FmaShares(NamedTuple):
    ceiling_tflops: float  # the FMA ceiling measured on every core at once
    kernel_share: float  # the kernel's TFLOP/s as a share of it
    of_computed: float | None  # the ceiling as a share of the computed peak; None: no peak
    reading: str  # "low": the clock or FLOP/cycle assumed is lower; "above": the peak is wrong


def fma_shares(
    achieved: float, fma_gflops: float, computed_tflops: float | None, noisy: bool
) -> FmaShares:
    """The kernel against the CPU's FMA ceiling, and the ceiling against the computed peak.
    A ceiling well below the peak is read only on a quiet machine (a shared one lowers both)."""
    ceiling = fma_tflops(fma_gflops)
    share = ceiling / computed_tflops if computed_tflops else None
    reading = ""
    if share is not None and share < CEILING_LOW and not noisy:
        reading = "low"
    elif share is not None and share > CEILING_HIGH:
        reading = "above"
    return FmaShares(ceiling, achieved / ceiling, share, reading)


def fma_tflops(gflops: float) -> float:
    return gflops / 1e3


def per_dollar_hour(tflops: float, price_per_hour: float) -> float:
    return tflops / price_per_hour


def window_seconds(row: Any) -> float:
    """How long a row's window timed: its recorded window, else median x calls."""
    return row.window_s if pd.notna(row.window_s) else row.median_s * row.repeats


class SustainedChange(NamedTuple):
    change: float  # the sustained TFLOP/s over the burst's, less 1 (negative: slower)
    too_short: bool  # the "sustained" window was no longer than the burst's


def sustained_change(sustained: Any, burst: Any) -> SustainedChange:
    too_short = pd.notna(burst.window_s) and window_seconds(sustained) <= burst.window_s
    return SustainedChange(ratio(sustained.achieved_tflops, burst.achieved_tflops) - 1, too_short)
