"""What a measured figure is held to, in pure functions: MFU, the roofline (compute roof,
memory slope, ridge), energy per TFLOP and a CPU's computed peak. Units as in
roofline/core/arithmetic.py. Interpretation: no measuring stage imports this."""

from typing import Any

import numpy as np


def mfu(achieved_tflops: float, peak_tflops: float) -> float:
    """Model FLOP utilisation: achieved over the dense peak of the same dtype."""
    return achieved_tflops / peak_tflops


def joules_per_tflop(power_w: float, seconds: float, flops: float) -> float:
    """Energy per TFLOP of work: average power x time per call / TFLOP per call."""
    return power_w * seconds / (flops / 1e12)


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """Intensity (FLOP/byte) where the memory slope meets the compute roof."""
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def roof_tflops(intensity_flop_per_byte: Any, peak_tflops: float, bandwidth_gbps: float) -> Any:
    """Attainable TFLOP/s at a given intensity (a number or an array of them):
    min(compute roof, bandwidth * intensity)."""
    return np.minimum(
        peak_tflops, bandwidth_gbps * 1e9 * np.asarray(intensity_flop_per_byte) / 1e12
    )


def cpu_peak_tflops(cores: int, clock_ghz: float, flop_per_cycle: int) -> float:
    """cores x clock x FLOP per cycle per core."""
    return cores * clock_ghz * 1e9 * flop_per_cycle / 1e12


def implied_clock_ghz(measured_tflops: float, cores: int, flop_per_cycle: int) -> float:
    """The clock a measured throughput needs at this FLOP per cycle on these cores: the inverse
    of cpu_peak_tflops. Above the clock a computed peak used, it says that clock was low."""
    return measured_tflops * 1e12 / (cores * flop_per_cycle * 1e9)
