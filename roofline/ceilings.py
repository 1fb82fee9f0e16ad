"""Measured ceilings, the roofline's own prediction checked against measurement, and the gap
from the datasheet peak down to the achieved figure. Pure functions over results rows."""

import math
from typing import Any

import pandas as pd

from roofline.arithmetic import matmul_bytes, matmul_flops

# The output tile assumed for tile and wave quantisation on GPUs: 128 x 256 (M x N), a common
# cuBLAS tile for large 16-bit GEMMs on Ampere and Hopper. cuBLAS picks its own per shape, so
# this is a model, stated wherever it is used.
TILE = (128, 256)
# The lab's kernel on each kind of device: what a device's headline figure and roof are.
LAB_DTYPE = {"cpu": "float32", "cuda": "float16"}


def measured_ceilings(rows: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """The best measured TFLOP/s per (device, dtype) over every series, and where it was."""
    measured = rows[rows.status == "measured"]
    best = measured.loc[measured.groupby(["device", "dtype"]).achieved_tflops.idxmax()]
    return {
        (r.device, r.dtype): {
            "tflops": r.achieved_tflops,
            "shape": [r.m, r.n, r.k],
            "series": r.series,
        }
        for r in best.itertuples()
    }


def predicted_seconds(
    flops: float, nbytes: float, ceiling_tflops: float, bandwidth_gbps: float
) -> float:
    """The roofline's time: whichever of compute and memory takes longer at the ceilings."""
    return max(flops / (ceiling_tflops * 1e12), nbytes / (bandwidth_gbps * 1e9))


def predictions(rows: pd.DataFrame, bandwidths: dict[str, float]) -> pd.DataFrame:
    """Each measured row with its predicted time from the measured ceilings (best TFLOP/s of
    its dtype, the device's copy bandwidth), `error` = measured / predicted - 1, and `bound`."""
    ceilings = measured_ceilings(rows)
    out = []
    for r in rows[(rows.status == "measured") & rows.device.isin(bandwidths)].itertuples():
        flops, nbytes = matmul_flops(r.m, r.n, r.k), matmul_bytes(r.m, r.n, r.k, r.dtype)
        ceiling, bandwidth = ceilings[(r.device, r.dtype)]["tflops"], bandwidths[r.device]
        predicted = predicted_seconds(flops, nbytes, ceiling, bandwidth)
        compute_s = flops / (ceiling * 1e12)
        out.append(
            {
                **r._asdict(),
                "predicted_s": predicted,
                "error": r.median_s / predicted - 1,
                "bound": "compute" if compute_s >= nbytes / (bandwidth * 1e9) else "memory",
            }
        )
    return pd.DataFrame(out)


def wave_quantisation(
    m: int, n: int, sm_count: int, tile: tuple[int, int] = TILE
) -> dict[str, Any]:
    """Output tiles, waves of tiles over the SMs, and the fraction of the launched tile slots
    doing useful work (edge padding and the last partial wave both waste slots)."""
    tiles_m, tiles_n = math.ceil(m / tile[0]), math.ceil(n / tile[1])
    tiles = tiles_m * tiles_n
    waves = math.ceil(tiles / sm_count)
    padding = (m * n) / (tiles_m * tile[0] * tiles_n * tile[1])
    return {
        "tile": list(tile),
        "tiles": tiles,
        "waves": waves,
        "wave_efficiency": tiles / (waves * sm_count),
        "padding_efficiency": padding,
        "efficiency": padding * tiles / (waves * sm_count),
    }


def why(r: Any, cache_bytes: int | None, floor_s: float, sm_count: int | None) -> str:
    """The likeliest cause of a large prediction error for one measured point, from its numbers."""
    nbytes = matmul_bytes(r.m, r.n, r.k, r.dtype)
    if r.error < 0 and cache_bytes and nbytes <= cache_bytes:
        return (
            f"faster than the memory roof: its {nbytes / 2**20:.3g} MiB of operands fit in the "
            f"{cache_bytes / 2**20:.0f} MiB cache, so the copy bandwidth is not its ceiling"
        )
    if r.median_s < 3 * floor_s:
        return (
            f"a {r.median_s * 1e6:.3g} µs call is near the fastest {r.dtype} call measured "
            f"({floor_s * 1e6:.3g} µs): fixed per-call cost (launch, dispatch, threading) dominates"
        )
    if sm_count:
        q = wave_quantisation(r.m, r.n, sm_count)
        if q["efficiency"] < 0.9:
            return (
                f"tile and wave quantisation: {q['tiles']} tiles of {TILE[0]}x{TILE[1]} on "
                f"{sm_count} SMs make {q['waves']} waves, {q['efficiency']:.0%} of slots useful"
            )
    if r.bound == "memory":
        return (
            "memory-bound, yet slower than the copy rate: the kernel streams its operands less "
            "efficiently than a copy (more traffic than the ideal-cache bytes, or too few loads in flight)"
        )
    return (
        "compute-bound below the best shape's rate: blocking and packing fit this shape less well"
    )


def breakdown(
    head: Any, ceiling: dict[str, Any], kind: str, sm_count: int | None
) -> list[dict[str, Any]]:
    """From the dense peak down to the achieved figure, step by step; a step that was not
    measured says so and carries no number."""
    steps = [{"step": "dense peak", "tflops": head.peak_tflops, "note": head.peak_source}]
    if kind == "cuda" and pd.notna(head.sm_clock_mhz) and head.sm_clock_max_mhz:
        ratio = head.sm_clock_mhz / head.sm_clock_max_mhz
        steps.append(
            {
                "step": "at the SM clock under load",
                "tflops": head.peak_tflops * ratio,
                "note": f"{head.sm_clock_mhz:.0f} of {head.sm_clock_max_mhz:.0f} MHz ({ratio:.1%})",
            }
        )
    elif kind == "cuda":
        steps.append(
            {
                "step": "at the SM clock under load",
                "tflops": None,
                "note": "not measured (no NVML telemetry)",
            }
        )
    else:
        steps.append(
            {
                "step": "at the clock under load",
                "tflops": None,
                "note": "not measured; the peak already uses the all-core clock measured before the run, "
                "the AVX clock during it is not read",
            }
        )
    reference = next(s["tflops"] for s in reversed(steps) if s["tflops"] is not None)
    steps.append(
        {
            "step": "measured compute ceiling",
            "tflops": ceiling["tflops"],
            "note": f"best {head.dtype} shape measured, {'x'.join(map(str, ceiling['shape']))} "
            f"({ceiling['series']}): {ceiling['tflops'] / reference:.1%} of the step above",
        }
    )
    expected = ceiling["tflops"]
    if kind == "cuda" and sm_count:
        # The ceiling's own shape is quantised too: scale by the headline's efficiency over its.
        q = wave_quantisation(head.m, head.n, sm_count)
        q_best = wave_quantisation(ceiling["shape"][0], ceiling["shape"][1], sm_count)
        expected = ceiling["tflops"] * q["efficiency"] / q_best["efficiency"]
        steps.append(
            {
                "step": "tile and wave quantisation",
                "tflops": expected,
                "note": f"{q['tiles']} tiles of {TILE[0]}x{TILE[1]} (assumed) on {sm_count} SMs: "
                f"{q['waves']} waves, {q['efficiency']:.1%} of slots useful (the ceiling's shape: "
                f"{q_best['efficiency']:.1%})",
            }
        )
    else:
        steps.append(
            {"step": "tile and wave quantisation", "tflops": None, "note": "not modelled on CPUs"}
        )
    steps.append(
        {
            "step": "achieved",
            "tflops": head.achieved_tflops,
            "note": f"what remains: {head.achieved_tflops / expected:.1%} of the step above is achieved",
        }
    )
    return steps
