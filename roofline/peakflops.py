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
from typing import Any

CLOCK_PROGRAM = r"""
#include <stdio.h>
#include <time.h>
int main(void) {
    struct timespec t0, t1;
    unsigned long x = 0, y = 1, n = 200000000UL;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                         : "+r"(x) : "r"(y));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("%f\n", 4.0 * n / s / 1e9);
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
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) acc[j] = acc[j] * x + y;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    float sum = 0;
    for (int j = 0; j < ACC; j++)
        for (int l = 0; l < LANES; l++) sum += acc[j][l];
    printf("%f %f\n", 2.0 * LANES * ACC * n / s / 1e9, sum);
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
    src.write_text(source)
    macros = [f"-D{key}={value}" for key, value in defines.items()]
    for target in targets:
        done = subprocess.run(
            [cc, *flags, *target, *macros, "-o", binary, src], capture_output=True
        )
        if done.returncode == 0:
            return binary
    return None


def fastest_round(binary: Path, args: list[str], copies: int, rounds: int = 3) -> list[float]:
    """Each copy's first printed number, `copies` processes at once, over the round whose
    total is highest (a busy neighbour only ever slows a round)."""
    best: list[float] = []
    for _ in range(rounds):
        runs = [
            subprocess.Popen([binary, *args], stdout=subprocess.PIPE, text=True)
            for _ in range(copies)
        ]
        values = [float(run.communicate()[0].split()[0]) for run in runs]
        best = max(best, values, key=sum)
    return best


def measure_clock_ghz(cores: int) -> float | None:
    """The clock all cores run at together: a chain of dependent register adds (one per cycle;
    register operands, since recent cores fold add-immediate chains) on every core at once,
    slowest core taken. Needs a C compiler and x86-64; None otherwise."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(CLOCK_PROGRAM, Path(tmp), {})
        return min(fastest_round(binary, [], cores)) if binary else None


def measure_fma(cores: int, isa: list[str], seconds: float = 0.5) -> dict[str, Any]:
    """The FP32 FMA ceiling of all cores at once, at the widest vector the flags show:
    {"gflops", "vector", "per_core_gflops"}, or {"gflops": None, "reason"} where nothing here
    can compile it."""
    _, width, accumulators, vector = next(v for v in VECTORS if not v[0] or v[0] in isa)
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(FMA_PROGRAM, Path(tmp), {"VECTOR_BYTES": width, "ACC": accumulators})
        if binary is None:
            why = "no C compiler (cc, gcc or clang)" if compiler() is None else "it did not compile"
            return {"gflops": None, "vector": vector, "reason": f"not measured: {why} here"}
        # Calibrate the iterations to about `seconds` per run, then measure every core at once.
        probe = 2_000_000
        rate = fastest_round(binary, [str(probe)], 1, rounds=1)[0]
        iterations = max(probe, int(rate * 1e9 * seconds / (2 * width / 4 * accumulators)))
        per_core = fastest_round(binary, [str(iterations)], cores)
    return {"gflops": sum(per_core), "vector": vector, "per_core_gflops": per_core}


def cpu_clock(cores: int) -> dict[str, Any]:
    """The CPU clock, as measured or read on this machine: {"ghz", "source"}; ghz is None when
    nothing here tells it (the aggregate stage then needs devices.<name>.clock_ghz)."""
    import psutil

    measured = measure_clock_ghz(cores)
    if measured:
        return {"ghz": measured, "source": "measured all-core clock"}
    freq = psutil.cpu_freq()
    if freq and freq.max:
        return {"ghz": freq.max / 1e3, "source": "the OS's maximum clock (psutil)"}
    if freq and freq.current:
        return {"ghz": freq.current / 1e3, "source": "the OS's current clock (psutil)"}
    return {"ghz": None, "source": "no C compiler here, and the OS reports no clock"}


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
