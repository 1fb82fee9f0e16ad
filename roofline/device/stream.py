"""A CPU's memory roof at the machine's bandwidth: STREAM's copy and triad (McCalpin), a copy of
the program on every core at once, each over arrays of its own past every cache, built and run by
roofline.device.programs as every CPU kernel is. One thread of a framework's copy leaves memory
channels idle that every core's streams fill: on a 2-core AMD EPYC, torch's 1 GiB dst.copy_(src)
read 31-33 GB/s where STREAM's copy read 40-41.

Bytes are counted as STREAM counts them: copy reads and writes each element once (16 bytes a
double), triad reads two and writes one (24); a store's write-allocate read is not counted. Both
are STREAM's loops, with the compiler's plain vector stores, as STREAM's compile (never the C
library's memcpy, whose non-temporal stores read 30-40% slower on that EPYC). The roofline's
memory slope is the copy's, the triad kept beside it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from roofline.core import arithmetic as ar
from roofline.core.measurement import CopyCeiling
from roofline.device.cache_ceilings import DRAM_LEAST, DRAM_TIMES, MEMORY_SHARE, CacheSize
from roofline.device.programs import (
    MAX_CLOCK_GHZ,
    MAX_LOAD_BYTES,
    WINDOW_CLOCKS,
    WINDOWS,
    ProgramFailed,
    build,
    not_built,
    run_windows,
)

# Each copy fills its three arrays once (every page its own), then for the copy and then the
# triad runs the kernel once and window after window (argv[3]) of argv[2] seconds, a line each:
# its GB/s, its share of a CPU, and a checksum that keeps the stores live. The arrays live in
# pages as the OS gives any process's memory, as STREAM's static arrays and a tensor's get
# theirs: with huge pages asked for (madvise), 2 copies read 55-64 GB/s on this repo's EPYC VM
# (transparent huge pages "madvise"), where OpenMP STREAM read 40 and these pages read 30-40.
# Every window starts at a barrier all the copies (argv[5]) share through a file (argv[4]), so
# their windows are one window: a copy timed while another still fills its arrays has the
# memory to itself (there, with huge pages, the windows spread 25-45% without it, 5-14% with it).
STREAM_PROGRAM = (
    WINDOW_CLOCKS
    + r"""
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
/* STREAM's own loops, kept loops: not turned into the C library's memcpy, whose stores are
   its own choice (non-temporal past a size), where STREAM's compile to plain vector stores. */
#if defined(__clang__)
__attribute__((no_builtin("memcpy")))
#elif defined(__GNUC__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
static void kernel(int triad, double *restrict a, double *restrict b, double *restrict c,
                   long n) {
    if (triad) {
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
    } else {
        for (long i = 0; i < n; i++) c[i] = a[i];
    }
}
/* Every copy's arrival counted in the shared file; each waits for all `copies` of this round. */
static void barrier(int *arrived, int copies, int *round) {
    ++*round;
    __atomic_add_fetch(arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(arrived, __ATOMIC_SEQ_CST) < copies * *round) sched_yield();
}
int main(int argc, char **argv) {
    if (argc < 6) return 2;
    long n = atol(argv[1]) / (long)sizeof(double);
    double seconds = atof(argv[2]);
    int copies = atoi(argv[5]), round = 0;
    size_t bytes = (size_t)n * sizeof(double);
    double *a, *b, *c;
    int fd = open(argv[4], O_RDWR);
    int *arrived = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE,
                                              MAP_SHARED, fd, 0);
    if (arrived == MAP_FAILED || copies < 1) return 3;
    if (n < 1 || posix_memalign((void **)&a, 1 << 21, bytes) ||
        posix_memalign((void **)&b, 1 << 21, bytes) || posix_memalign((void **)&c, 1 << 21, bytes))
        return 1;
    for (long i = 0; i < n; i++) { a[i] = 1.0; b[i] = 2.0; c[i] = 0.0; }
    for (int triad = 0; triad < 2; triad++) {
        kernel(triad, a, b, c, n);
        double moved = (triad ? 3.0 : 2.0) * (double)bytes;
        for (int window = atoi(argv[3]); window > 0; window--) {
            struct window w;
            barrier(arrived, copies, &round);
            window_begin(&w);
            double s = 0;
            long passes = 0;
            while (s < seconds) {
                kernel(triad, a, b, c, n);
                passes++;
                s = window_wall(&w);
            }
            double cpu = window_cpu(&w);
            printf("%f %f %f\n", moved * passes / s / 1e9, cpu / s, a[n / 2] + c[n / 3]);
        }
    }
    return 0;
}
"""
)
# As STREAM is built (-O3: its loops vectorised at the widest vector -march=native allows).
STREAM_FLAGS = ("-O3",)
KERNELS = {"copy": 2, "triad": 3}  # the arrays each reads and writes, STREAM's count
# A window long enough for several passes over a copy's arrays at DRAM speed (STREAM times ten).
STREAM_WINDOW_S = 0.3


def array_bytes(sizes: list[CacheSize], copies: int, memory_free: int) -> int | None:
    """Each array of each copy: STREAM's rule, DRAM_TIMES the largest cache a copy has of any
    level (at least DRAM_LEAST), the three arrays of every copy together within MEMORY_SHARE of
    the memory free; None where that leaves no array past the caches."""
    largest = max((size.size_bytes // size.shared_by for size in sizes), default=0)
    wanted = max(DRAM_TIMES * largest, DRAM_LEAST)
    room = int(memory_free * MEMORY_SHARE) // (3 * max(1, copies))
    fits = min(wanted, room) // 4096 * 4096
    return fits if fits > largest else None


def bound_gbps(cores: int, clock_ghz: float | None) -> float:
    """What no stream of these cores can move: MAX_LOAD_BYTES["DRAM"] a cycle per core, at the
    measured clock (or MAX_CLOCK_GHZ)."""
    return cores * (clock_ghz or MAX_CLOCK_GHZ) * MAX_LOAD_BYTES["DRAM"]


def pass_times(moved: int, rates_gbps: list[float]) -> list[float]:
    """Each window's rate as the seconds one pass of `moved` bytes took in it."""
    return [moved / (rate * 1e9) for rate in rates_gbps]


def measure_stream(
    cores: int,
    sizes: list[CacheSize],
    memory_free: int,
    seconds: float = STREAM_WINDOW_S,
    clock_ghz: float | None = None,
    windows: int = WINDOWS,
) -> tuple[CopyCeiling | None, str]:
    """(STREAM's copy and triad on every core at once, why it was not measured: "" where it
    was). Each figure is the best of the windows none of its copies shared: STREAM's own
    statistic, as the FMA ceiling's is (a neighbour on the memory bus only ever slows a window);
    every window is kept."""
    n = array_bytes(sizes, cores, memory_free)
    if n is None:
        return (
            None,
            f"three arrays a core past the caches would not fit in {MEMORY_SHARE:.0%} of the memory free",
        )
    with tempfile.TemporaryDirectory() as tmp:
        try:
            binary = build(STREAM_PROGRAM, Path(tmp), {}, STREAM_FLAGS)
        except ProgramFailed as err:
            return None, str(err)
        if binary is None:
            return None, not_built()
        barrier = Path(tmp) / "barrier"  # the copies' shared arrival count, zero to begin
        barrier.write_bytes(bytes(64))
        args = [str(n), str(seconds), str(windows), str(barrier), str(cores)]
        try:
            seen = run_windows(binary, args, cores)
        except ProgramFailed as err:
            return None, str(err)
    if len(seen) < 2 * windows:
        return None, f"it printed {len(seen)} of the {2 * windows} windows asked"
    bound = bound_gbps(cores, clock_ghz)
    figures: dict[str, list[float]] = {}  # each kernel's windows no copy shared, in order
    for i, name in enumerate(KERNELS):
        figures[name] = [
            sum(w.values) for w in seen[i * windows : (i + 1) * windows] if not w.shared
        ]
        if max(figures[name], default=0.0) > bound:
            fastest = max(figures[name])
            return (
                None,
                f"its {name} read {fastest:.4g} GB/s, above what {cores} cores can move ({bound:.4g})",
            )
    if not figures["copy"]:
        return None, f"every one of its {windows} copy windows shared the CPUs with another process"
    moved = KERNELS["copy"] * n * cores
    samples = pass_times(moved, figures["copy"])
    stats = ar.summarize(samples)
    ceiling: CopyCeiling = {
        "bytes_moved": moved,
        "median_s": stats["median_s"],
        "min_s": stats["min_s"],
        "max_s": stats["max_s"],
        "spread": stats["spread"],
        "gbps": ar.gbps(moved, stats["min_s"]),
        "samples_s": samples,
        "how": (
            f"STREAM's copy (its loop, plain vector stores) on every core at once: {cores} "
            f"copies, each over arrays of {n >> 20} MiB, their windows started together"
        ),
        "copies": cores,
        "array_bytes": n,
    }
    triad = figures["triad"]
    if triad:
        triad_moved = KERNELS["triad"] * n * cores
        ceiling["triad_gbps"] = ar.gbps(triad_moved, min(pass_times(triad_moved, triad)))
    else:
        ceiling["triad_gbps"] = None
        ceiling["triad_reason"] = "every window shared the CPUs with another process"
    return ceiling, ""
