"""One timing abstraction for CPU and GPU: a Timer times one call of a function.

CPU work is synchronous, so a host clock around the call is right. GPU work is asynchronous, so
CUDA events recorded on the stream around the call, read after synchronising, are right, and
`time.perf_counter` alone would time only the launch."""

import math
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def seconds(self, work: Callable[[], object]) -> float: ...


class HostTimer:
    def seconds(self, work: Callable[[], object]) -> float:
        start = time.perf_counter()
        work()
        return time.perf_counter() - start


class CudaEventTimer:
    def __init__(self) -> None:
        import torch

        self._torch = torch

    def seconds(self, work: Callable[[], object]) -> float:
        cuda = self._torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        cuda.synchronize()  # nothing queued earlier lands inside the window
        start.record()
        work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


class MpsEventTimer:
    """Apple's GPU is asynchronous too: its own events around the call, read after a
    synchronise."""

    def __init__(self, mps=None) -> None:
        if mps is None:
            import torch

            mps = torch.mps
        self._mps = mps

    def seconds(self, work: Callable[[], object]) -> float:
        start = self._mps.Event(enable_timing=True)
        end = self._mps.Event(enable_timing=True)
        self._mps.synchronize()  # nothing queued earlier lands inside the window
        start.record()
        work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def timer_for(device_kind: str) -> Timer:
    return {"cuda": CudaEventTimer, "mps": MpsEventTimer}.get(device_kind, HostTimer)()


MAX_REPEATS = 10_000


def sample(
    work: Callable[[int], object],
    timer: Timer,
    warmup: int,
    repeats: int,
    min_seconds: float = 0.0,
) -> list[float]:
    """Warm up, then time at least `repeats` calls, and enough to fill `min_seconds` (a
    sustained window, so clocks and power settle and telemetry sees them); every sample is
    kept. `work(i)` gets the call's index so it can rotate among buffers."""
    warm = [timer.seconds(lambda i=i: work(i)) for i in range(warmup)]
    if min_seconds > 0 and warm:
        needed = math.ceil(min_seconds / max(min(warm), 1e-9))
        repeats = max(repeats, min(MAX_REPEATS, needed))
    return [timer.seconds(lambda i=i: work(warmup + i)) for i in range(repeats)]
