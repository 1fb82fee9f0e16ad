"""Whether a measurement's timed window was noisy, and the figures that say so: the window was
shared with other work, its calls disagree, or its rate is far below the device's own measured
roof. A noisy row is flagged in results.csv (roofline.interpretation.rows), never used as a
figure."""

import statistics

from roofline.core import arithmetic as ar
from roofline.core.measurement import Measurement, TimingMode

# A noisy timed window. Each threshold is from this project's 2-core CI machine (AMD EPYC, a VM),
# float32 48^3 to 4096^3 through torch and numpy, quiet against `python3 -c 'while True: pass'` on
# one core and on both:
SHARE_MIN = 0.8  # of the CPU: quiet 0.90-1.00 where the BLAS used every core; busy 0.24-0.69
IDLE_MAX = 0.1  # ...and the rest not idle: quiet one-thread numpy 48^3, 0.50 and 0.51 idle
STEAL_MAX = 0.05  # 0.000-0.003 here, quiet or busy (a loop in a VM is not steal): 5%, a shared host
SPREAD_MAX = 0.5  # (p90 - p10) / median: quiet at most 0.25; busy up to 67
ROOF_FRACTION = 1 / 20  # quiet rows at 0.08 of their roof or more; busy, 48^3 in 16 ms: 0.0001


def shared_window(point: Measurement) -> str:
    """Why the host was not the timed window's own, with the figures, or "": the CPU time the
    process did not have went to others (not idle), other threads were runnable at both ends of
    the window, or the hypervisor took the cores. Host-clock timing only: a GPU's events time
    the device whatever its host does. A source the OS did not report (None) flags nothing."""
    if point.timing_mode is not TimingMode.HOST:
        return ""
    share, idle, others, steal = point.cpu_share, point.cpu_idle, point.other_runnable, point.steal
    taken = share is not None and idle is not None and share < SHARE_MIN and idle < IDLE_MAX
    stolen = steal is not None and steal > STEAL_MAX
    if not (taken or others or stolen):
        return ""
    said = [] if share is None else [f"the process had {share:.0%} of the CPU during the window"]
    if others:
        said.append(f"{others} other runnable thread{'s' * (others > 1)} at its start and end")
    if stolen:
        said.append(f"the hypervisor took {steal:.0%} of the cores' time")
    return ", ".join(said)


def middle_spread(samples: list[float]) -> float | None:
    """(p90 - p10) / median: the middle 80% of the calls. Not (max - min) / median, which one
    interrupt in 10,000 short calls makes 8-128 on a quiet machine."""
    if len(samples) < 2:
        return None
    deciles = statistics.quantiles(samples, n=10, method="inclusive")
    return (deciles[-1] - deciles[0]) / statistics.median(samples)


def noise(point: Measurement, fma_tflops: float | None, copy_gbps: float | None) -> list[str]:
    """What says the point's timed window was noisy, each with its figure: a shared window,
    calls that disagree, or a rate far below the device's own measured roof (the lesser of its
    FMA ceiling and intensity x copy bandwidth: a CPU's, from the same run)."""
    out = []
    shared = shared_window(point)
    if shared:
        out.append(f"a shared window: {shared}")
    spread = middle_spread(point.samples_s)
    if spread is not None and spread > SPREAD_MAX:
        out.append(f"the middle 80% of its calls spread {spread:.0%} of the median")
    if fma_tflops and copy_gbps and point.series == "lab":  # a sweep's small shapes may be so
        flops = ar.matmul_flops(point.m, point.n, point.k)
        nbytes = ar.matmul_bytes(point.m, point.n, point.k, point.dtype)
        roof = min(fma_tflops, ar.intensity(flops, nbytes) * copy_gbps / 1e3)
        rate = ar.tflops(flops, ar.summarize(point.samples_s)["median_s"])
        if rate < ROOF_FRACTION * roof:
            out.append(
                f"{rate:.3g} TFLOP/s is {100 * rate / roof:.2g}% of its roof measured in the same run "
                f"({roof:.3g} TFLOP/s, the lesser of the FMA ceiling and intensity x copy "
                "bandwidth)"
            )
    return out
