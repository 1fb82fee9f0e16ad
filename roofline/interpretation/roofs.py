"""What a measured figure is held to, in pure functions: MFU, the roofline (compute roof,
memory slope, ridge), energy per TFLOP and a CPU's computed peak. Units as in
roofline/core/arithmetic.py. Interpretation: no measuring stage imports this."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from roofline.core.arithmetic import cpu_flop_per_cycle


def mfu(achieved_tflops: float, peak_tflops: float) -> float:
    """Model FLOP utilisation: achieved over the dense peak of the same dtype."""
    return achieved_tflops / peak_tflops


def joules_per_tflop(power_w: float, seconds: float, flops: float) -> float:
    """Energy per TFLOP of work: average power x time per call / TFLOP per call."""
    return power_w * seconds / (flops / 1e12)


def ridge_point(peak_tflops: float, bandwidth_gbps: float) -> float:
    """Intensity (FLOP/byte) where the memory slope meets the compute roof."""
    return peak_tflops * 1e12 / (bandwidth_gbps * 1e9)


def roof_tflops(intensity_flop_per_byte: Any, peak_tflops: float, bandwidth_gbps: float) -> Any:
    """Attainable TFLOP/s at a given intensity (a number or an array of them):
    min(compute roof, bandwidth * intensity)."""
    return np.minimum(
        peak_tflops, bandwidth_gbps * 1e9 * np.asarray(intensity_flop_per_byte) / 1e12
    )


def cpu_peak_tflops(cores: int, clock_ghz: float, flop_per_cycle: int) -> float:
    """cores x clock x FLOP per cycle per core."""
    return cores * clock_ghz * 1e9 * flop_per_cycle / 1e12


def implied_clock_ghz(measured_tflops: float, cores: int, flop_per_cycle: int) -> float:
    """The clock a measured throughput needs at this FLOP per cycle on these cores: the inverse
    of cpu_peak_tflops. Above the clock a computed peak used, it says that clock was low."""
    return measured_tflops * 1e12 / (cores * flop_per_cycle * 1e9)


def core_types_peak(
    kinds: list[Mapping[str, Any]], dtype: str, flags: set[str], clock_ghz: float | None = None
) -> tuple[float, str] | str:
    """A CPU of two kinds of core (roofline.device.core_types): the sum, over its kinds, of cores
    x clock x FLOP per cycle, each kind's own (its clock: `clock_ghz` where conf sets one, else
    the highest its cores run at), and how; or why there is none (a kind whose FLOP per cycle or
    clock is not known: then no sum is the peak)."""
    terms, total = [], 0.0
    for kind in kinds:
        name = kind["name"]
        native = cpu_flop_per_cycle(dtype, flags, kind["microarchitecture"])
        if native is None:
            return f"no instruction set its {name} have runs {dtype} natively"
        if kind["efficiency"] and not kind["microarchitecture"]:
            return (
                f"its {name}' FLOP per cycle is not known for this chip: add its CPUID model to "
                "roofline/device/core_types.py's E_CORES, with the source"
            )
        clock = clock_ghz or kind["max_clock_ghz"]
        if not clock:
            return f"no clock known for its {name} (sysfs has no cpuinfo_max_freq for them)"
        flop, isa = native
        total += cpu_peak_tflops(kind["cores"], clock, flop)
        terms.append(f"{kind['cores']} {name} x {clock:.2f} GHz x {flop} FLOP/cycle ({isa})")
    source = "set in conf" if clock_ghz else "each kind's maximum, sysfs cpuinfo_max_freq"
    return total, f"{' + '.join(terms)}; clocks: {source}"
