"""What a measurement counts, in pure functions: FLOPs, bytes, intensity, rates and the summary
of timing samples. Units: FLOP, bytes, seconds, TFLOP/s, GB/s (1e9). What a figure is held to
(MFU, roofs, ridges, computed peaks) is in roofline/interpretation/roofs.py."""

import math

from roofline.core.dtypes import DTYPES


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


def square_in(nbytes: int, share: float = 0.5, step: int = 32) -> int:
    """The side of the largest square float32 product whose A, B and C together take at most
    `share` of `nbytes` (the rest for a library's packed copies of them), a multiple of `step`;
    0 where not even `step` fits."""
    return int((share * nbytes / (3 * 4)) ** 0.5) // step * step


def tflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e12


def rounds_tflops(flops: float, rounds: list[list[float]]) -> float:
    """A side's rate over rounds of per-call seconds: its median call over every round."""
    return tflops(flops, summarize([t for r in rounds for t in r])["median_s"])


def gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9


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
