"""Whether this process may read its own CPU's performance counters: the one measurement that
would split a CPU kernel's remaining loss (FP instructions retired per cycle). Linux's
perf_event_open is asked for this process's user-mode cycles, as `perf stat` asks; its refusal is
recorded by name, never as a zero. A VM without a virtual PMU answers ENOENT (this repo's 2-core
EPYC VM: no `cpu` event source at all); a laptop at perf_event_paranoid 2 lets a process count
itself. No library on the package index wraps perf_event_open (the `perf` Python bindings ship
with the kernel's tools), hence the one system call through ctypes."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

# perf_event_open's system call number, by architecture (the kernel's syscall tables).
SYSCALL = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241}
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
ATTR_SIZE = 128  # a perf_event_attr as the kernel's PERF_ATTR_SIZE_VER8 has it
PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES = 0, 0
# attr.flags bits: disabled (1 << 0), exclude_kernel (1 << 5), exclude_hv (1 << 6): counting
# one's own user-mode cycles, which paranoid 2 allows an unprivileged process.
FLAGS = (1 << 0) | (1 << 5) | (1 << 6)
PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE = 0x2400, 0x2401

# What each refusal means here, by errno name (perf_event_open(2)).
REFUSALS = {
    "ENOENT": "no PMU, as in a VM",
    "ENODEV": "no PMU",
    "EOPNOTSUPP": "the PMU cannot count cycles",
    "EACCES": "not allowed to an unprivileged process",
    "EPERM": "not allowed to an unprivileged process",
    "ENOSYS": "no perf_event_open in this kernel",
}


class PerfCounters(TypedDict):
    """Whether this process read its own CPU's hardware counters, and if not, why."""

    readable: bool
    reason: str  # why not, or what was counted
    paranoid: int | None  # /proc/sys/kernel/perf_event_paranoid, where there is one


def refusal(code: int, paranoid: int | None) -> str:
    """A refused perf_event_open, by name and meaning."""
    name = errno.errorcode.get(code, str(code))
    said = REFUSALS.get(name, os.strerror(code))
    at = f"; perf_event_paranoid {paranoid}" if paranoid is not None else ""
    return f"perf_event_open refused: {name} ({said}{at})"


def _paranoid() -> int | None:
    try:
        return int(PARANOID.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _open_cycles(number: int) -> tuple[int, int]:
    """(a counter's file descriptor or -1, errno) for this process's user-mode cycles."""
    attr = bytearray(ATTR_SIZE)
    struct.pack_into("IIQ", attr, 0, PERF_TYPE_HARDWARE, ATTR_SIZE, PERF_COUNT_HW_CPU_CYCLES)
    struct.pack_into("Q", attr, 40, FLAGS)
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = (ctypes.c_char * ATTR_SIZE).from_buffer(attr)
    fd = libc.syscall(number, buffer, 0, -1, -1, 0)  # this process, any CPU, no group
    return fd, ctypes.get_errno() if fd < 0 else 0


def _count(fd: int) -> int:
    """The cycles the counter saw over a little work of this process."""
    import fcntl

    fcntl.ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
    sum(range(100_000))
    fcntl.ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
    return struct.unpack("q", os.read(fd, 8))[0]


def perf_counters(
    system: str | None = None,
    machine: str | None = None,
    open_cycles: Callable[[int], tuple[int, int]] = _open_cycles,
) -> PerfCounters:
    """Whether this process may count its own cycles (the system and machine are this one's
    unless given; `open_cycles` is the system call, given in tests)."""
    system = system or platform.system()
    machine = (machine or platform.machine()).lower()
    if system != "Linux":
        return {
            "readable": False,
            "reason": f"not read: the lab reads counters through Linux's perf_event_open, "
            f"which {system} does not have",
            "paranoid": None,
        }
    paranoid = _paranoid()
    if machine not in SYSCALL:
        return {
            "readable": False,
            "reason": f"not read: perf_event_open's number on {machine} is not known to the lab",
            "paranoid": paranoid,
        }
    fd, code = open_cycles(SYSCALL[machine])
    if fd < 0:
        return {"readable": False, "reason": refusal(code, paranoid), "paranoid": paranoid}
    try:
        cycles = _count(fd)
    finally:
        os.close(fd)
    if cycles <= 0:
        return {
            "readable": False,
            "reason": f"perf_event_open opened a cycles counter that counted {cycles}",
            "paranoid": paranoid,
        }
    return {
        "readable": True,
        "reason": f"this process counted its own cycles ({cycles} over a test loop)",
        "paranoid": paranoid,
    }
