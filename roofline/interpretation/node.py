"""A node's GPUs, measured at once (roofline.measuring.benchmark.measure_node): each point has
a row per GPU. The device's figure of a point is its median GPU's row, a row that was measured
(the lower of the two middle ones on an even count), never an average; the other GPUs' rows
stay beside it in results.csv under a series of their own, so every reader of the "lab" or
"sustained" series sees one row a point. The report names the slowest GPU and the spread."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from roofline.interpretation.rows import Row

SUSTAINED = "sustained"  # the headline point's long window (roofline.measuring.measure)
OTHER_GPU = "-other-gpu"  # "lab-other-gpu": another GPU's row of a lab point


def other_gpu(series: str) -> str:
    """The series of another GPU's row of a point in `series`."""
    return series + OTHER_GPU


def is_other_gpu(series: pd.Series) -> pd.Series:
    """Which rows of a table are other GPUs' rows of a point (not the device's figure)."""
    return series.str.endswith(OTHER_GPU)


def median_gpus(rows: list[Row]) -> list[Row]:
    """`rows` with each point measured on several GPUs kept as its median GPU's row, the others
    moved to their `other_gpu` series (in place; rows of one device returned in their order).
    A sustained window's row is the GPU's whose burst of the point was kept: its drop from the
    burst is then one GPU's, not the spread between two."""
    points: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        if row.gpu is not None:
            points[(row.series, row.dtype, row.m, row.n, row.k, row.backend)].append(row)
    burst_gpu: dict[tuple, int | None] = {}
    for (series, *point), group in sorted(points.items(), key=lambda p: p[0][0] == SUSTAINED):
        measured = sorted(
            (r for r in group if r.achieved_tflops is not None), key=lambda r: r.achieved_tflops
        )
        # The median of the measured; where none was, the first GPU's row says why.
        kept = measured[(len(measured) - 1) // 2] if measured else group[0]
        if series == SUSTAINED:
            kept = next((r for r in group if r.gpu == burst_gpu.get(tuple(point))), kept)
        else:
            burst_gpu[tuple(point)] = kept.gpu
        for row in group:
            if row is not kept:
                row.series = other_gpu(row.series)
    return rows


@dataclass(frozen=True)
class NodeSpread:
    """One point across the GPUs of a node: the median (the device's figure), the slowest and
    the fastest, by GPU index and TFLOP/s."""

    gpus: int
    median: tuple[int, float]
    slowest: tuple[int, float]
    fastest: tuple[int, float]

    @property
    def spread(self) -> float:
        """(fastest - slowest) / fastest."""
        return (self.fastest[1] - self.slowest[1]) / self.fastest[1]


def node_spread(rows: pd.DataFrame, figure: Any) -> NodeSpread | None:
    """The spread across a node's GPUs of the point whose figure (the median GPU's row) is
    `figure`, from the device's rows; None where it was measured on one GPU."""
    series = str(getattr(figure, "series", ""))
    same = rows[
        (rows.device == figure.device)
        & rows.series.isin([series, other_gpu(series)])
        & (rows.status == "measured")
        & (rows.dtype == figure.dtype)
        & (rows.m == figure.m)
        & (rows.n == figure.n)
        & (rows.k == figure.k)
        & (rows.backend == figure.backend)
        & rows.gpu.notna()
    ]
    if len(same) < 2:
        return None
    by_rate = same.sort_values("achieved_tflops", kind="stable")
    slowest, fastest = by_rate.iloc[0], by_rate.iloc[-1]

    def gpu(row: Any) -> tuple[int, float]:
        return int(row.gpu), float(row.achieved_tflops)

    return NodeSpread(
        len(same), (int(figure.gpu), figure.achieved_tflops), gpu(slowest), gpu(fastest)
    )
