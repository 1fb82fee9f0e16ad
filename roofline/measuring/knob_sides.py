"""A knob's two sides, each a way to run one matmul: made (its operands, the product checked
against float64) and timed a round at a time, so that roofline.measuring.knobs can interleave
them. What every knob shares: its settings, a side timed in this process (under a thread count,
a math mode, TunableOp), the matmul a side runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from roofline.device.timing import BenchSettings, Timer, sample
from roofline.measuring.matmul import Prepared, prepare_matmul
from roofline.measuring.measure import Target


@dataclass
class Side:
    """One way to run the knob's matmul: checked against float64 when it was made; `measure`
    times one round of it, (seconds, first round) -> per-call samples."""

    label: str
    check_error: float
    measure: Callable[[float, bool], list[float]]
    windows: list[Any] = field(default_factory=list)  # each round's telemetry, where watched


@dataclass
class Knob:
    name: str
    baseline: str
    variant: str
    dtype: str
    shape: list[int]
    # Whether the lab kernel already runs the variant (True), leaves it unturned (False), or
    # the knob says nothing of it (None: a methodology or a small-shape effect).
    lab_turns: bool | None
    sides: Callable[[], tuple[Side, Side]]
    variant_shape: list[int] | None = None  # the variant's, where not `shape`


@dataclass
class Settings:
    """What every side shares: the bench's settings (seed, warm-up, check) with the knobs' own
    window in `bench.min_seconds` (per side, over its rounds), and how many rounds share it."""

    bench: BenchSettings
    rounds: int
    threads: int = 1  # a CPU's cores, for a side measured in a process of its own


def round_window(bench: BenchSettings, seconds: float, first: bool) -> BenchSettings:
    """One round of a side: one call at least, `seconds` in all. Its first round warms up as
    the benchmark does; a later one follows the other side's round: one call."""
    warm = {} if first else {"warmup": 1, "warmup_seconds": 0.0}
    return replace(bench, repeats=1, min_seconds=seconds, **warm)


def in_process(
    label: str,
    prepared: Prepared,
    timer: Timer,
    s: Settings,
    around: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    per_call: int = 1,
    monitor: Callable[[], Any] | None = None,
) -> Side:
    """A side timed here, under `around` (a thread count, a math mode, TunableOp); a timed call
    that stands for `per_call` calls (a CUDA graph's replay) is divided by them. `monitor`: the
    device's telemetry over each round (Kind.monitor), kept in the side's `windows`."""

    def measure(seconds: float, first: bool) -> list[float]:
        window = round_window(s.bench, seconds, first)
        with around():
            timed = sample(prepared.call, timer, window, window=monitor)
        if timed.watch is not None:
            side.windows.append(timed.watch)
        return [t / per_call for t in timed.samples]

    side = Side(label, prepared.check_error, measure)
    return side


def matmul(
    target: Target, dtype: str, shape: list[int], settings: Settings, **options: Any
) -> Prepared:
    return prepare_matmul(
        *shape,
        dtype,
        target.device,
        settings.bench,
        cache_bytes=target.cache_bytes,
        reference=target.kind.reference,
        **options,
    )


@contextlib.contextmanager
def threads(count: int) -> Iterator[None]:
    """Every library a CPU's backends call on `count` threads: torch's own pool, and the BLAS
    numpy loads (threadpoolctl), restored after."""
    from threadpoolctl import threadpool_limits  # the CPU's only: a GPU image may lack it

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        with threadpool_limits(limits=count, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)
