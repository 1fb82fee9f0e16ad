"""Measure points on one device: where the kernels run (a Target), one (dtype, shape) point,
and the copy that gives the memory ceiling. Measurements only: peaks and MFU are applied by
the aggregate stage.

Needs torch only (nvidia-ml-py for GPU telemetry), so the GPU suite runs it on a bare image."""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch

from roofline.core import arithmetic as ar
from roofline.core.dtypes import DTYPES, LAB_DTYPE
from roofline.core.errors import RooflineError
from roofline.core.measurement import CopyCeiling, Measurement, empty, measurement
from roofline.device import backends, kinds, telemetry
from roofline.device.description import CpuInfo, Found, GpuInfo
from roofline.device.timing import BenchSettings
from roofline.measuring.matmul import (
    Point,
    WrongResult,
    float32_math,
    measure_copy,
    measure_matmul,
    prepare_matmul,
    unsupported_reason,
)


@dataclass
class Target:
    """Where the kernels run (a kind of device), and what is known of it before they do."""

    kind: kinds.Kind
    cache_bytes: int | None  # last-level cache (CPU) or L2 (GPU), for buffer rotation
    memory_bytes: int
    native: set[str] | None  # CPU dtypes with native hardware support
    threads: int | None = None  # the host threads a CPU's kernels run on (every logical core)

    @property
    def device(self) -> str:
        """The torch device its tensors live on."""
        return self.kind.tensors()

    @property
    def monitor(self) -> Callable[[], Any] | None:
        return self.kind.monitor()


def native_cpu_dtypes(flags: set[str]) -> set[str]:
    """The dtypes this CPU runs natively: float32 everywhere, the others by their flags."""
    return {
        name for name, d in DTYPES.items() if d.cpu_everywhere or ar.cpu_flop_per_cycle(name, flags)
    }


def cpu_target(found: CpuInfo) -> Target:
    # Every core, for every library: torch.utils.benchmark would use one thread, and numpy's
    # BLAS follows its own environment variables.
    from threadpoolctl import threadpool_limits  # the CPU's only: a GPU image may lack it

    torch.set_num_threads(found["logical_cores"])
    threadpool_limits(limits=found["logical_cores"], user_api="blas")
    native = native_cpu_dtypes(set(found["isa"]))
    cores = found["logical_cores"]
    return Target(kinds.Kind(), found.get("cache_bytes"), found["memory_bytes"], native, cores)


def gpu_target(found: GpuInfo, log: Callable[[str], None]) -> Target:
    kind = kinds.gpu(found)  # an NVIDIA GPU, or an AMD one through ROCm's torch.cuda
    if kind.telemetry_error:
        log(kind.telemetry_error)
    return Target(kind, found.get("l2_bytes"), found["memory_bytes"], None)


def target_for(kind: str, found: Found, log: Callable[[str], None]) -> Target:
    """`found` is the device's part of the description, of the kind `kind` says."""
    if kind == "mps":  # no cache size to rotate past: unified memory
        return Target(kinds.Mps(), None, found["memory_bytes"], None)
    if kind == "cpu":
        return cpu_target(cast(CpuInfo, found))
    return gpu_target(cast(GpuInfo, found), log)


# What a failing library call raises, recorded as the point's failure, not the stage's (out of
# memory, a RuntimeError too, and a refusal, a RooflineError, ConfigError a ValueError too, are
# caught before them: they end the stage). ValueError: a user's backend refusing its operands.
CALL_ERRORS = (RuntimeError, AttributeError, TypeError, NotImplementedError, ValueError)


def raised(err: BaseException) -> str:
    """An exception in one line of a row's reason."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


def measure_point(
    name: str,
    dtype: str,
    shape: list[int],
    target: Target,
    bench: BenchSettings,
    found: Found,
    backend: str = "torch",
    calls_per_sample: int = 1,
    log: Callable[[str], None] | None = None,
    later: list[Callable[[], None]] | None = None,
) -> Measurement:
    """One (dtype, shape, backend): skipped, failed (wrong result, never timed) or measured.
    `calls_per_sample`: calls in each timed sample (roofline.measuring.matmul.measure_matmul).
    A measured point records the kernel that ran (`kernel_that_ran`); `log` says why where it
    could not be learnt (standard error by default). Where that takes the GPU's profiler,
    `later` gets the naming instead, to run once every window is timed: CUPTI stays subscribed
    for the rest of the process (kineto tears it down only under TEARDOWN_CUPTI=1) and slows
    every launch after it (pytorch#144455)."""
    gpu = cast(GpuInfo, found)  # its GPU fields, read with .get: a CPU's part has none
    skip = backends.unsupported(backend, dtype, target.kind.name) or unsupported_reason(
        dtype,
        target.kind.name,
        target.native,
        gpu.get("compute_capability"),
        shape,
        gpu.get("architecture"),
    )
    if skip:
        return empty(name, dtype, shape, "skipped", skip, backend)
    try:
        point = measure_matmul(
            *shape,
            dtype,
            target.kind,
            bench,
            cache_bytes=target.cache_bytes,
            monitor=target.monitor,
            backend=backend,
            threads=target.threads,
            calls_per_sample=calls_per_sample,
        )
    except WrongResult as err:
        return empty(name, dtype, shape, "failed", f"wrong result, not timed: {err}", backend)
    except (torch.OutOfMemoryError, RooflineError):
        raise  # the stage's to report, with what it kept
    except CALL_ERRORS as err:
        # A library that refuses this dtype here (cuBLAS, a scaled-matmul API that differs on
        # this torch) fails this point only: the others are still measured and recorded.
        return empty(name, dtype, shape, "failed", f"the call raised: {raised(err)}", backend)
    summary = telemetry.window_telemetry(
        point.window, gpu.get("max_sm_clock_mhz"), gpu.get("power_limit_w")
    )
    where = f"{name} {dtype} {shape} ({backend})"
    row = measurement(
        name,
        dtype,
        shape,
        point.samples,
        point.check_error,
        summary,
        backend,
        point.timing,
        point.timed,
    )

    if later is None or point.kernel is not None:  # learnt already (a CPU's): no profiler
        row.kernel = kernel_that_ran(target.kind, point, dtype, backend, where, log or to_stderr)
    else:  # on operands made then: this point's are freed now, as it ends
        later.append(lambda: named_later(row, target, bench, backend, where, log or to_stderr))
    return row


def named_later(
    row: Measurement,
    target: Target,
    bench: BenchSettings,
    backend: str,
    where: str,
    log: Callable[[str], None],
) -> None:
    """The kernel a measured row's call runs, learnt on one operand set made (and checked) now."""
    try:
        made = prepare_matmul(
            row.m,
            row.n,
            row.k,
            row.dtype,
            target.device,
            bench,
            cache_bytes=target.cache_bytes,
            backend=backend,
            sets=1,
            reference=target.kind.reference,
        )
    except (WrongResult, *CALL_ERRORS) as err:
        log(f"{where}: the kernel that ran is not recorded: {raised(err)}")
        return
    point = Point([], made.check_error, made.sets, call=made.call)
    row.kernel = kernel_that_ran(target.kind, point, row.dtype, backend, where, log)


def name_kernels(later: list[Callable[[], None]]) -> None:
    """Name the kernels whose naming waited for every window to be timed."""
    for name_kernel in later:
        name_kernel()
    later.clear()


def rate(row: Measurement) -> float:
    """A measured row's TFLOP/s: its median call."""
    return ar.tflops(ar.matmul_flops(row.m, row.n, row.k), ar.summarize(row.samples_s)["median_s"])


def headline_point(rows: list[Measurement], dtype: str) -> Measurement | None:
    """The headline as the report picks it (roofline.interpretation.ceilings.headline): the lab
    dtype at its largest measured shape, through its fastest library."""
    measured = [r for r in rows if r.status == "measured" and r.series == "lab" and r.samples_s]
    measured = [r for r in measured if r.dtype == dtype]
    if not measured:
        return None
    return max(measured, key=lambda r: (r.m * r.n * r.k, rate(r)))


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def kernel_that_ran(
    kind: kinds.Kind,
    point: Point,
    dtype: str,
    backend: str,
    where: str,
    log: Callable[[str], None],
) -> str:
    """The kernel the timed call runs, as its library names it: learnt from the check's call
    where the kind learns it there (a CPU's), else from one more call after the timed window
    (kinds.Kind.kernel), under the same float32 math; "" where the library cannot say (a
    function of your own), or where learning it failed, which `log` says: the point's figures
    stand either way."""
    learnt = point.kernel
    if learnt is None and point.call is not None:
        call = point.call
        try:
            with float32_math(dtype):
                learnt = kind.kernel(lambda: call(0), backend) or ""
        except Exception as err:  # whatever it was, the measurement stands without a kernel name
            learnt = err
    if isinstance(learnt, Exception):
        log(f"{where}: the kernel that ran is not recorded: {raised(learnt)}")
        return ""
    return learnt or ""


# A sustained window keeps about this many samples, each the mean of as many calls as fill it:
# a minute of 1.4 ms calls is 43,000 calls, past the cap on a window's samples (MAX_CALLS), and
# every sample kept is written in the record.
SUSTAINED_SAMPLES = 1000


def measure_sustained(
    name: str,
    rows: list[Measurement],
    target: Target,
    bench: BenchSettings,
    found: Found,
    log: Callable[[str], None] = print,
    later: list[Callable[[], None]] | None = None,
) -> Measurement | None:
    """The headline point of `rows` (the kind's lab dtype at its largest shape, through torch)
    again, in one window of the bench's sustained seconds, as the series "sustained", with its
    telemetry over that window. None where this kind has no sustained window, or the device no
    such point; skipped where its burst was not measured."""
    seconds = bench.sustained_for(target.kind.name)
    dtype = LAB_DTYPE[target.kind.name]
    candidates = [r for r in rows if (r.backend, r.series, r.dtype) == ("torch", "lab", dtype)]
    if seconds <= 0 or not candidates:
        if seconds > 0:
            log(f"{name}: no {dtype} point through torch, so no sustained window")
        return None

    def size(r: Measurement) -> int:
        return r.m * r.n * r.k

    burst = max(candidates, key=size)  # the first of the largest: the configured order
    shape = [burst.m, burst.n, burst.k]
    if burst.status != "measured":
        reason = f"its burst was not measured ({burst.status}: {burst.reason})"
        point = empty(name, dtype, shape, "skipped", reason)
    else:
        per_call = statistics.median(burst.samples_s)
        calls = max(1, math.ceil(seconds / (per_call * SUSTAINED_SAMPLES)))
        window = dataclasses.replace(bench, min_seconds=seconds)
        log(f"{name} {dtype} {shape}: a sustained window of {seconds:g} s ({calls} calls a sample)")
        point = measure_point(
            name, dtype, shape, target, window, found, "torch", calls, log=log, later=later
        )
    point.series = "sustained"
    return point


def describe(point: Measurement) -> str:
    """One log line for a point: what was measured (its interpretation is the aggregate's)."""
    where = f"{point.device} {point.dtype} {[point.m, point.n, point.k]} ({point.backend})"
    if point.status != "measured":
        return f"{where}: {point.status}: {point.reason}"
    stats = ar.summarize(point.samples_s)
    rate = ar.tflops(ar.matmul_flops(point.m, point.n, point.k), stats["median_s"])
    text = (
        f"{where}: {rate:.4g} TFLOP/s (median {stats['median_s']:.4g} s, spread "
        f"{stats['spread']:.1%}, {len(point.samples_s)} reps)"
    )
    if point.sm_clock_mhz is not None:
        text += f", SM {point.sm_clock_mhz:.0f} MHz"
    if point.power_w is not None:  # some boards answer clocks and refuse power (a GeForce)
        text += f", {point.power_w:.0f} W"
    if point.window_cut:
        text += f", window {point.window_cut}"
    elif point.window_s is not None:
        text += f", window {point.window_s:.3g} s"
    if point.cpu_share is not None:  # what the host left it: interpretation is the aggregate's
        text += f", {point.cpu_share:.0%} of the CPU"
    if point.other_runnable:
        text += f", {point.other_runnable} other runnable"
    if point.steal:
        text += f", {point.steal:.1%} stolen"
    if point.kernel:
        text += f"; kernel {point.kernel}"
    return text


def measure_memory_ceiling(target: Target, bench: BenchSettings, nbytes: int) -> CopyCeiling:
    """A copy of `nbytes` on the device, bytes read and written both counted: its measured
    memory-bandwidth ceiling, with every sample."""
    samples = measure_copy(nbytes, target.kind, bench)
    stats = ar.summarize(samples)
    return {
        "bytes_moved": 2 * nbytes,
        "median_s": stats["median_s"],
        "min_s": stats["min_s"],
        "max_s": stats["max_s"],
        "spread": stats["spread"],
        "gbps": ar.gbps(2 * nbytes, stats["median_s"]),
        "samples_s": samples,
    }
