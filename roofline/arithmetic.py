"""The roofline arithmetic, in pure functions. Units: FLOP, bytes, seconds, TFLOP/s, GB/s (1e9)."""

import math
from typing import Any

import numpy as np

from roofline.dtypes import DTYPES


def matmul_flops(m: int, n: int, k: int) -> int:
    """One multiply and one add per (i, j, l): 2*M*N*K."""
    return 2 * m * n * k


def matmul_bytes(m: int, n: int, k: int, dtype: str) -> int:
    """Ideal-cache lower bound: read A (MxK) and B (KxN) once, write C (MxN) once, each in its
    own element size (float8 reads 1-byte operands and writes a bfloat16 C)."""
    d = DTYPES[dtype]
    return (m * k + k * n) * d.input_bytes + m * n * d.output_bytes


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP/byte."""
    return flops / nbytes


def tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12


def gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9


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


def cpu_flop_per_cycle(
    dtype: str, flags: set[str], microarchitecture: str | None = None
) -> tuple[int, str] | None:
    """Best native FLOP/cycle per core for a dtype given the CPU's flags (halved on a
    microarchitecture that splits the instructions over narrower units), and what that
    assumes, or None when no instruction set here runs it natively."""
    for path in DTYPES[dtype].cpu:
        if all(flag in flags for flag in path.flags):
            if microarchitecture in path.half_rate_on:
                name = path.isa.split(",")[0]
                units = f"{microarchitecture}'s vector units are half as wide"
                return path.flop_per_cycle // 2, f"{name} at half rate: {units}"
            return path.flop_per_cycle, path.isa
    return None


def summarize(samples: list[float]) -> dict[str, float]:
    """Median, min, max and spread ((max - min) / median) of timing samples."""
    if not samples:
        raise ValueError("no timing samples")
    ordered = sorted(samples)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {
        "median_s": median,
        "min_s": ordered[0],
        "max_s": ordered[-1],
        "spread": (ordered[-1] - ordered[0]) / median,
    }


def buffer_sets(operand_bytes: int, cache_bytes: int) -> int:
    """How many operand sets to rotate through so no repetition finds its inputs in cache.

    Operands larger than the cache need one set; smaller ones need enough sets to fill twice
    the cache, so an LRU-ish cache has evicted a set before it comes round again."""
    if operand_bytes >= cache_bytes:
        return 1
    return math.ceil(2 * cache_bytes / operand_bytes)
