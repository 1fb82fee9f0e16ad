"""A CPU's gap breakdown, measured in every run through the headline's own library: every thread
and one thread at one shape (threading), and one thread with its operands in L2 (the library's
micro-kernel, packing and memory traffic apart). The three sides run interleaved round by round,
so a drift of the machine hits all of them alike; every sample is kept."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import replace

from roofline.core import arithmetic as ar
from roofline.core.dtypes import LAB_DTYPE
from roofline.core.measurement import Measurement, StepSides
from roofline.device.description import CpuInfo
from roofline.device.timing import BenchSettings
from roofline.measuring.knob_sides import Settings, Side, in_process, matmul, threads
from roofline.measuring.matmul import WrongResult
from roofline.measuring.measure import CALL_ERRORS, Target, headline_point, raised, rate

# What the three sides may take on top of the headline, in seconds: one thread at the lab's
# 8192^3 takes 11 s a call on two cores, so the sides run at the largest shape this allows.
BUDGET_S = 10.0
ROUNDS = 3
IN_L2_ROUND_S = 0.3  # the in-L2 side's window a round: many calls of a small product
STEP = 64  # the sides' shape is a multiple of this


def sides_shape(
    lab: list[int], tflops: float, threads: int, budget_s: float = BUDGET_S
) -> list[int]:
    """The lab's shape scaled down (never up) until every thread's and one thread's calls fit
    `budget_s` at the headline's rate `tflops`: a warm-up and a timed call a round
    (roofline.measuring.knob_sides.round_window), one thread at worst 1/threads of every
    thread's rate. A multiple of STEP in each dimension."""
    calls = 2 * ROUNDS * (1 + threads)
    seconds = calls * ar.matmul_flops(*lab) / (tflops * 1e12)
    scale = (budget_s / seconds) ** (1 / 3)
    if scale >= 1:
        return list(lab)
    return [min(size, max(STEP, math.floor(size * scale / STEP) * STEP)) for size in lab]


def l2_bytes(found: CpuInfo) -> int | None:
    return next((c["size_bytes"] for c in found.get("caches", []) if c["level"] == "L2"), None)


SIDES = ("every_thread", "one_thread", "in_l2")


def sides_record(
    head: Measurement | None,
    threads: int,
    reason: str = "",
    shape: list[int] | None = None,
    in_l2: list[int] | None = None,
    samples: dict[str, list[list[float]]] | None = None,
    shares: dict[str, list[float]] | None = None,
) -> StepSides:
    """The sides as the record keeps them; without samples, not measured, and `reason` why."""
    samples = samples or {}
    record: StepSides = {
        "backend": head.backend if head else "",
        "dtype": head.dtype if head else LAB_DTYPE["cpu"],
        "threads": threads,
        "shape": shape or [],
        "in_l2": in_l2 or [],
        "every_thread_s": samples.get("every_thread", []),
        "one_thread_s": samples.get("one_thread", []),
        "in_l2_s": samples.get("in_l2", []),
        "cpu_shares": shares or {},
    }
    if reason:
        record["reason"] = reason
    return record


def measure_steps(
    target: Target, found: CpuInfo, rows: list[Measurement], bench: BenchSettings
) -> StepSides:
    """The three sides through the headline's library, interleaved; not measured, with the
    reason, where there is no headline or no L2 size, or a side's product is wrong or refused."""
    head = headline_point(rows, LAB_DTYPE["cpu"])
    cores = found["logical_cores"]
    if head is None:
        return sides_record(head, cores, "no float32 headline was measured to break down")
    l2 = l2_bytes(found)
    square = ar.square_in(l2) if l2 else 0
    if not square:
        known = "the probe read no L2 size" if l2 is None else f"{l2:,} bytes: too small"
        return sides_record(head, cores, f"no square fits in this CPU's L2 ({known})")
    shape = sides_shape([head.m, head.n, head.k], rate(head), cores)
    s = Settings(replace(bench, warmup=1, warmup_seconds=0.0), ROUNDS)
    timer = target.kind.timer()

    def side(label: str, size: list[int], count: int, **options: object) -> Side:
        prepared = matmul(target, head.dtype, size, s, backend=head.backend, **options)
        return in_process(label, prepared, timer, s, functools.partial(threads, count))

    samples: dict[str, list[list[float]]] = {key: [] for key in SIDES}
    shares: dict[str, list[float]] = {key: [] for key in SIDES}
    try:
        sides = {
            "every_thread": (side("every thread", shape, cores), 0.0, cores),
            "one_thread": (side("one thread", shape, 1), 0.0, 1),
            # One operand set, so that it stays in L2.
            "in_l2": (side("one thread in L2", [square] * 3, 1, sets=1), IN_L2_ROUND_S, 1),
        }
        for round_ in range(ROUNDS):
            for key, (timed, seconds, count) in sides.items():
                cpu, wall = time.process_time(), time.perf_counter()
                samples[key].append(timed.measure(seconds, round_ == 0))
                # Our CPU time over the round's wall time on its threads: under 1 where others
                # took the cores (roofline.interpretation.noise reads it as a row's cpu_share).
                share = (time.process_time() - cpu) / ((time.perf_counter() - wall) * count)
                shares[key].append(round(share, 4))
    except WrongResult as err:
        return sides_record(head, cores, f"wrong result, not timed: {err}")
    except CALL_ERRORS as err:
        return sides_record(head, cores, f"the call raised: {raised(err)}")
    return sides_record(head, cores, "", shape, [square] * 3, samples, shares)
