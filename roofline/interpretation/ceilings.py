"""Measured ceilings, the roofline's own prediction checked against measurement, and the gap
from the datasheet peak down to the achieved figure. Pure functions over results rows."""

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pandas as pd

from roofline.core.arithmetic import matmul_bytes, matmul_flops
from roofline.core.dtypes import LAB_DTYPE
from roofline.device.cache_ceilings import CacheBandwidth, binary_size
from roofline.interpretation import kernel_names
from roofline.interpretation.manifest import DeviceEntry
from roofline.interpretation.node import SUSTAINED, is_other_gpu

# The output tile assumed for tile and wave quantisation on GPUs where the row's kernel name
# gives none (a record from before kernels were recorded, a profiler that saw none): 128 x 256
# (M x N), a common cuBLAS tile for large 16-bit GEMMs on Ampere and Hopper. cuBLAS picks its
# own per shape, so this is a model, stated wherever it is used.
TILE = (128, 256)


def text_of(value: Any) -> str:
    """A text field of a row ("" where results.csv left it empty, read back as NaN)."""
    return value if isinstance(value, str) else ""


def number_of(value: Any) -> float | None:
    """A number field of a row (None where it is missing or empty)."""
    return None if value is None or pd.isna(value) else float(value)


def tile_source(tile: tuple[int, int] | None) -> str:
    """Where a quantisation's tile came from, as the page says it."""
    return "the tile of the kernel that ran" if tile else "assumed"


def ran_tile(row: Any) -> tuple[int, int] | None:
    """The output tile (M x N) of the kernel that ran for a row (or a Ceiling), where its
    recorded name gives one (roofline.interpretation.kernel_names); None where it does not."""
    name = text_of(getattr(row, "kernel", ""))
    return kernel_names.parse(name).output_tile if name else None


def headline(rows: pd.DataFrame, kind: str) -> SimpleNamespace | None:
    """The device's lab row: its headline dtype at the largest measured shape, through its
    fastest backend (which BLAS is fastest is a property of the machine)."""
    measured = rows[(rows.status == "measured") & (rows.dtype == LAB_DTYPE[kind])]
    if measured.empty:
        measured = rows[rows.status == "measured"]
    if measured.empty:
        return None
    ranked = measured.assign(size=measured.m * measured.n * measured.k)
    best = ranked.sort_values(["size", "achieved_tflops"], kind="stable").iloc[-1]
    return SimpleNamespace(**best.to_dict())


def lab_headline(rows: pd.DataFrame, name: str, entry: DeviceEntry) -> SimpleNamespace | None:
    """A device's headline row of the lab kernel (its manifest `entry`), or None when nothing
    of it was measured."""
    if entry.status != "measured":
        return None
    return headline(rows[(rows.device == name) & (rows.series == "lab")], entry.kind)


# SUSTAINED (roofline.interpretation.node): the series that times the headline point again in one
# long window, the same point as the burst, so it defines no ceiling and checks no prediction.


def ceiling_series(series: pd.Series) -> pd.Series:
    """The series whose points define and check the ceilings: the device's figures, but the
    sustained window's (the same point as the burst)."""
    return (series != SUSTAINED) & ~is_other_gpu(series)


def ceiling_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The best measured point per (device, dtype), over every series but the sustained window
    (and a node's other GPUs): its TFLOP/s is that dtype's measured compute ceiling."""
    measured = rows[(rows.status == "measured") & ceiling_series(rows.series)]
    return measured.loc[measured.groupby(["device", "dtype"]).achieved_tflops.idxmax()]


@dataclass(frozen=True)
class Ceiling:
    """A dtype's measured compute ceiling: its best point's TFLOP/s, and where it was measured."""

    tflops: float
    shape: tuple[int, int, int]  # M, N, K
    series: str
    backend: str
    kernel: str = ""  # the kernel that ran there, as recorded ("" where none was)


def measured_ceilings(rows: pd.DataFrame) -> dict[tuple[str, str], Ceiling]:
    """The measured compute ceiling per (device, dtype), and where it was measured."""
    return {
        (r.device, r.dtype): Ceiling(
            r.achieved_tflops,
            (r.m, r.n, r.k),
            r.series,
            r.backend,
            text_of(getattr(r, "kernel", "")),
        )
        for r in ceiling_rows(rows).itertuples()
    }


def predicted_seconds(
    flops: float, nbytes: float, ceiling_tflops: float, bandwidth_gbps: float
) -> float:
    """The roofline's time: whichever of compute and memory takes longer at the ceilings."""
    return max(flops / (ceiling_tflops * 1e12), nbytes / (bandwidth_gbps * 1e9))


def predictions(rows: pd.DataFrame, bandwidths: dict[str, float]) -> pd.DataFrame:
    """Each measured row with its predicted time from the measured ceilings (best TFLOP/s of
    its dtype, the device's copy bandwidth), `error` = measured / predicted - 1, `bound`, and
    `defines_ceiling`: the point whose TFLOP/s is its dtype's ceiling is predicted exactly by
    construction, so it checks nothing."""
    ceilings, best = measured_ceilings(rows), ceiling_rows(rows).index
    out = []
    checked = (rows.status == "measured") & ceiling_series(rows.series)
    for r in rows[checked & rows.device.isin(bandwidths)].itertuples():
        flops, nbytes = matmul_flops(r.m, r.n, r.k), matmul_bytes(r.m, r.n, r.k, r.dtype)
        ceiling, bandwidth = ceilings[(r.device, r.dtype)].tflops, bandwidths[r.device]
        predicted = predicted_seconds(flops, nbytes, ceiling, bandwidth)
        compute_s = flops / (ceiling * 1e12)
        out.append(
            {
                **r._asdict(),
                "predicted_s": predicted,
                "error": r.median_s / predicted - 1,
                "bound": "compute" if compute_s >= nbytes / (bandwidth * 1e9) else "memory",
                "defines_ceiling": r.Index in best,
            }
        )
    return pd.DataFrame(out)


@dataclass(frozen=True)
class Quantisation:
    """An output's tiles over the SMs, and the share of the launched tile slots doing useful
    work (edge padding and the last partial wave both waste slots)."""

    tile: tuple[int, int]
    tiles: int
    waves: int
    wave_efficiency: float
    padding_efficiency: float
    efficiency: float  # the two together


def wave_quantisation(m: int, n: int, sm_count: int, tile: tuple[int, int] = TILE) -> Quantisation:
    """Output tiles, waves of tiles over the SMs, and the fraction of the launched tile slots
    doing useful work."""
    tiles_m, tiles_n = math.ceil(m / tile[0]), math.ceil(n / tile[1])
    tiles = tiles_m * tiles_n
    waves = math.ceil(tiles / sm_count)
    padding = (m * n) / (tiles_m * tile[0] * tiles_n * tile[1])
    return Quantisation(
        tile=tile,
        tiles=tiles,
        waves=waves,
        wave_efficiency=tiles / (waves * sm_count),
        padding_efficiency=padding,
        efficiency=padding * tiles / (waves * sm_count),
    )


def why(
    r: Any,
    cache_bytes: int | None,
    overhead_s: float,
    sm_count: int | None,
    ceiling: Ceiling | None = None,
) -> str:
    """The likeliest cause of a large prediction error for one measured point, from its numbers.
    `overhead_s` is the fixed cost per call of its dtype, as the fastest call measured shows it
    (its measured time less the roofline's); `ceiling` the point that defines its dtype's."""
    nbytes = matmul_bytes(r.m, r.n, r.k, r.dtype)
    if ceiling and ceiling.shape == (r.m, r.n, r.k) and ceiling.backend != r.backend:
        return (
            f"the ceiling's own shape through another library: {r.backend} is slower here than "
            f"{ceiling.backend}, which defines the ceiling"
        )
    if r.error < 0 and cache_bytes and nbytes <= cache_bytes:
        return (
            f"faster than the memory roof: its {nbytes / 2**20:.3g} MiB of operands fit in the "
            f"{cache_bytes / 2**20:.0f} MiB cache, so the copy bandwidth is not its ceiling"
        )
    if overhead_s > 0.5 * r.median_s:
        return (
            f"fixed per-call cost (launch, dispatch, threading): the fastest {r.dtype} call "
            f"measured spends {overhead_s * 1e6:.3g} µs beyond its roofline time, "
            f"{overhead_s / r.median_s:.0%} of this {r.median_s * 1e6:.3g} µs call"
        )
    if sm_count:
        tile = ran_tile(r)
        q = wave_quantisation(r.m, r.n, sm_count, tile or TILE)
        if q.efficiency < 0.9:
            return (
                f"tile and wave quantisation: {q.tiles} tiles of {q.tile[0]}x{q.tile[1]} "
                f"({tile_source(tile)}) on {sm_count} SMs make {q.waves} waves, "
                f"{q.efficiency:.0%} of slots useful"
            )
    if r.bound == "memory":
        return (
            "memory-bound, yet slower than the copy rate: the kernel streams its operands less "
            "efficiently than a copy (more traffic than the ideal-cache bytes, or too few loads in flight)"
        )
    return (
        "compute-bound below the best shape's rate: blocking and packing fit this shape less well"
    )


def per_call_overheads(pred: pd.DataFrame) -> dict[str, float]:
    """Per dtype, the fixed cost of one call: the fastest call's measured time less its
    roofline time (0 when the roofline accounts for all of it)."""
    fastest = pred.loc[pred.groupby("dtype").median_s.idxmin()]
    return {r.dtype: max(0.0, r.median_s - r.predicted_s) for r in fastest.itertuples()}


# A cache level whose read is no more than this over DRAM's is not told apart from DRAM: its
# working set went past the cache, as where the OS reports a size the CPU does not have (this
# project's 2-vCPU VM reads 480 MiB of L3 in sysfs and measures it at DRAM's speed).
DISTINCT_OVER_DRAM = 1.25


def past_the_cache(caches: list[CacheBandwidth]) -> list[CacheBandwidth]:
    """A CPU's recorded cache ceilings (roofline.device.cache_ceilings.measure_cache_bandwidth) with
    each level whose figure DRAM's matches (within DISTINCT_OVER_DRAM) not used: no ceiling is
    drawn for it, and its reason gives both figures and the size read. The record keeps the
    figure as measured."""
    dram = next((c["gbps"] for c in caches if c["level"] == "DRAM"), None)
    if dram is None:
        return caches
    out = []
    for entry in caches:
        gbps = entry["gbps"]
        if entry["level"] == "DRAM" or gbps is None or gbps > DISTINCT_OVER_DRAM * dram:
            out.append(entry)
            continue
        size = binary_size(entry.get("cache_bytes", 0))
        why = (
            f"not used: {gbps:.0f} GB/s, no faster than DRAM's {dram:.0f} GB/s, so its working "
            f"set went past the cache: the {size} read from {entry.get('sizes_from', '?')} may "
            "not be what this CPU has (a VM's)"
        )
        out.append(entry | {"gbps": None, "reason": why})
    return out
