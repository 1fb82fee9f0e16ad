"""Compiled kernels of the CPU itself. As likwid-bench's peakflops and the Empirical Roofline
Toolkit measure it: the clock all cores run at, and the FMA throughput all cores reach at the
widest vector this machine has (the measured compute ceiling under which every BLAS sits);
the read bandwidth of each cache level and of DRAM, as the cache-aware roofline (Ilic et al.)
measures it. And the textbook matmul, the baseline of the lab's first knob. Each needs a C compiler (`cc`);
where there is none, it says so and measures nothing."""

import ctypes
import math
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple, NotRequired, TypedDict

from roofline.core.arithmetic import cpu_flop_per_cycle

CLOCK_PROGRAM = r"""
#include <stdio.h>
#include <time.h>
#if defined(__aarch64__)
#define ADD "add %0, %0, %1\n\t"
#else
#define ADD "add %1, %0\n\t"
#endif
int main(void) {
    struct timespec t0, t1, c0, c1;
    unsigned long x = 0, y = 1, n = 100000000UL;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long i = 0; i < n; i++)
        __asm__ volatile(ADD ADD ADD ADD : "+r"(x) : "r"(y));
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


# Every outside program is bounded: a compiler or kernel that hangs would hold the machine's
# measuring lock, and every other clone with it. Generous: a kernel runs for about a second.
COMPILE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 120.0
# What no CPU does: a clock above 7 GHz (records under liquid nitrogen aside), more bytes a
# cycle per core from a level than MAX_LOAD_BYTES (L1: Zen 5 and Golden Cove load 128-192; L2
# gives a core at most 64, L3 32, DRAM less), or more FP32 FLOP per cycle per core than
# MAX_FLOP_PER_CYCLE (two 512-bit FMA units: 64). Each is about twice the fastest known.
MAX_CLOCK_GHZ = 7.0
MAX_LOAD_BYTES = {"L1": 256, "L2": 128, "L3": 64, "DRAM": 64}
MAX_FLOP_PER_CYCLE = 64
FMA_MARGIN = 0.25  # an FMA ceiling above the computed peak by more is refused (turbo)
MAX_CPU_SHARE = 1.1  # a single-threaded copy's CPU time over its wall time


class ProgramFailed(Exception):
    """A compiled kernel that did not give a figure: why, for its ceiling's "not measured"."""


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def not_built() -> str:
    """Why `build` gave no program: no compiler, or one that could not compile it."""
    return (
        "no C compiler (cc, gcc or clang) here" if compiler() is None else "it did not compile here"
    )


# The kernels are POSIX C (clock_gettime's CPU clock, posix_memalign, madvise): Windows' C
# libraries lack them, so they are not built there, whatever compiler is installed.
NOT_ON_WINDOWS = (
    "the lab's kernels are POSIX C (clock_gettime, posix_memalign): not built on Windows"
)


def build(
    source: str,
    where: Path,
    defines: dict[str, int],
    flags: tuple[str, ...] = FLAGS,
    targets: tuple[tuple[str, ...], ...] = NATIVE,
) -> Path | None:
    """The program compiled (for this machine's widest instructions, by default), or None."""
    if platform.system() == "Windows":
        raise ProgramFailed(NOT_ON_WINDOWS)
    cc = compiler()
    if cc is None:
        return None
    src, binary = where / "program.c", where / "program"
    src.write_text(source, encoding="utf-8")
    macros = [f"-D{key}={value}" for key, value in defines.items()]
    for target in targets:
        try:
            done = subprocess.run(
                [cc, *flags, *target, *macros, "-o", binary, src],
                capture_output=True,
                timeout=COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ProgramFailed(
                f"{Path(cc).name} did not finish compiling in {COMPILE_TIMEOUT_S:g} s"
            ) from None
        if done.returncode == 0:
            if not binary.is_file():
                raise ProgramFailed(f"{Path(cc).name} exited 0 but wrote no program")
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
    """`copies` processes at once, each printing one line: each one's first printed number and
    its share of a CPU."""
    seen = run_windows(binary, args, copies)
    if not seen:
        raise ProgramFailed("it printed nothing")
    return seen[0]


def best_window(
    binary: Path, args: list[str], copies: int, windows: int = WINDOWS
) -> tuple[Window, str]:
    """(the window with the highest total among those no copy shared, why it is not to be
    trusted: "" when it is). Where every window was shared, the best of them, and why."""
    return best_of([run_window(binary, args, copies) for _ in range(windows)])


def best_of(seen: list[Window]) -> tuple[Window, str]:
    """best_window's choice among the windows seen."""
    windows = len(seen)
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
    and x86-64 or arm64; (None, "") otherwise."""
    if platform.machine() not in ("x86_64", "AMD64", "arm64", "aarch64"):
        return None, ""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            binary = build(CLOCK_PROGRAM, Path(tmp), {})
            if binary is None:
                return None, ""
            window, shared = best_window(binary, [], cores)
        except ProgramFailed as err:
            return None, f"the clock program was not measured: {err}"
    ghz = min(window.values)
    if not 0 < ghz <= MAX_CLOCK_GHZ:
        return (
            ghz,
            f"refused: {ghz:.4g} GHz is not a clock any CPU runs at (0 to {MAX_CLOCK_GHZ:g})",
        )
    return ghz, shared


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


def cpu_clock(cores: int) -> CpuClock:
    """The CPU clock, as measured or read on this machine: {"ghz", "source"}; ghz is None when
    nothing here tells it (the aggregate stage then needs devices.<name>.clock_ghz). A clock
    measured only in shared windows is not used (it reads low: a lowered peak), and said."""
    import psutil

    measured, shared = measure_clock_ghz(cores)
    if measured and not shared:
        return {"ghz": measured, "source": "measured all-core clock"}
    unused = f"; the measured clock ({measured:.2f} GHz) was not used: {shared}" if shared else ""
    if measured is None and shared:  # the program failed: why, beside whatever the OS says
        unused = f"; {shared}"
    system, machine = platform.system(), platform.machine()
    wrong = os_clock_is_wrong(system, machine)
    if wrong:  # no MFU against a clock known not to be the one the kernel ran at
        return {"ghz": None, "source": f"{wrong}{unused}{compiler_advice(system)}"}
    try:  # psutil defines cpu_freq only where the OS has it (not on every arm64 Mac)
        freq = psutil.cpu_freq()
    except Exception as err:  # psutil's own failures (SystemError on M5, #2841), said
        return {"ghz": None, "source": f"psutil's cpu_freq failed ({type(err).__name__}: {err})"}
    if freq and freq.max:
        return {"ghz": freq.max / 1e3, "source": f"the OS's maximum clock (psutil){unused}"}
    if freq and freq.current:
        return {"ghz": freq.current / 1e3, "source": f"the OS's current clock (psutil){unused}"}
    why = (
        unused.removeprefix("; ")
        or "the clock program did not run here, and the OS reports no clock"
    )
    return {"ghz": None, "source": why + compiler_advice(system)}


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
    this OS (on Windows, where none would build it, the conf key to set instead), or ""."""
    if system == "Windows":  # no compiler builds the kernels there (NOT_ON_WINDOWS)
        return "; set clock_ghz in conf/device/cpu.yaml's datasheet line for a peak"
    if compiler() is not None:
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


# --- the cache ceilings: read bandwidth per level, as the cache-aware roofline measures them ---
#
# Each copy reads its own buffer, pass after pass, as vector loads summed into ACC accumulators
# (as many chains in flight as the FMA kernel keeps: enough to cover the add's latency on every
# load port), window after window (argv[3]), each for a given time (argv[2]: every copy reads
# through the whole window, none finishes early and leaves the others a shared level to
# themselves), a line each. Loads only: no store, so no write-allocate and no write-back in the
# figure. Every page of the buffer is touched (huge pages asked for) and the buffer read once
# before the first window, so the windows find it where it fits.
READ_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
typedef float vec __attribute__((vector_size(VECTOR_BYTES)));
#define LANES (VECTOR_BYTES / 4)
static vec acc[ACC];
static void pass(const vec *data, long blocks) {
    vec a[ACC];
    for (int j = 0; j < ACC; j++) a[j] = acc[j];
    for (long i = 0; i < blocks; i++, data += ACC) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) a[j] += data[j];
    }
    for (int j = 0; j < ACC; j++) acc[j] = a[j];
}
static double since(struct timespec *t0, clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}
int main(int argc, char **argv) {
    long blocks = atol(argv[1]) / (VECTOR_BYTES * ACC);
    double seconds = atof(argv[2]);
    size_t bytes = (size_t)blocks * ACC * VECTOR_BYTES;
    long chunk = bytes < (4L << 20) ? (4L << 20) / bytes : 1;  /* passes between clock reads */
    char *data;
    if (blocks < 1 || posix_memalign((void **)&data, 1 << 21, bytes)) return 1;
#ifdef MADV_HUGEPAGE
    madvise(data, bytes, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < bytes; i += 4096) data[i] = 1;  /* every page its own, zeroed */
    pass((const vec *)data, blocks);
    for (int window = atoi(argv[3]); window > 0; window--) {  /* a line each */
        struct timespec t0, c0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        double s = 0;
        long passes = 0;
        while (s < seconds) {
            for (long p = 0; p < chunk; p++) pass((const vec *)data, blocks);
            passes += chunk;
            s = since(&t0, CLOCK_MONOTONIC);
        }
        double cpu = since(&c0, CLOCK_PROCESS_CPUTIME_ID);
        float sum = 0;
        for (int j = 0; j < ACC; j++)
            for (int l = 0; l < LANES; l++) sum += acc[j][l];
        printf("%f %f %f\n", (double)bytes * passes / s / 1e9, cpu / s, sum);
    }
    free(data);
    return 0;
}
"""
SYSFS_CPUS = Path("/sys/devices/system/cpu")
CACHE_LEVELS = ("L1", "L2", "L3")
# DRAM's working set: this many times the largest cache one copy has, and at least DRAM_LEAST
# per copy (past any cache it might share), with every copy's together at most MEMORY_SHARE of
# the memory free.
DRAM_TIMES = 4
DRAM_LEAST = 64 << 20
MEMORY_SHARE = 0.25


class CacheSize(NamedTuple):
    """One cache level as this machine reports it."""

    level: str  # "L1" (its data cache), "L2", "L3"
    size_bytes: int  # one instance's capacity
    shared_by: int  # the CPUs measured (a copy each) that share that instance


class Planned(NamedTuple):
    """A level's working set per copy, or why it has none."""

    level: str  # "L1", "L2", "L3", "DRAM"
    working_set_bytes: int | None
    reason: str  # "" where it has a working set
    size: CacheSize | None  # None: DRAM


class CacheBandwidth(TypedDict):
    """A level's read bandwidth, every core at once, each copy over a buffer of its own
    (measure_cache_bandwidth)."""

    level: str  # "L1", "L2", "L3", "DRAM"
    working_set_bytes: int | None  # each copy's buffer; None: no size known for the level
    gbps: float | None  # summed over the copies; None: not measured, or not used (`reason`)
    vector: str
    reason: NotRequired[str]
    cache_bytes: NotRequired[int]  # the level's capacity (one instance), as read
    shared_by: NotRequired[int]  # ...the CPUs measured that share it
    sizes_from: NotRequired[str]  # ...and where they were read: "sysfs" or "py-cpuinfo"
    shared_gbps: NotRequired[float]  # what a shared window measured, kept but not used
    per_core_gbps: NotRequired[list[float]]
    cpu_shares: NotRequired[list[float]]


def size_bytes(text: object) -> int | None:
    """A cache size as sysfs ("48K") or py-cpuinfo (a number of bytes, or "256 KiB") writes it."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if text > 0 else None
    if not isinstance(text, str):
        return None
    number = text.strip().upper().removesuffix("B").removesuffix("I").strip()
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(number[-1:], 1)
    try:
        value = int(float(number.rstrip("KMG").strip()) * unit)
    except ValueError:
        return None
    return value if value > 0 else None


def binary_size(nbytes: int) -> str:
    """A size in the binary unit that reads best: 48 KiB, 1024 KiB, 1.5 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    return f"{nbytes} bytes"


def cpu_list(text: str) -> set[int]:
    """CPU numbers as sysfs lists them: "0-3,8"."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def sysfs_cache_sizes(usable: set[int] | None, sysfs: Path = SYSFS_CPUS) -> list[CacheSize]:
    """The data and unified caches of the first CPU measured, from Linux's sysfs, each shared by
    the CPUs measured in its shared_cpu_list ([] where sysfs does not tell)."""
    first = min(usable) if usable else 0
    sizes: dict[str, CacheSize] = {}
    for index in sorted((sysfs / f"cpu{first}" / "cache").glob("index*")):
        try:
            kind, level, size, shared = (
                (index / name).read_text(encoding="utf-8").strip()
                for name in ("type", "level", "size", "shared_cpu_list")
            )
        except OSError:
            continue
        name, capacity = f"L{level}", size_bytes(size)
        if kind not in ("Data", "Unified") or name not in CACHE_LEVELS or capacity is None:
            continue
        sharing = cpu_list(shared) & usable if usable else cpu_list(shared)
        sizes[name] = CacheSize(name, capacity, max(1, len(sharing)))
    return [sizes[name] for name in CACHE_LEVELS if name in sizes]


def cpuinfo_cache_sizes(info: dict[str, Any], cpus: int, system: str) -> list[CacheSize]:
    """The cache sizes py-cpuinfo reports. On Linux (read from lscpu) each is the sum over its
    instances, so one CPU's share is it over every CPU; elsewhere (macOS's sysctl) L1d and L2
    are one core's and L3 is shared by every core."""
    keys = {"L1": "l1_data_cache_size", "L2": "l2_cache_size", "L3": "l3_cache_size"}
    out = []
    for name, key in keys.items():
        capacity = size_bytes(info.get(key))
        if capacity is not None:
            shared = cpus if system == "Linux" or name == "L3" else 1
            out.append(CacheSize(name, capacity, max(1, shared)))
    return out


def cache_sizes(
    info: dict[str, Any], usable: set[int] | None, machine_cpus: int, system: str
) -> tuple[list[CacheSize], str]:
    """(this CPU's cache levels, where they were read): Linux's sysfs, else py-cpuinfo's `info`
    (the probe reads them once, roofline.device.hardware.cpu_facts)."""
    if system == "Linux" and (found := sysfs_cache_sizes(usable)):
        return found, "sysfs"
    return cpuinfo_cache_sizes(info, machine_cpus, system), "py-cpuinfo"


def working_sets(
    sizes: list[CacheSize], copies: int, memory_bytes: int, block: int = 64
) -> list[Planned]:
    """Each level's working set per copy, as the cache-aware roofline chooses them: about half
    of what one copy has of the level (its capacity over the CPUs measured that share it), above
    what it has of the level below (else halfway between the two, or none where the level gives
    a copy no more than the level below); DRAM's DRAM_TIMES the largest cache a copy has, at
    least DRAM_LEAST, all copies' together within MEMORY_SHARE of `memory_bytes` (the memory
    free). Each a whole number of `block`s (the kernel's step)."""
    known = {size.level: size for size in sizes}
    room = int(memory_bytes * MEMORY_SHARE) // max(1, copies)
    out, below = [], 0  # what one copy has of the level below
    for name in CACHE_LEVELS:
        size = known.get(name)
        if size is None:
            if not sizes:  # nothing known of any level: said, where a level unknown is absent
                out.append(
                    Planned(name, None, "not measured: the cache sizes are unknown here", None)
                )
            continue
        share = size.size_bytes // size.shared_by
        if share <= below:
            why = f"each copy's share of it, {share:,} bytes, is no more than of the level below"
            out.append(Planned(name, None, f"not measured: {why}", size))
            continue
        working = share // 2 if share // 2 > below else (below + share) // 2
        if working > room:  # a described cache larger than the memory (1 TiB of L3)
            why = f"each copy's working set, {working:,} bytes, would not fit in {MEMORY_SHARE:.0%} of the memory free"
            out.append(Planned(name, None, f"not measured: {why}", size))
            continue
        out.append(Planned(name, max(block, working // block * block), "", size))
        below = share
    working = max(DRAM_TIMES * below, DRAM_LEAST)
    if min(working, room) <= below:
        why = (
            f"{copies} buffers larger than the caches would not fit in {MEMORY_SHARE:.0%} of "
            "the memory free"
        )
        return [*out, Planned("DRAM", None, f"not measured: {why}", None)]
    return [*out, Planned("DRAM", min(working, room) // block * block, "", None)]


def read_bound_gbps(level: str, cores: int, clock_ghz: float | None) -> tuple[float, str]:
    """What no read of this level by these cores can exceed, and how: MAX_LOAD_BYTES a cycle
    per core at the measured clock (or MAX_CLOCK_GHZ)."""
    clock = clock_ghz or MAX_CLOCK_GHZ
    per_cycle = MAX_LOAD_BYTES[level]
    return cores * clock * per_cycle, f"{cores} cores x {clock:.3g} GHz x {per_cycle} bytes a cycle"


def measure_cache_bandwidth(
    cores: int,
    isa: list[str],
    sizes: list[CacheSize],
    sizes_from: str,
    seconds: float = 0.1,
    memory_bytes: int | None = None,
    clock_ghz: float | None = None,
) -> list[CacheBandwidth]:
    """The read bandwidth of each cache level and of DRAM, every core at once (a copy each,
    each over its own buffer, at the widest vector the flags show), summed over the copies:
    one entry per level, its gbps None with a reason where nothing here compiles the kernel, no
    working set fits the level, or every window was shared. `sizes`: the cache levels, as the
    probe read them from `sizes_from`; `memory_bytes`: the memory free (default: psutil's)."""
    import psutil

    _, width, accumulators, vector = next(v for v in VECTORS if not v[0] or v[0] in isa)
    free = psutil.virtual_memory().available if memory_bytes is None else memory_bytes
    plan = working_sets(sizes, cores, free, width * accumulators)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            binary = build(READ_PROGRAM, Path(tmp), {"VECTOR_BYTES": width, "ACC": accumulators})
            why = not_built()
        except ProgramFailed as err:
            binary, why = None, str(err)
        for level in plan:
            entry: CacheBandwidth = {
                "level": level.level,
                "working_set_bytes": level.working_set_bytes,
                "gbps": None,
                "vector": vector,
            }
            if level.size is not None:
                size = level.size
                entry |= {"cache_bytes": size.size_bytes, "shared_by": size.shared_by}
                entry |= {"sizes_from": sizes_from}
            if level.working_set_bytes is None:
                out.append(entry | {"reason": level.reason})
            elif binary is None:
                out.append(entry | {"reason": f"not measured: {why}"})
            else:
                read = read_bandwidth(binary, level.working_set_bytes, cores, seconds)
                bound, how = read_bound_gbps(level.level, cores, clock_ghz)
                if (read.get("gbps") or 0) > bound:
                    gbps = read["gbps"]
                    faster = (
                        f"{gbps:.4g} GB/s is above what these cores can load, {bound:.4g} ({how})"
                    )
                    read = {"gbps": None, "reason": f"refused: {faster}"}
                out.append(entry | read)
    return out


class ReadWindow(TypedDict, total=False):
    gbps: float | None
    reason: str
    shared_gbps: float
    per_core_gbps: list[float]
    cpu_shares: list[float]


def run_windows(
    binary: Path, args: list[str], copies: int, timeout_s: float | None = None
) -> list[Window]:
    """`copies` processes at once, each printing a line a window: the windows, each with every
    copy's first number and share of a CPU in it. ProgramFailed where a copy could not be run,
    did not end in `timeout_s`, failed, or printed something other than numbers."""
    timeout_s = RUN_TIMEOUT_S if timeout_s is None else timeout_s
    runs: list[subprocess.Popen[str]] = []
    try:
        for _ in range(copies):
            runs.append(subprocess.Popen([binary, *args], stdout=subprocess.PIPE, text=True))
        deadline = time.monotonic() + timeout_s
        out = [run.communicate(timeout=max(0.0, deadline - time.monotonic()))[0] for run in runs]
    except PermissionError as err:
        raise ProgramFailed(
            f"it could not be run ({err.strerror}: a temporary folder mounted noexec? "
            "set TMPDIR to one that allows programs)"
        ) from None
    except OSError as err:
        raise ProgramFailed(f"it could not be run ({type(err).__name__}: {err})") from None
    except subprocess.TimeoutExpired:
        raise ProgramFailed(f"it did not finish in {timeout_s:g} s") from None
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
    failed = sorted({run.returncode for run in runs if run.returncode})
    if failed:
        raise ProgramFailed(f"it exited with code {failed[0]}")
    printed = [[figures(line) for line in text.splitlines()] for text in out]
    for text, rows in zip(out, printed, strict=True):
        for line, row in zip(text.splitlines(), rows, strict=True):
            if row is None:
                raise ProgramFailed(f"it printed {line[:60]!r}, not its figures")
    return [
        Window([p[i][0] for p in printed], [p[i][1] for p in printed])
        for i in range(min(len(p) for p in printed))
    ]


def figures(line: str) -> tuple[float, float] | None:
    """A kernel's line: its figure (positive) and its share of one CPU (at most all of it,
    with room for the two clocks' granularity); None where the line is not that."""
    try:
        value, share = (float(x) for x in line.split()[:2])
    except ValueError:  # not numbers, or fewer than two
        return None
    return (value, share) if 0 < value < math.inf and 0 <= share <= MAX_CPU_SHARE else None


def read_bandwidth(
    binary: Path, working: int, cores: int, seconds: float, windows: int = WINDOWS
) -> ReadWindow:
    """Every core reading a buffer of `working` bytes of its own, `windows` windows of about
    `seconds` one after another in the same processes (a buffer is filled once: DRAM's takes
    longer to fill than to read): the best window none of them shared."""
    try:
        seen = run_windows(binary, [str(working), str(seconds), str(windows)], cores)
    except ProgramFailed as err:
        return {"gbps": None, "reason": f"not measured: {err}"}
    if not seen:
        return {"gbps": None, "reason": "not measured: it printed nothing"}
    window, shared = best_of(seen)
    if shared:
        return {"gbps": None, "reason": f"not used: {shared}", "shared_gbps": sum(window.values)}
    return {"gbps": sum(window.values), "per_core_gbps": window.values, "cpu_shares": window.shares}
