"""Compiled kernels of the CPU itself. As likwid-bench's peakflops and the Empirical Roofline
Toolkit measure it: the clock all cores run at, and the FMA throughput all cores reach at the
widest vector this machine has (the measured compute ceiling under which every BLAS sits).
And the textbook matmul, the baseline of the lab's first knob. Each needs a C compiler (`cc`);
where there is none, it says so and measures nothing."""

import ctypes
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, NotRequired, TypedDict

CLOCK_PROGRAM = r"""
#include <stdio.h>
#include <time.h>
int main(void) {
    struct timespec t0, t1, c0, c1;
    unsigned long x = 0, y = 1, n = 100000000UL;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                         : "+r"(x) : "r"(y));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double cpu = (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    printf("%f %f\n", 4.0 * n / s / 1e9, cpu / s);
    return x == 0;
}
"""

# Independent multiply-adds on ACC vectors of VECTOR_BYTES: enough chains in flight to cover
# the FMA latency on every unit, few enough to stay in registers (AVX2 has 16 of them).
FMA_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef float vec __attribute__((vector_size(VECTOR_BYTES)));
#define LANES (VECTOR_BYTES / 4)
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    vec acc[ACC], x, y;
    for (int j = 0; j < ACC; j++) acc[j] = (vec){0} + 1.0f + j * 1e-3f;
    x = (vec){0} + (argc > 2 ? 1.0f : 0.999999f);
    y = (vec){0} + 1e-7f;
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
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
    printf("%f %f %f\n", 2.0 * LANES * ACC * n / s / 1e9, cpu / s, sum);
    return 0;
}
"""
# The widest vector per instruction set the flags show: (flag, bytes, accumulators, name).
VECTORS = [
    ("avx512f", 64, 12, "AVX-512 (512-bit)"),
    ("avx2", 32, 10, "AVX2 (256-bit)"),
    ("", 16, 12, "128-bit (SSE / NEON)"),
]
FLAGS = ("-O2", "-ffp-contract=fast")
NATIVE = (("-march=native",), ("-mcpu=native",), ())  # gcc/clang x86, clang arm64, neither


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def build(
    source: str,
    where: Path,
    defines: dict[str, int],
    flags: tuple[str, ...] = FLAGS,
    targets: tuple[tuple[str, ...], ...] = NATIVE,
) -> Path | None:
    """The program compiled (for this machine's widest instructions, by default), or None."""
    cc = compiler()
    if cc is None:
        return None
    src, binary = where / "program.c", where / "program"
    src.write_text(source, encoding="utf-8")
    macros = [f"-D{key}={value}" for key, value in defines.items()]
    for target in targets:
        done = subprocess.run(
            [cc, *flags, *target, *macros, "-o", binary, src], capture_output=True
        )
        if done.returncode == 0:
            return binary
    return None


# Short windows, each with every copy's own share of a CPU: a busy neighbour only ever slows a
# window, so the best window a copy had to itself is the ceiling, and a window in which any copy
# had less than OWN_CPU of its CPU was shared (a quiet core: 0.99 and more; one shared with one
# other busy process: about 0.5).
WINDOWS = 5
OWN_CPU = 0.9


class Window(NamedTuple):
    values: list[float]  # each copy's figure
    shares: list[float]  # each copy's CPU time over its wall time

    @property
    def shared(self) -> bool:
        return min(self.shares) < OWN_CPU


def run_window(binary: Path, args: list[str], copies: int) -> Window:
    """`copies` processes at once: each one's first printed number and its share of a CPU."""
    runs = [
        subprocess.Popen([binary, *args], stdout=subprocess.PIPE, text=True) for _ in range(copies)
    ]
    printed = [run.communicate()[0].split() for run in runs]
    return Window([float(p[0]) for p in printed], [float(p[1]) for p in printed])


def best_window(
    binary: Path, args: list[str], copies: int, windows: int = WINDOWS
) -> tuple[Window, str]:
    """(the window with the highest total among those no copy shared, why it is not to be
    trusted: "" when it is). Where every window was shared, the best of them, and why."""
    seen = [run_window(binary, args, copies) for _ in range(windows)]
    own = [w for w in seen if not w.shared] or seen
    best = max(own, key=lambda w: sum(w.values))
    if not best.shared:
        return best, ""
    most = max(min(w.shares) for w in seen)
    return best, (
        f"every one of its {windows} windows shared the CPUs with another process (its "
        f"copies had at most {most:.0%} of a CPU; {OWN_CPU:.0%} is a CPU of its own)"
    )


def measure_clock_ghz(cores: int) -> tuple[float | None, str]:
    """(the clock all cores run at together, why it is not to be trusted: "" when it is): a
    chain of dependent register adds (one per cycle; register operands, since recent cores
    fold add-immediate chains) on every core at once, slowest core taken. Needs a C compiler
    and x86-64; (None, "") otherwise."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None, ""
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(CLOCK_PROGRAM, Path(tmp), {})
        if binary is None:
            return None, ""
        window, shared = best_window(binary, [], cores)
        return min(window.values), shared


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


def measure_fma(cores: int, isa: list[str], seconds: float = 0.3) -> FmaCeiling:
    """The FP32 FMA ceiling of all cores at once, at the widest vector the flags show:
    {"gflops", "vector", "per_core_gflops", "cpu_shares"}, or {"gflops": None, "reason"} where
    nothing here can compile it, or where every window was shared (a ceiling lowered by another
    process is no ceiling: what it measured is kept as "shared_gflops")."""
    _, width, accumulators, vector = next(v for v in VECTORS if not v[0] or v[0] in isa)
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(FMA_PROGRAM, Path(tmp), {"VECTOR_BYTES": width, "ACC": accumulators})
        if binary is None:
            why = "no C compiler (cc, gcc or clang)" if compiler() is None else "it did not compile"
            return {"gflops": None, "vector": vector, "reason": f"not measured: {why} here"}
        # Calibrate the iterations to about `seconds` per window, then measure every core at once.
        probe = 2_000_000
        rate = run_window(binary, [str(probe)], 1).values[0]
        iterations = max(probe, int(rate * 1e9 * seconds / (2 * width / 4 * accumulators)))
        window, shared = best_window(binary, [str(iterations)], cores)
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


def cpu_clock(cores: int) -> CpuClock:
    """The CPU clock, as measured or read on this machine: {"ghz", "source"}; ghz is None when
    nothing here tells it (the aggregate stage then needs devices.<name>.clock_ghz). A clock
    measured only in shared windows is not used (it reads low: a lowered peak), and said."""
    import psutil

    measured, shared = measure_clock_ghz(cores)
    if measured and not shared:
        return {"ghz": measured, "source": "measured all-core clock"}
    unused = f"; the measured clock ({measured:.2f} GHz) was not used: {shared}" if shared else ""
    freq = psutil.cpu_freq()
    if freq and freq.max:
        return {"ghz": freq.max / 1e3, "source": f"the OS's maximum clock (psutil){unused}"}
    if freq and freq.current:
        return {"ghz": freq.current / 1e3, "source": f"the OS's current clock (psutil){unused}"}
    why = unused.removeprefix("; ") or "no C compiler here, and the OS reports no clock"
    return {"ghz": None, "source": why}


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
        library = build(NAIVE_PROGRAM, Path(tmp), {}, ("-O2", "-shared", "-fPIC"), ((),))
        if library is None:
            return None
        loop = ctypes.CDLL(str(library)).matmul  # mapped now: the file may go
    floats = ctypes.POINTER(ctypes.c_float)
    loop.argtypes = [ctypes.c_int] * 3 + [floats] * 3

    def textbook_loop(a: Any, b: Any) -> Any:
        a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
        c = np.empty((a.shape[0], b.shape[1]), np.float32)
        pointers = (x.ctypes.data_as(floats) for x in (a, b, c))
        loop(a.shape[0], b.shape[1], a.shape[1], *pointers)
        return c

    return textbook_loop
