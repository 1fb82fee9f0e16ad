"""Compiled kernels of the CPU itself. As likwid-bench's peakflops and the Empirical Roofline
Toolkit measure it: the clock all cores run at, and the FMA throughput all cores reach at the
widest vector this machine has (the measured compute ceiling under which every BLAS sits). And
the textbook matmul, the baseline of the lab's first knob. Each is built and run as
roofline.device.programs builds and runs them, with a C compiler (`cc`); where there is none,
it says so and measures nothing."""

import ctypes
import platform
import tempfile
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from roofline.core.arithmetic import cpu_flop_per_cycle
from roofline.device import programs
from roofline.device.programs import (
    FMA_MARGIN,
    MAX_CLOCK_GHZ,
    MAX_FLOP_PER_CYCLE,
    MIN_CLOCK_GHZ,
    VECTORS,
    ProgramFailed,
    best_window,
    build,
    not_built,
    run_window,
)

# A register add on x86-64 and arm64 (register operands: recent cores fold add-immediate chains),
# four at a time: the dependent chain both clock programs count cycles with.
ADD_CHAIN = r"""
#if defined(__aarch64__)
#define ADD "add %0, %0, %1\n\t"
#else
#define ADD "add %1, %0\n\t"
#endif
#define ADD4 ADD ADD ADD ADD
"""

CLOCK_PROGRAM = (
    ADD_CHAIN
    + r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    struct timespec t0, t1, c0, c1;
    unsigned long x = 0, y = 1, n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000000UL;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile(ADD4 : "+r"(x) : "r"(y));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    printf("%f %f\n", 4.0 * n / s / 1e9, cpu / s);
    return x == 0;
}
"""
)

# Independent multiply-adds on ACC vectors of VECTOR_BYTES: enough chains in flight to cover
# the FMA latency on every unit, few enough to stay in registers (AVX2 has 16 of them). It
# prints its GFLOP/s. Built with CHAIN=16 it measures the clock under that load instead (the
# Chips and Cheese method): CHAIN dependent register adds a loop, one a cycle, set the loop's
# pace beside the FMAs, and it prints the adds' rate in GHz. ACC FMAs take at most ACC cycles
# on one FMA unit, fewer than CHAIN, so the adds stay the critical path.
FMA_PROGRAM = (
    ADD_CHAIN
    + r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef float vec __attribute__((vector_size(VECTOR_BYTES)));
#define LANES (VECTOR_BYTES / 4)
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    unsigned long chain = 0, one = 1;
    vec acc[ACC], x, y;
    for (int j = 0; j < ACC; j++) acc[j] = (vec){0} + 1.0f + j * 1e-3f;
    x = (vec){0} + (argc > 2 ? 1.0f : 0.999999f);
    y = (vec){0} + 1e-7f;
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
#ifdef CHAIN
        __asm__ volatile(ADD4 ADD4 ADD4 ADD4 : "+r"(chain) : "r"(one));
#endif
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) acc[j] = acc[j] * x + y;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    float sum = 0;
    for (int j = 0; j < ACC; j++)
        for (int l = 0; l < LANES; l++) sum += acc[j][l];
#ifdef CHAIN
    printf("%f %f %f %lu\n", (double)CHAIN * n / s / 1e9, cpu / s, sum, chain);
#else
    printf("%f %f %f\n", 2.0 * LANES * ACC * n / s / 1e9, cpu / s, sum);
#endif
    return 0;
}
"""
)
CHAIN = 16  # the dependent adds a loop of FMA_PROGRAM built to measure the clock under load


def measure_clock_ghz(cores: int, seconds: float = 0.15) -> tuple[float | None, str]:
    """(the clock all cores run at together, why it is not to be trusted: "" when it is): a
    chain of dependent register adds (one per cycle; register operands, since recent cores
    fold add-immediate chains) on every core at once, slowest core taken, in windows of about
    `seconds`. Needs a C compiler and x86-64 or arm64; (None, "") otherwise."""
    if platform.machine() not in ("x86_64", "AMD64", "arm64", "aarch64"):
        return None, ""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            binary = build(CLOCK_PROGRAM, Path(tmp), {})
            if binary is None:
                return None, ""
            # Calibrate the adds to about `seconds` a window (four a loop, one a cycle), as the
            # FMA ceiling's are: a fixed count took 0.13 s a window at 3 GHz, 0.4 s at 1.
            probe = 1_000_000
            ghz = run_window(binary, [str(probe)], 1).values[0]
            iterations = max(probe, int(ghz * 1e9 * seconds / 4))
            window, shared = best_window(binary, [str(iterations)], cores)
        except ProgramFailed as err:
            return None, f"the clock program was not measured: {err}"
    ghz = min(window.values)
    if not MIN_CLOCK_GHZ <= ghz <= MAX_CLOCK_GHZ:
        return ghz, f"refused: {not_a_clock(ghz)}"
    return ghz, shared


def not_a_clock(ghz: float) -> str:
    return f"{ghz:.4g} GHz is not a clock any CPU runs at ({MIN_CLOCK_GHZ:g} to {MAX_CLOCK_GHZ:g})"


class FmaClock(TypedDict):
    """The clock every core runs at under the widest FMA load (measure_fma_clock)."""

    ghz: float | None  # None: not measured (`reason` says why)
    vector: str
    spread: NotRequired[float]  # (max - min) / median of the windows no other process shared
    reason: NotRequired[str]


def measure_fma_clock(cores: int, isa: list[str], seconds: float = 0.15) -> FmaClock:
    """The clock all cores run at while their FMA units work at the widest vector the flags show
    (FMA_PROGRAM built with CHAIN): beside the plain clock, what a frequency licence or the power limit
    takes from wide-vector code. The slowest core of the best window no other process shared."""
    _, width, accumulators, vector = next(v for v in VECTORS if not v[0] or v[0] in isa)
    if platform.machine() not in ("x86_64", "AMD64", "arm64", "aarch64"):
        return {"ghz": None, "vector": vector, "reason": f"not measured on {platform.machine()}"}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            defines = {"VECTOR_BYTES": width, "ACC": accumulators, "CHAIN": CHAIN}
            binary = build(FMA_PROGRAM, Path(tmp), defines)
            if binary is None:
                return {"ghz": None, "vector": vector, "reason": f"not measured: {not_built()}"}
            probe = 200_000  # CHAIN adds a loop, one a cycle: calibrated to `seconds` a window
            ghz = run_window(binary, [str(probe)], 1).values[0]
            iterations = max(probe, int(ghz * 1e9 * seconds / CHAIN))
            seen = [run_window(binary, [str(iterations)], cores) for _ in range(programs.WINDOWS)]
        except ProgramFailed as err:
            return {"ghz": None, "vector": vector, "reason": f"not measured: {err}"}
    best, shared = programs.best_of(seen)
    if shared:
        return {"ghz": None, "vector": vector, "reason": f"not used: {shared}"}
    slowest = sorted(min(w.values) for w in seen if not w.shared)
    ghz = min(best.values)
    if not MIN_CLOCK_GHZ <= ghz <= MAX_CLOCK_GHZ:
        return {"ghz": None, "vector": vector, "reason": f"refused: {not_a_clock(ghz)}"}
    spread = (slowest[-1] - slowest[0]) / slowest[len(slowest) // 2]
    return {"ghz": ghz, "vector": vector, "spread": spread}


class FmaCeiling(TypedDict):
    """A CPU's FP32 FMA ceiling, every core at once (measure_fma)."""

    gflops: float | None  # None: not measured, or not used (`reason`)
    vector: str
    reason: NotRequired[str]
    shared_gflops: NotRequired[float]  # what a shared window measured, kept but not used
    per_core_gflops: NotRequired[list[float]]
    cpu_shares: NotRequired[list[float | None]]


class CpuClock(TypedDict):
    ghz: float | None  # None: nothing here tells it
    source: str


def fma_bound_gflops(cores: int, isa: list[str], clock_ghz: float | None) -> tuple[float, str]:
    """What no FMA ceiling of these cores can exceed: the computed FP32 peak at the measured
    clock (or MAX_CLOCK_GHZ) with FMA_MARGIN for turbo between the two measurements, and how."""
    native = cpu_flop_per_cycle("float32", set(isa))
    flop = native[0] if native else MAX_FLOP_PER_CYCLE
    clock = clock_ghz or MAX_CLOCK_GHZ
    bound = cores * clock * flop * (1 + FMA_MARGIN)
    return bound, f"{cores} cores x {clock:.3g} GHz x {flop} FLOP/cycle + {FMA_MARGIN:.0%}"


def measure_fma(
    cores: int, isa: list[str], seconds: float = 0.3, clock_ghz: float | None = None
) -> FmaCeiling:
    """The FP32 FMA ceiling of all cores at once, at the widest vector the flags show:
    {"gflops", "vector", "per_core_gflops", "cpu_shares"}, or {"gflops": None, "reason"} where
    nothing here can compile it, or where every window was shared (a ceiling lowered by another
    process is no ceiling: what it measured is kept as "shared_gflops")."""
    _, width, accumulators, vector = next(v for v in VECTORS if not v[0] or v[0] in isa)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            binary = build(FMA_PROGRAM, Path(tmp), {"VECTOR_BYTES": width, "ACC": accumulators})
            if binary is None:
                return {"gflops": None, "vector": vector, "reason": f"not measured: {not_built()}"}
            # Calibrate the iterations to about `seconds` a window, then every core at once.
            probe = 2_000_000
            rate = run_window(binary, [str(probe)], 1).values[0]
            iterations = max(probe, int(rate * 1e9 * seconds / (2 * width / 4 * accumulators)))
            window, shared = best_window(binary, [str(iterations)], cores)
        except ProgramFailed as err:
            return {"gflops": None, "vector": vector, "reason": f"not measured: {err}"}
    bound, how = fma_bound_gflops(cores, isa, clock_ghz)
    if sum(window.values) > bound:
        why = f"{sum(window.values):.4g} GFLOP/s is above what these cores can do, {bound:.4g} ({how})"
        return {"gflops": None, "vector": vector, "reason": f"refused: {why}"}
    if shared:
        return {
            "gflops": None,
            "vector": vector,
            "reason": f"not used: {shared}",
            "shared_gflops": sum(window.values),
        }
    return {
        "gflops": sum(window.values),
        "vector": vector,
        "per_core_gflops": window.values,
        "cpu_shares": window.shares,
    }


def cpu_clock(cores: int, seconds: float = 0.15) -> CpuClock:
    """The CPU clock, as measured (windows of about `seconds`) or read on this machine:
    {"ghz", "source"}; ghz is None when nothing here tells it (the aggregate stage then needs
    devices.<name>.clock_ghz). A clock measured only in shared windows is not used (it reads
    low: a lowered peak), and said."""
    import psutil

    measured, shared = measure_clock_ghz(cores, seconds)
    if measured and not shared:
        return {"ghz": measured, "source": "measured all-core clock"}
    if measured is None:  # the program did not run, or failed: why, beside what the OS says
        unused = f"; {shared}" if shared else ""
    else:
        unused = f"; the measured clock ({measured:.2f} GHz) was not used: {shared}"
    system, machine = platform.system(), platform.machine()
    advice = compiler_advice(system)
    wrong = os_clock_is_wrong(system, machine)
    if wrong:  # no MFU against a clock known not to be the one the kernel ran at
        return {"ghz": None, "source": f"{wrong}{unused}{advice}"}
    try:  # psutil defines cpu_freq only where the OS has it (not on every arm64 Mac)
        freq = psutil.cpu_freq()
    except Exception as err:  # psutil's own failures (SystemError on M5, #2841), said
        failed = f"psutil's cpu_freq failed ({type(err).__name__}: {err})"
        return {"ghz": None, "source": f"{failed}{unused}{advice}"}
    for mhz, which in ((freq and freq.max, "maximum"), (freq and freq.current, "current")):
        if not mhz:
            continue
        said = f"the OS's {which} clock (psutil)"
        if not MIN_CLOCK_GHZ <= mhz / 1e3 <= MAX_CLOCK_GHZ:  # psutil on an M4 reads 4 MHz
            return {"ghz": None, "source": f"{said}: {not_a_clock(mhz / 1e3)}{unused}{advice}"}
        return {"ghz": mhz / 1e3, "source": f"{said}{unused}"}
    why = (
        unused.removeprefix("; ")
        or "the clock program did not run here, and the OS reports no clock"
    )
    return {"ghz": None, "source": why + advice}


def os_clock_is_wrong(system: str, machine: str) -> str:
    """Why the OS's clock (psutil's) is known not to be a peak clock here, or "". psutil's
    cpu_freq on Windows is the base clock (its _pswindows reads CallNtPowerInformation's
    MaxMhz; psutil #2083, #2299), and on Apple silicon it is absent, 1000x low (M4, #2642) or
    raises (M5, #2841): Apple silicon's sysctl has no hw.cpufrequency."""
    if system == "Windows":
        return "Windows reports its base clock, not the boost clock a kernel runs at: not used"
    if system == "Darwin" and machine == "arm64":
        return "Apple silicon reports no clock a peak can use (psutil's is absent or wrong): none"
    return ""


def compiler_advice(system: str) -> str:
    """Where the clock program cannot be built: the one command that brings a compiler on
    this OS (on Windows, where none would build the POSIX kernels, the conf key to set, or
    WSL2's Linux, where gcc builds them), or ""."""
    if system == "Windows":  # no compiler builds the kernels there (programs.NOT_ON_WINDOWS)
        return (
            "; set clock_ghz in conf/device/cpu.yaml's datasheet line for a peak, or run the lab "
            "under WSL2 (`wsl --install`, then `sudo apt install gcc` in it), where they build"
        )
    if programs.compiler() is not None:  # the one `build` looks for
        return ""
    command = {
        "Darwin": "xcode-select --install",
        "Linux": "sudo apt install gcc (Debian, Ubuntu) or sudo dnf install gcc (Fedora)",
    }.get(system, "install gcc or clang")
    return f"; no C compiler here to measure the clock: {command}"


NAIVE_PROGRAM = r"""
void matmul(int m, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++)
                sum += a[i * k + p] * b[p * n + j];
            c[i * n + j] = sum;
        }
}
"""


def naive_matmul() -> Any:
    """The textbook triple loop as it is written, compiled -O2 for any x86-64 or arm64 (no
    -march, no fast-math: no reordered, vectorised sum), as a function of two float32 numpy
    arrays; None where nothing can compile it."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        try:
            library = build(NAIVE_PROGRAM, Path(tmp), {}, ("-O2", "-shared", "-fPIC"), ((),))
            if library is None:
                return None
            loop = ctypes.CDLL(str(library)).matmul  # mapped now: the file may go
        except (ProgramFailed, OSError):  # a noexec folder maps no library either
            return None
    floats = ctypes.POINTER(ctypes.c_float)
    loop.argtypes = [ctypes.c_int] * 3 + [floats] * 3

    def textbook_loop(a: Any, b: Any) -> Any:
        a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
        c = np.empty((a.shape[0], b.shape[1]), np.float32)
        pointers = (x.ctypes.data_as(floats) for x in (a, b, c))
        loop(a.shape[0], b.shape[1], a.shape[1], *pointers)
        return c

    return textbook_loop
