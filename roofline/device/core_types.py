"""A CPU with two kinds of core (Intel's P- and E-cores, from its 12th generation; Apple's
performance levels): which CPUs are which, and each kind's clock, as Linux's sysfs lists them,
or each level's cores and clusters, as macOS's sysctl does; and the physical cores under a set of
CPUs, from sysfs's topology. Windows says neither: no kinds there. The computed peak counts each
kind with its own cores, FLOP per cycle and clock (roofline.interpretation.interpret.peaks):
a laptop's E-cores run AVX2 on 128-bit units at a lower clock, so one figure for all its
cores would be wrong both ways."""

import subprocess
from collections.abc import Callable
from pathlib import Path

from roofline.device.description import CoreType

# Linux lists a hybrid CPU's kinds as perf PMUs (since 5.13): the P-cores' CPUs in
# /sys/devices/cpu_core/cpus, the E-cores' in /sys/devices/cpu_atom/cpus. A CPU of one kind has
# neither folder (its PMU is /sys/devices/cpu).
KINDS = (("cpu_core", "P-cores", False), ("cpu_atom", "E-cores", True))

# The E-cores whose vector units are known, by the CPUID model of the chip (family 6): Gracemont,
# in Alder Lake (0x97, 0x9A) and Raptor Lake (0xB7, 0xBA, 0xBF), runs AVX2 on two 128-bit FMA
# units, half a P-core's rate (an i5-1340P E-core: 54 GFLOP/s FP32 at about 3.4 GHz, 16 FLOP per
# cycle; its P-core 146.8 at about 4.6, 32; cpufp's benchmark_result/x64/Intel_Core_i5_1340P.md).
# A chip not listed gets no computed peak for its E-cores: add its model here, with the source.
E_CORES = dict.fromkeys((0x97, 0x9A, 0xB7, 0xBA, 0xBF), "gracemont")


def cpu_list(text: str) -> set[int]:
    """The CPUs of a sysfs list, as the kernel writes it: "0-3,8,10-11"."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def max_clock_ghz(cpus: set[int], sysfs: Path) -> float | None:
    """The highest clock cpufreq says these CPUs reach (cpuinfo_max_freq, in kHz), or None where
    none says (a VM without cpufreq)."""
    found = []
    for cpu in cpus:
        try:
            khz = (sysfs / f"devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq").read_text(
                encoding="utf-8"
            )
            found.append(int(khz) / 1e6)
        except (OSError, ValueError):
            continue
    return max(found) if found else None


def physical_cores_of(cpus: set[int], sysfs: Path = Path("/sys/devices/system/cpu")) -> int | None:
    """The physical cores these logical CPUs sit on (SMT siblings share one), from Linux's
    sysfs topology; None where it does not tell."""
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text(encoding="utf-8").strip()
            core = (topology / "core_id").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        cores.add((package, core))
    return len(cores) or None


def core_types(
    usable: set[int], family: int | None, model: int | None, sysfs: Path = Path("/sys")
) -> list[CoreType] | None:
    """The kinds of core among the CPUs a run uses, P-cores first; None on a CPU of one kind, or
    where the run uses one kind only (a fence): then the CPU's own figures hold."""
    kinds: list[CoreType] = []
    for pmu, name, efficiency in KINDS:
        try:
            cpus = cpu_list((sysfs / "devices" / pmu / "cpus").read_text(encoding="utf-8")) & usable
        except (OSError, ValueError):
            return None
        if not cpus:
            continue
        kinds.append(
            {
                "name": name,
                "cores": physical_cores_of(cpus, sysfs / "devices/system/cpu") or len(cpus),
                "logical_cores": len(cpus),
                "efficiency": efficiency,
                # a P-core runs the CPU's flags at full width; an E-core its own units
                "microarchitecture": E_CORES.get(model or -1)
                if efficiency and family == 6
                else None,
                "max_clock_ghz": max_clock_ghz(cpus, sysfs),
            }
        )
    return kinds if len(kinds) > 1 else None


def sysctl(name: str) -> str | None:
    """macOS's answer for one sysctl name, or None where it has none."""
    try:
        done = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def apple_levels(read: Callable[[str], str | None] = sysctl) -> list[CoreType] | None:
    """Apple silicon's kinds of core, from its performance levels (Apple's "Determining system
    capabilities": hw.nperflevels, hw.perflevelN.name, .physicalcpu, .logicalcpu, .cpusperl2;
    a cluster is the cores that share an L2, and each has one matrix unit). "Performance" and
    "Efficiency" on M1-M4; "Super" and "Performance" on M5 Pro and Max. No clock: macOS gives
    none on Apple silicon. None where there are fewer than two levels, or a name is missing."""
    try:
        levels = int(read("hw.nperflevels") or 0)
        kinds: list[CoreType] = []
        for level in range(levels):
            prefix = f"hw.perflevel{level}"
            name = read(f"{prefix}.name")
            cores, logical = (
                int(read(f"{prefix}.physicalcpu") or 0),
                int(read(f"{prefix}.logicalcpu") or 0),
            )
            per_l2 = int(read(f"{prefix}.cpusperl2") or 0)
            if not (name and cores and logical and per_l2):
                return None
            kinds.append(
                {
                    "name": f"{name} cores",
                    "cores": cores,
                    "logical_cores": logical,
                    "efficiency": name == "Efficiency",
                    "microarchitecture": None,
                    "max_clock_ghz": None,
                    "clusters": max(1, cores // per_l2),
                }
            )
    except ValueError:  # an answer that is not a number
        return None
    return kinds if len(kinds) > 1 else None
