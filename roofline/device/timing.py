"""One timing abstraction for CPU and GPU: a Timer times a run of calls, each on its own.

CPU work is synchronous, so a host clock around each call is right. GPU work is asynchronous:
as triton's do_bench and mamf-finder do it, the calls are queued back to back, each between its
own pair of device events, with one synchronise at the end, so the host's dispatch of the next
call overlaps the device's work on this one instead of landing inside its window (a
synchronise before each call would put it there). `time.perf_counter` alone would time only the
launches."""

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

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


# At most this many calls in a warm-up or a timed window (the samples, and a GPU's events, are
# kept in memory): a 4 us kernel then fills 0.04 s, and a cut window says so (TimedWindow.cut).
MAX_CALLS = 10_000


@dataclass
class BenchSettings:
    """How every point is measured: the pipeline's `bench` (its Hydra schema,
    roofline/configuration/measuring_config.py, is this class; conf/config.yaml sets it), the GPU suite's,
    and, each with its own window put in by `dataclasses.replace`, the sweep's and the knobs'.
    Defined once, here, so that no copy of it times differently; standard library only, for a bare
    GPU image."""

    seed: int = 0  # inputs are torch.randn from this seed, never zeros
    warmup: int = 3  # untimed calls first (library heuristics, caches, clocks ramping)...
    # ...and warm-up calls back to back until this many seconds ran: clocks settle in about a
    # second, so a count alone leaves a fast GPU kernel's first samples at cold clocks.
    warmup_seconds: float = 1.0
    repeats: int = 10
    # Rows of C checked against a float64 reference before timing.
    check_rows: int = 16
    # Keep timing past `repeats` until this many seconds are covered: a sustained window in
    # which clocks and power settle (a 1 ms GPU kernel x 10 is a burst, not a measurement).
    min_seconds: float = 2.0
    # Size of the buffer copied to measure achievable memory bandwidth.
    copy_mib: int = 1024
    # After the points, the benchmark times the headline point (the lab dtype at its largest
    # shape, through torch) again in one window this long, kept as the series "sustained": a
    # window of min_seconds is a burst, before a GPU's power cap and heat have settled its
    # clock; a minute shows where they settle, NVML saying why. GPUs only, unless sustained_cpu:
    # a laptop CPU's run stays as short as it was. 0: never. Not a timer setting: `sample` never
    # reads it (the benchmark passes it as min_seconds of that one window).
    sustained_seconds: float = 60.0
    sustained_cpu: bool = False  # a CPU device's sustained window too (when asked)

    def sustained_for(self, kind: str) -> float:
        """The seconds of the sustained window on a device of this kind (cpu, cuda, mps): 0
        for none."""
        return self.sustained_seconds if kind != "cpu" or self.sustained_cpu else 0.0


@dataclass
class HostReading:
    """The host at one instant, as the OS reports it; None where it does not (no /proc on macOS
    or Windows; gVisor's /proc/stat is all zeros)."""

    wall_s: float
    cpu_s: float  # this process's CPU time, user + sys, all its threads
    runnable: int | None  # threads runnable on the machine, ours included (procs_running)
    own_runnable: int | None  # ours among them (/proc/self/task/*/stat, state R)
    steal_s: float | None  # time the hypervisor took from every core, so far
    idle_s: float | None  # time every core was idle (idle + iowait), so far
    cores: int | None  # the cores those two are counted over


def _own_runnable(proc: Path) -> int | None:
    try:
        states = [
            (task / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
            for task in (proc / "self" / "task").iterdir()
        ]
    except (OSError, IndexError):  # no /proc, or a thread that ended while being read
        return None
    return states.count("R")


def our_cpus() -> set[int] | None:
    """The CPUs this process may run on (None where the OS does not say)."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def read_host(proc: Path = Path("/proc"), cpus: set[int] | None = None) -> HostReading:
    """This process's CPU time, and the machine's runnable threads, stolen and idle time, now.
    Idle and steal are counted over `cpus` (default: those this process may run on), so a
    competitor on our one CPU under `taskset` is not hidden by the idle CPU we may not use."""
    wall, cpu = time.perf_counter(), time.process_time()
    cpus = our_cpus() if cpus is None else cpus
    runnable = steal = idle = cores = None
    try:
        lines = (proc / "stat").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    tick = os.sysconf("SC_CLK_TCK") if lines else 1  # the values are in clock ticks
    for line in lines:
        name, *values = line.split() or [""]
        if name == "procs_running" and values and int(values[0]) > 0:
            runnable = int(values[0])  # 0 cannot be real: this reader is running (gVisor's is)
        elif not name.startswith("cpu") or name == "cpu" or len(values) < 8:
            continue
        elif (cpus is None or int(name[3:]) in cpus) and any(int(v) for v in values):
            steal = (steal or 0) + int(values[7]) / tick
            idle = (idle or 0) + (int(values[3]) + int(values[4])) / tick
            cores = (cores or 0) + 1
    own = _own_runnable(proc) if runnable is not None else None
    return HostReading(wall, cpu, runnable, own, steal, idle, cores if steal is not None else None)


@dataclass
class TimedWindow:
    """What the timed window was: its length, whether the call cap cut it short of the seconds
    asked, and how much of the host it had. Measurements only: what is noisy is the aggregate's
    to say (roofline.interpretation.rows)."""

    seconds: float  # wall time of the timed calls, host clock
    cut: str = ""  # non-empty: the cap stopped it short of min_seconds
    cpu_share: float | None = None  # our CPU time / (wall x threads); None: no threads given
    idle: float | None = None  # the share of every core's time that was idle
    other_runnable: int | None = None  # other threads runnable at both ends (the fewer)
    steal: float | None = None  # the share of every core's time the hypervisor took


def host_window(start: HostReading, end: HostReading, threads: int | None) -> TimedWindow:
    """The window between two readings: CPU share over `threads` threads (the CPU device uses
    every logical core), idle and steal over wall x cores, others runnable at both ends (one
    that ran at one end only, a shell command, did not hold the window)."""
    wall = end.wall_s - start.wall_s
    share = (end.cpu_s - start.cpu_s) / (wall * threads) if threads and wall > 0 else None
    others = [
        max(0, r.runnable - r.own_runnable)
        for r in (start, end)
        if r.runnable is not None and r.own_runnable is not None
    ]

    def of_cores(before: float | None, after: float | None) -> float | None:
        if before is None or after is None or not end.cores or wall <= 0:
            return None
        return min(1.0, max(0.0, after - before) / (wall * end.cores))  # ticks vs perf_counter

    return TimedWindow(
        wall,
        cpu_share=share,
        idle=of_cores(start.idle_s, end.idle_s),
        other_runnable=min(others) if len(others) == 2 else None,
        steal=of_cores(start.steal_s, end.steal_s),
    )


class Timed(NamedTuple):
    """What `sample` returns."""

    samples: list[float]  # every timed call
    watch: Any  # what the telemetry window yielded (None without one)
    window: TimedWindow


def warmed(timer: Timer, work: Work, warmup: int, warmup_seconds: float) -> list[float]:
    """Untimed-for-the-record calls first (library heuristics, caches, clocks ramping): at least
    `warmup` calls, and more until `warmup_seconds` of them ran back to back (clocks settle
    in about a second; a count alone leaves a fast kernel's first samples at cold clocks)."""
    spent = timer.times(work, 0, min(warmup, MAX_CALLS)) if warmup > 0 else []
    while spent and (more := calls_to_fill(warmup_seconds - sum(spent), min(spent), len(spent))):
        spent += timer.times(work, len(spent), more)
    return spent


def calls_to_fill(seconds: float, fastest: float, made: int = 0) -> int:
    """Calls of `fastest` seconds that fill `seconds`, within the cap less the `made` so far
    (none for NaN seconds; the cap for infinite ones)."""
    if not seconds > 0:
        return 0
    left, wanted = max(0, MAX_CALLS - made), seconds / max(fastest, 1e-9)
    return math.ceil(wanted) if wanted < left else left


def sample(
    work: Work,
    timer: Timer,
    bench: BenchSettings,
    window: Callable[[], contextlib.AbstractContextManager] | None = None,
    threads: int | None = None,
) -> Timed:
    """Warm up, then time at least `bench.repeats` calls and enough to fill
    `bench.min_seconds` (a sustained window in which clocks and power settle), inside
    `window()` (telemetry of the timed calls only). Every sample is kept. `threads`: the host
    threads the calls run on (a CPU device's), for the share of the host the window had; None
    for a GPU, whose events time the device whatever the host does."""
    warmup, repeats = bench.warmup, bench.repeats
    min_seconds, warmup_seconds = bench.min_seconds, bench.warmup_seconds
    by_time = min_seconds > 0 or warmup_seconds > 0
    # A window by time needs one call's time, however few warm-up calls were asked for.
    warm = warmed(timer, work, max(warmup, 1) if by_time else warmup, warmup_seconds)
    count = max(repeats, calls_to_fill(min_seconds, min(warm))) if warm else repeats
    count = min(count, MAX_CALLS)  # whatever was asked: the samples are kept in memory
    with (window or contextlib.nullcontext)() as watch:
        start = read_host()
        samples = timer.times(work, len(warm), count)
        # The count came from the warm-up, whose fastest call can be a cold one (warmup=1): top
        # the window up at its own calls' pace until it holds min_seconds, or the cap stops it.
        while samples and (
            more := calls_to_fill(min_seconds - sum(samples), min(samples), len(samples))
        ):
            samples += timer.times(work, len(warm) + len(samples), more)
        end = read_host()
    timed = host_window(start, end, threads)
    cap = f"cut by the {MAX_CALLS:,}-call cap"
    if sum(samples) < min_seconds:
        timed.cut = f"{sum(samples):.2g} s of the {min_seconds:g} s asked: {cap}"
    elif repeats > len(samples):
        timed.cut = f"{len(samples):,} of the {repeats:,} calls asked: {cap}"
    return Timed(samples, watch, timed)
