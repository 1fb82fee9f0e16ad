"""One timing abstraction for CPU and GPU: a Timer times a run of calls, each on its own.

CPU work is synchronous, so a host clock around each call is right. GPU work is asynchronous:
as triton's do_bench and mamf-finder do it, the calls are queued back to back, each between its
own pair of device events, with one synchronise at the end, so the host's dispatch of the next
call overlaps the device's work on this one instead of landing inside its window (a
synchronise before each call would put it there). `time.perf_counter` alone would time only the
launches."""

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

Work = Callable[[int], object]  # one call; its argument is the call's index (operand rotation)


class Timer(Protocol):
    name: str  # how the row says it was timed

    def times(self, work: Work, first: int, count: int) -> list[float]:
        """Seconds of each of `count` calls: work(first), work(first + 1), ..."""
        ...


class HostTimer:
    name = "host clock"

    def times(self, work: Work, first: int, count: int) -> list[float]:
        out = []
        for i in range(first, first + count):
            start = time.perf_counter()
            work(i)
            out.append(time.perf_counter() - start)
        return out


class EventTimer:
    """Device events around each call, queued back to back; one synchronise at the end.
    `device` is torch.cuda or torch.mps (or a stand-in with Event and synchronize)."""

    def __init__(self, device: Any, name: str) -> None:
        self.device, self.name = device, name

    def times(self, work: Work, first: int, count: int) -> list[float]:
        events = [
            (self.device.Event(enable_timing=True), self.device.Event(enable_timing=True))
            for _ in range(count)
        ]
        self.device.synchronize()  # nothing queued earlier lands inside the first window
        for (start, end), i in zip(events, range(first, first + count), strict=True):
            start.record()
            work(i)
            end.record()
        self.device.synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in events]  # ms -> s


MAX_CALLS = 10_000


def warmed(timer: Timer, work: Work, warmup: int, warmup_seconds: float) -> list[float]:
    """Untimed-for-the-record calls first (library heuristics, caches, clocks ramping): at least
    `warmup` calls, and more until `warmup_seconds` of them ran back to back (clocks settle
    in about a second; a count alone leaves a fast kernel's first samples at cold clocks)."""
    spent = timer.times(work, 0, warmup) if warmup else []
    while spent and sum(spent) < warmup_seconds and len(spent) < MAX_CALLS:
        more = math.ceil((warmup_seconds - sum(spent)) / max(min(spent), 1e-9))
        spent += timer.times(work, len(spent), min(more, MAX_CALLS - len(spent)))
    return spent


def sample(
    work: Work,
    timer: Timer,
    warmup: int,
    repeats: int,
    min_seconds: float = 0.0,
    warmup_seconds: float = 0.0,
    window: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> tuple[list[float], Any]:
    """Warm up, then time at least `repeats` calls and enough to fill `min_seconds` (a
    sustained window in which clocks and power settle), inside `window()` (telemetry of the
    timed calls only). Every sample is kept. Returns (samples, what the window yielded)."""
    by_time = min_seconds > 0 or warmup_seconds > 0
    # A window by time needs one call's time, however few warm-up calls were asked for.
    warm = warmed(timer, work, max(warmup, 1) if by_time else warmup, warmup_seconds)
    count = repeats
    if min_seconds > 0 and warm:
        count = max(repeats, min(MAX_CALLS, math.ceil(min_seconds / max(min(warm), 1e-9))))
    with (window or contextlib.nullcontext)() as watch:
        samples = timer.times(work, len(warm), count)
    return samples, watch
