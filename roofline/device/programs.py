"""The bounded C programs behind a CPU's own ceilings (the clock, the FMA ceiling, each cache
level's read bandwidth): compiled with this machine's C compiler for its widest vector, run a
copy on every core at once in short windows, each copy's figures read from what it prints,
and the best window no copy shared chosen. Every compile and every run has its time limit, and
what no CPU does is written here, for each ceiling to refuse. Where nothing here can compile a
program, or it fails, it says why (ProgramFailed) and measures nothing."""

import math
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

# The widest vector per instruction set the flags show: (flag, bytes, accumulators, name), for
# the FMA kernel (roofline.device.peakflops) and the read kernel (cache_ceilings) alike.
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
# ...and the lowest a CPU that runs this lab's kernels reaches under load (an M4's psutil reads
# 4 MHz, 1000x low: psutil #2642). A clock outside the two, measured or read, is no peak clock.
MIN_CLOCK_GHZ = 0.2
MAX_LOAD_BYTES = {"L1": 256, "L2": 128, "L3": 64, "DRAM": 64}
MAX_FLOP_PER_CYCLE = 64
FMA_MARGIN = 0.25  # an FMA ceiling above the computed peak by more is refused (turbo)
MAX_CPU_SHARE = 1.1  # a single-threaded copy's CPU time over its wall time


# The clocks of a kernel's window, for the programs that time window after window in one
# process (the read kernel, STREAM's): its wall time, and this process's CPU time in it.
WINDOW_CLOCKS = r"""
#include <time.h>
struct window { struct timespec wall, cpu; };
static double since(const struct timespec *t0, clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}
static void window_begin(struct window *w) {
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &w->cpu);
    clock_gettime(CLOCK_MONOTONIC, &w->wall);
}
static double window_wall(const struct window *w) { return since(&w->wall, CLOCK_MONOTONIC); }
static double window_cpu(const struct window *w) {
    return since(&w->cpu, CLOCK_PROCESS_CPUTIME_ID);
}
"""


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
